package manager

import (
	"strings"
	"testing"
)

// FuzzConcurrencyFlag: any value either fails to parse or yields counts that
// Validate then judges; it never panics, and what parsed prints back parseable.
func FuzzConcurrencyFlag(f *testing.F) {
	for _, seed := range []string{"4", "2,markdownview=4", "markdownview=1,tenant=8", "", ",,", "a=b", "=3", "x=", "-1", "99999999999999999999"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, v string) {
		var c concurrencyFlag
		if err := c.Set(v); err != nil {
			return
		}
		var again concurrencyFlag
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

// FuzzResourceOf: any path gives a non-empty label without panicking.
func FuzzResourceOf(f *testing.F) {
	for _, seed := range []string{"/api/v1/namespaces/a/configmaps/b", "/apis/apps/v1/deployments", "/", "", "/api", "//////", "/apis/x/y/namespaces/z"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, path string) {
		if resourceOf(path) == "" {
			t.Fatalf("empty resource label for %q", path)
		}
	})
}
