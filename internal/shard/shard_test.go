package shard

import (
	"strings"
	"testing"
)

func TestMemberValidate(t *testing.T) {
	cases := map[string]struct {
		m       Member
		wantErr string
	}{
		"a pod in a ring":               {m: Member{Ring: "trellis-markdownview", Shard: "trellis-7d9f8-abcde"}},
		"no ring":                       {m: Member{Shard: "a"}, wantErr: "name is empty"},
		"a ring too long for a label":   {m: Member{Ring: strings.Repeat("r", 64), Shard: "a"}, wantErr: "longer than 63"},
		"a ring that is no name":        {m: Member{Ring: "Ring_1", Shard: "a"}, wantErr: "Ring_1"},
		"no shard name":                 {m: Member{Ring: "r"}, wantErr: "--pod-name"},
		"a shard too long for a label":  {m: Member{Ring: "r", Shard: strings.Repeat("s", 64)}, wantErr: "label value"},
		"a shard that is no Lease name": {m: Member{Ring: "r", Shard: "Shard_1"}, wantErr: "Lease's name"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			err := tc.m.Validate()
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("Validate() = %v, want nil", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.wantErr)
			}
		})
	}
}

// The label keys are the sharder's (its docs/implement-sharding.md).
func TestMemberLabels(t *testing.T) {
	m := Member{Ring: "views", Shard: "trellis-0"}
	if got := m.ShardLabel(); got != "shard.alpha.sharding.timebertt.dev/views" {
		t.Errorf("ShardLabel() = %q", got)
	}
	if got := m.DrainLabel(); got != "drain.alpha.sharding.timebertt.dev/views" {
		t.Errorf("DrainLabel() = %q", got)
	}
	if got := m.LeaseLabels(); len(got) != 1 || got["alpha.sharding.timebertt.dev/controllerring"] != "views" {
		t.Errorf("LeaseLabels() = %v", got)
	}
	for labels, want := range map[*map[string]string]bool{
		{}:                            false,
		{m.ShardLabel(): "trellis-0"}: false,
		{m.ShardLabel(): "trellis-0", m.DrainLabel(): "true"}: true,
		{m.DrainLabel(): ""}: true,
		{"drain.alpha.sharding.timebertt.dev/other": "true"}: false,
	} {
		if got := m.Draining(*labels); got != want {
			t.Errorf("Draining(%v) = %v, want %v", *labels, got, want)
		}
	}
}
