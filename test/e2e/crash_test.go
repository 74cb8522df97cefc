//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestKilledWhileConvergingRecovers: the manager is killed with SIGKILL while
// 100 MarkdownViews and 30 Tenants converge; a new manager finishes the job.
// The end state is exactly the desired one: one ConfigMap, Deployment and
// Service per MarkdownView, three namespaces per Tenant, nothing extra.
func TestKilledWhileConvergingRecovers(t *testing.T) {
	const views, tenants = 100, 30
	m := useLocalManager(t)
	if _, err := kubectl("create", "namespace", "crash"); err != nil {
		t.Fatal(err)
	}
	// The views' 100 viewer pods run on the one real node: left in place,
	// they would load every test after this one, and a change of viewer
	// image (the upgrade tests) would roll all of them.
	t.Cleanup(func() {
		if _, err := kubectl("delete", "namespace", "crash", "--timeout=300s"); err != nil {
			t.Error(err)
		}
	})
	var manifest strings.Builder
	for i := range views {
		fmt.Fprintf(&manifest, "---\napiVersion: view.trellis.dev/v1\nkind: MarkdownView\nmetadata: {name: v%d, namespace: crash}\nspec:\n  markdowns: {index.md: \"# %d\"}\n", i, i)
	}
	for i := range tenants {
		fmt.Fprintf(&manifest, "---\napiVersion: tenancy.trellis.dev/v1\nkind: Tenant\nmetadata: {name: crash-%d}\nspec:\n  namespaces: [a, b, c]\n  namespacePrefix: crash-%d-\n  admin: {kind: Group, name: crash-%d, apiGroup: rbac.authorization.k8s.io}\n", i, i, i)
	}
	if _, err := kubectlIn([]byte(manifest.String()), "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond) // mid-convergence
	m.kill()
	next, err := startManagerWith("after-crash", true)
	if err != nil {
		t.Fatal(err)
	}
	current = next

	start := time.Now()
	if _, err := kubectl("wait", "--for=condition=Ready", "markdownviews", "--all", "-n", "crash", "--timeout=300s"); err != nil {
		t.Fatal(err)
	}
	for i := range tenants {
		if _, err := kubectl("wait", "--for=condition=Ready", fmt.Sprintf("tenant/crash-%d", i), "--timeout=120s"); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("all converged %.1fs after the restart", time.Since(start).Seconds())

	for _, kind := range []string{"configmaps", "deployments", "services"} {
		if n := count(t, kind, "-n", "crash", "-l", "app.kubernetes.io/managed-by=trellis"); n != views {
			t.Errorf("%d %s for %d MarkdownViews", n, kind, views)
		}
	}
	if n := count(t, "namespaces", "-l", "tenancy.trellis.dev/tenant"); n < 3*tenants {
		t.Errorf("%d tenant namespaces, want at least %d", n, 3*tenants)
	}
	for i := range tenants {
		if n := count(t, "namespaces", "-l", fmt.Sprintf("tenancy.trellis.dev/tenant=crash-%d", i)); n != 3 {
			t.Errorf("tenant crash-%d has %d namespaces, want 3", i, n)
		}
		if n := count(t, "rolebindings", "-A", "-l", fmt.Sprintf("tenancy.trellis.dev/tenant=crash-%d", i)); n != 3 {
			t.Errorf("tenant crash-%d has %d RoleBindings, want 3", i, n)
		}
	}
}

func count(t *testing.T, kind string, args ...string) int {
	t.Helper()
	out, err := kubectl(append([]string{"get", kind, "-o", "json"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	return len(list.Items)
}
