//go:build e2e

package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestTenantAdminCannotTakeOrEscape attacks a Tenant's boundary as its admin
// on a real cluster: the built-in admin and view roles as the real
// kube-controller-manager aggregates them, and config/admission. Each case is
// an attack a tenancy operator has fallen to (Capsule's advisories
// CVE-2024-39690, CVE-2022-46167, GHSA-2ww6-hf35-mfjm, CVE-2025-55205,
// CVE-2026-22872; docs/security.md) or one of Trellis' own; want is a
// fragment of the refusal, which says who refused (RBAC: "forbidden" with
// the verb and resource — kubectl reads an object before it patches it, so
// where the admin may not even read it, the read is what RBAC refuses; the
// admission policy: its message).
func TestTenantAdminCannotTakeOrEscape(t *testing.T) {
	useLocalManager(t)
	installTenantAdmissionPolicy(t)
	for _, name := range []string{"attack", "victim"} {
		if _, err := kubectlIn([]byte(guardedTenantManifest(name)), "apply", "--server-side", "-f", "-"); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"attack", "victim"} {
		if _, err := kubectl("wait", "--for=condition=Ready", "tenant/"+name, "--timeout=120s"); err != nil {
			t.Fatal(err)
		}
	}
	// A namespace of nobody's, as kube-public or a system component's would be.
	if _, err := kubectl("create", "namespace", "attack-free"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = kubectl("delete", "namespace", "attack-free", "--wait=false") })
	const own, group = "attack-dev", "attack-admins"
	ownerRef := `{"metadata":{"ownerReferences":[{"apiVersion":"tenancy.trellis.dev/v1","kind":"Tenant","name":"attack","uid":"00000000-0000-0000-0000-000000000000","controller":true}]}}`

	attacks := []struct {
		name  string
		args  []string
		stdin string
		want  string
	}{
		// CVE-2024-39690: a tenant owner patched a free namespace's owner
		// references and took it into the tenant.
		{"take a free namespace by owner reference", []string{"patch", "namespace", "attack-free", "--type=merge", "-p", ownerRef}, "",
			`cannot get resource "namespaces"`},
		{"take a free namespace by the tenant label", []string{"label", "namespace", "attack-free", "tenancy.trellis.dev/tenant=attack"}, "",
			`cannot get resource "namespaces"`},
		{"ask Trellis to hand a free namespace over", []string{"annotate", "namespace", "attack-free", "tenancy.trellis.dev/hand-over-to=attack"}, "",
			`cannot get resource "namespaces"`},
		// CVE-2022-46167: a tenant's ServiceAccount detached its own
		// namespace from the tenant to drop Pod Security and the guardrails.
		{"detach its own namespace", []string{"label", "namespace", own, "tenancy.trellis.dev/tenant-"}, "",
			`cannot patch resource "namespaces"`},
		// GHSA-2ww6-hf35-mfjm: the status and finalize subresources also
		// write a namespace's metadata.
		{"relabel through namespaces/status", []string{"patch", "namespace", own, "--subresource=status", "--type=merge",
			"-p", `{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"privileged"}}}`}, "",
			`cannot patch resource "namespaces/status"`},
		{"relabel through namespaces/finalize", []string{"replace", "--raw", "/api/v1/namespaces/" + own + "/finalize", "-f", "-"},
			`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"` + own + `","labels":{"pod-security.kubernetes.io/enforce":"privileged"}},"spec":{"finalizers":[]}}`,
			"forbidden"},
		// CVE-2025-55205: labels that other selectors trust, injected into
		// namespaces; here the label the isolation policies admit by.
		{"create a namespace labelled as the victim's", []string{"create", "-f", "-"},
			"apiVersion: v1\nkind: Namespace\nmetadata: {name: attack-extra, labels: {tenancy.trellis.dev/tenant: victim}}\n",
			`cannot create resource "namespaces"`},
		{"add a namespace to its Tenant", []string{"patch", "tenant", "attack", "--type=merge", "-p", `{"spec":{"namespaces":["dev","prod","extra"]}}`}, "",
			`cannot patch resource "tenants"`},
		// CVE-2026-22872: a tenant made the operator create cluster-scoped
		// objects for it. Trellis takes no object from a tenant admin to
		// create; what an admin can create, RBAC bounds.
		{"bind cluster-admin in its namespace", []string{"create", "rolebinding", "own-cluster-admin", "-n", own, "--clusterrole=cluster-admin", "--user=alice"}, "",
			"forbidden"},
		{"widen the per-tenant ClusterRole", []string{"patch", "clusterrole", "trellis:tenant:attack", "--type=json",
			"-p", `[{"op":"add","path":"/rules/-","value":{"apiGroups":["*"],"resources":["*"],"verbs":["*"]}}]`}, "",
			`cannot get resource "clusterroles"`},
		// Across tenants.
		{"bind itself into the victim's namespace", []string{"create", "rolebinding", "in", "-n", "victim-dev", "--clusterrole=admin", "--group=" + group}, "",
			"forbidden"},
		{"read the victim's Secrets", []string{"get", "secrets", "-n", "victim-dev"}, "",
			`cannot list resource "secrets"`},
		{"read the victim's Tenant", []string{"get", "tenant", "victim"}, "",
			`cannot get resource "tenants"`},
		{"admit the victim's namespaces into its own", []string{"apply", "-n", own, "-f", "-"}, `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: from-victim}
spec:
  podSelector: {}
  ingress: [{from: [{namespaceSelector: {matchLabels: {tenancy.trellis.dev/tenant: victim}}}]}]
`, "network-isolated"},
		{"pose as Trellis' isolation policy", []string{"apply", "-n", own, "-f", "-"}, `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-all, labels: {tenancy.trellis.dev/tenant: attack, app.kubernetes.io/managed-by: trellis}}
spec:
  podSelector: {}
  ingress: [{}]
`, "a guardrail or binding Trellis keeps"},
	}
	for _, tc := range attacks {
		args := append(append([]string{}, tc.args...), "--as", "alice", "--as-group", group)
		var out string
		var err error
		if tc.stdin != "" {
			out, err = kubectlIn([]byte(tc.stdin), args...)
		} else {
			out, err = kubectl(args...)
		}
		if err == nil {
			t.Errorf("%s: allowed (%s)", tc.name, strings.TrimSpace(out))
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: refused, but not as expected (want %q): %v", tc.name, tc.want, err)
		}
	}

	// Nothing moved: the free namespace is nobody's, the Tenants hold what
	// they declared.
	if out, err := kubectl("get", "namespace", "attack-free", "-o", "jsonpath={.metadata.labels}{.metadata.annotations}{.metadata.ownerReferences}"); err != nil ||
		strings.Contains(out, "tenancy.trellis.dev") || strings.Contains(out, "Tenant") {
		t.Errorf("the free namespace changed: %q (%v)", out, err)
	}
	for _, tenant := range []string{"attack", "victim"} {
		waitOutput(t, 60*time.Second, "True", "get", "tenant", tenant, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
	}
	for _, tenant := range []string{"attack", "victim"} {
		if _, err := kubectl("delete", "tenant", tenant, "--wait=true", "--timeout=120s"); err != nil {
			t.Fatal(err)
		}
	}
}
