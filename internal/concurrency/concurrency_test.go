package concurrency

import (
	"strings"
	"testing"
)

func TestStringRoundTrips(t *testing.T) {
	var nilFlag *Flag
	if got := nilFlag.String(); got != "" {
		t.Errorf("nil: %q, want empty", got)
	}
	c := Flag{Default: 1}
	if got := c.String(); got != "1" {
		t.Errorf("%q, want 1", got)
	}
	// Names are sorted, so String is stable and round-trips through Set.
	if err := c.Set("2,zeta=3,alpha=4"); err != nil {
		t.Fatal(err)
	}
	if got := c.String(); got != "2,alpha=4,zeta=3" {
		t.Errorf("%q, want 2,alpha=4,zeta=3", got)
	}
	var again Flag
	if err := again.Set(c.String()); err != nil {
		t.Fatal(err)
	}
	if again.String() != c.String() {
		t.Errorf("round trip: %q, want %q", again.String(), c.String())
	}
}

func TestDefaultsStayWithoutABareNumber(t *testing.T) {
	for v, want := range map[string]string{
		"2,markdownview=4": "2,markdownview=4",
		"markdownview=4":   "0,markdownview=4,tenant=16",
		"tenant=3":         "0,tenant=3",
		"5":                "5",
	} {
		c := Flag{Defaults: map[string]int{"tenant": 16}}
		if err := c.Set(v); err != nil {
			t.Fatal(v, err)
		}
		if got := c.String(); got != want {
			t.Errorf("%q: %q, want %q", v, got, want)
		}
	}
}

// FuzzFlag: any value either fails to parse or yields counts that the
// manager's Validate then judges; it never panics, and what parsed prints
// back parseable.
func FuzzFlag(f *testing.F) {
	for _, seed := range []string{"4", "2,markdownview=4", "markdownview=1,tenant=8", "", ",,", "a=b", "=3", "x=", "-1", "99999999999999999999"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		var c Flag
		if err := c.Set(v); err != nil {
			return
		}
		var again Flag
		if err := again.Set(c.String()); err != nil {
			t.Fatalf("%q parsed, but its String() %q does not: %v", v, c.String(), err)
		}
		if again.Default != c.Default || len(again.PerController) != len(c.PerController) {
			// Names may contain '=' or ',' only if they round-trip; anything else must have failed above.
			if !strings.ContainsAny(v, "=,") {
				t.Fatalf("%q: round trip changed %+v into %+v", v, c, again)
			}
		}
	})
}
