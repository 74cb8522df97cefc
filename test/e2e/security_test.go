//go:build e2e

package e2e

import (
	"flag"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

var updateGolden = flag.Bool("update-golden", false, "rewrite testdata/manager-permissions.golden from the cluster")

// TestManagerPermissionsMatchGolden lists what the manager's ServiceAccount
// may do, as the API server's authorizer answers it, and compares it with a
// reviewed golden file: a permission added by a marker shows up in review.
func TestManagerPermissionsMatchGolden(t *testing.T) {
	useLocalManager(t) // installs config/rbac
	sa := "system:serviceaccount:trellis-system:trellis-controller-manager"
	var lines []string
	for _, ns := range []string{"trellis-system", "default"} {
		out, err := kubectl("auth", "can-i", "--list", "--as", sa, "-n", ns, "--no-headers")
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(l)
			if len(f) == 0 || strings.HasPrefix(f[0], "selfsubject") {
				continue // every authenticated user has these
			}
			lines = append(lines, ns+": "+strings.Join(f, " "))
		}
	}
	sort.Strings(lines)
	got := strings.Join(lines, "\n") + "\n"
	golden := filepath.Join(root, "test", "e2e", "testdata", "manager-permissions.golden")
	if *updateGolden {
		if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run the e2e suite with -update-golden once, and review the file)", err)
	}
	if got != string(want) {
		t.Errorf("the manager's permissions changed; review and update %s:\n--- want\n%s\n--- got\n%s", golden, want, got)
	}
}
