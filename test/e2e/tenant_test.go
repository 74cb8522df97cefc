//go:build e2e

package e2e

import (
	"strings"
	"testing"
)

// TestTenantAdminRights checks the sample Tenant's admin rights as the real
// authorizer sees them, with the built-in admin role aggregated by the real
// kube-controller-manager: an admin in the team's namespaces, able to read
// its own Tenant, and nothing else.
func TestTenantAdminRights(t *testing.T) {
	useLocalManager(t)
	if _, err := kubectl("apply", "--server-side", "-f", root+"/config/samples/tenancy_v1_tenant.yaml"); err != nil {
		t.Fatal(err)
	}
	if _, err := kubectl("wait", "--for=condition=Ready", "tenant/team-a", "--timeout=60s"); err != nil {
		t.Fatal(err)
	}
	other := `apiVersion: tenancy.trellis.dev/v1
kind: Tenant
metadata: {name: team-b}
spec:
  namespaces: [dev]
  namespacePrefix: team-b-
  admin: {kind: Group, name: team-b-admins, apiGroup: rbac.authorization.k8s.io}
`
	if _, err := kubectlIn([]byte(other), "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	if _, err := kubectl("wait", "--for=condition=Ready", "tenant/team-b", "--timeout=60s"); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		args []string
		want string
	}{
		{[]string{"create", "deployments", "-n", "team-a-dev"}, "yes"},
		{[]string{"create", "rolebindings", "-n", "team-a-prod"}, "yes"},
		{[]string{"get", "secrets", "-n", "team-a-prod"}, "yes"},
		{[]string{"get", "tenant/team-a"}, "yes"},
		{[]string{"get", "namespace/team-a-dev"}, "yes"},
		{[]string{"get", "secrets", "-n", "team-b-dev"}, "no"},
		{[]string{"get", "secrets", "-n", "default"}, "no"},
		{[]string{"get", "secrets", "-n", "trellis-system"}, "no"},
		{[]string{"list", "namespaces"}, "no"},
		{[]string{"get", "tenant/team-b"}, "no"},
		{[]string{"patch", "tenant/team-a"}, "no"},
		{[]string{"delete", "namespace/team-a-dev"}, "no"},
		{[]string{"create", "clusterrolebindings"}, "no"},
	}
	for _, tc := range cases {
		args := append([]string{"auth", "can-i"}, tc.args...)
		args = append(args, "--as", "alice", "--as-group", "team-a-admins")
		out, _ := kubectl(args...) // can-i exits 1 for "no"
		if got := strings.TrimSpace(out); got != tc.want {
			t.Errorf("team-a admin: can-i %s = %q, want %q", strings.Join(tc.args, " "), got, tc.want)
		}
	}
}
