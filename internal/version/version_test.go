package version

import (
	"runtime"
	"runtime/debug"
	"testing"
)

func stamp(settings ...string) func() (*debug.BuildInfo, bool) {
	return func() (*debug.BuildInfo, bool) {
		bi := &debug.BuildInfo{}
		for i := 0; i+1 < len(settings); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return bi, true
	}
}

func noBuildInfo() (*debug.BuildInfo, bool) { return nil, false }

func TestGet(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	cases := []struct {
		name              string
		version, revision string
		buildInfo         func() (*debug.BuildInfo, bool)
		want              Info
	}{
		{name: "set at link time", version: "v0.1.0", revision: "abc", buildInfo: stamp("vcs.revision", commit),
			want: Info{Version: "v0.1.0", Revision: "abc"}},
		{name: "nothing set: dev and the VCS stamp", buildInfo: stamp("vcs.revision", commit, "vcs.modified", "false"),
			want: Info{Version: "dev", Revision: commit}},
		{name: "a modified tree", version: "v0.1.0", buildInfo: stamp("vcs.revision", commit, "vcs.modified", "true"),
			want: Info{Version: "v0.1.0", Revision: commit + "-dirty"}},
		{name: "no VCS stamp", buildInfo: stamp("-trimpath", "true"),
			want: Info{Version: "dev", Revision: "unknown"}},
		{name: "no build info", buildInfo: noBuildInfo,
			want: Info{Version: "dev", Revision: "unknown"}},
	}
	for _, tc := range cases {
		tc.want.GoVersion = runtime.Version()
		if got := get(tc.version, tc.revision, tc.buildInfo); got != tc.want {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// Unset, the package says dev: a test binary is linked without -X.
func TestDefaults(t *testing.T) {
	if got := Get(); got.Version != "dev" || got.Revision == "" || got.GoVersion != runtime.Version() {
		t.Errorf("Get() = %+v, want dev, some revision, %s", got, runtime.Version())
	}
}

func TestString(t *testing.T) {
	got := Info{Version: "v0.1.0", Revision: "abc", GoVersion: "go1.26.8"}.String()
	if want := "v0.1.0 (revision abc, go1.26.8)"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
