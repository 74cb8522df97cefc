//go:build e2e

package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Guardrails as a tenant admin meets them on a real cluster: the built-in
// admin role aggregated by the real kube-controller-manager, Pod Security
// Admission and ResourceQuota admission in the real kube-apiserver, and the
// admission policy of config/admission.

var admissionPolicyOnce sync.Once

// installTenantAdmissionPolicy applies config/admission as `make deploy`
// does (config/default includes it), once per suite.
func installTenantAdmissionPolicy(t *testing.T) {
	t.Helper()
	var err error
	admissionPolicyOnce.Do(func() {
		var manifests []byte
		manifests, err = exec.Command(filepath.Join(bin, "kustomize"), "build", filepath.Join(root, "config", "admission")).Output()
		if err != nil {
			err = fmt.Errorf("kustomize build config/admission: %w %s", err, exitStderr(err))
			return
		}
		_, err = kubectlIn(manifests, "apply", "--server-side", "-f", "-")
	})
	if err != nil {
		t.Fatal(err)
	}
}

// asTenantAdmin runs kubectl impersonating a member of the tenant's admin group.
func asTenantAdmin(group string, args ...string) (string, error) {
	return kubectl(append(args, "--as", "alice", "--as-group", group)...)
}

// guardedTenantManifest is a Tenant with every guardrail: restricted Pod
// Security, two pods and one CPU per namespace, container defaults, and
// network isolation.
func guardedTenantManifest(name string) string {
	return fmt.Sprintf(`apiVersion: tenancy.trellis.dev/v1
kind: Tenant
metadata: {name: %[1]s}
spec:
  namespaces: [dev, prod]
  namespacePrefix: %[1]s-
  admins: [{kind: Group, name: %[1]s-admins, apiGroup: rbac.authorization.k8s.io}]
  viewers: [{kind: Group, name: %[1]s-viewers, apiGroup: rbac.authorization.k8s.io}]
  quota: {hard: {pods: "2", requests.cpu: "1"}}
  limitRange:
    limits:
    - type: Container
      defaultRequest: {cpu: 100m, memory: 64Mi}
      default: {cpu: 200m, memory: 128Mi}
      max: {cpu: "1", memory: 1Gi}
  networkIsolation: {allowFromNamespaces: [ingress-nginx]}
  podSecurity: {enforce: restricted, warn: restricted, audit: restricted}
  namespaceMetadata: {labels: {cost-center: "%[1]s"}}
`, name)
}

// restrictedPod meets the restricted Pod Security Standard; it sets no
// resources, so the LimitRange gives it its defaults.
func restrictedPod(name string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: %s}
spec:
  securityContext: {runAsNonRoot: true, runAsUser: 1000, seccompProfile: {type: RuntimeDefault}}
  containers:
  - name: app
    image: registry.example.com/app:1
    securityContext: {allowPrivilegeEscalation: false, capabilities: {drop: [ALL]}}
`, name)
}

func TestTenantGuardrailsHoldAgainstItsAdmin(t *testing.T) {
	useLocalManager(t)
	installTenantAdmissionPolicy(t)
	if _, err := kubectlIn([]byte(guardedTenantManifest("guard")), "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	if _, err := kubectl("wait", "--for=condition=Ready", "tenant/guard", "--timeout=120s"); err != nil {
		t.Fatal(err)
	}
	const ns, group = "guard-dev", "guard-admins"

	// What the admin may and may not do, as the real authorizer says.
	rbac := []struct {
		args []string
		want string
	}{
		{[]string{"create", "pods", "-n", ns}, "yes"},
		{[]string{"create", "networkpolicies", "-n", ns}, "yes"}, // the admin role allows it: the admission policy decides
		{[]string{"delete", "resourcequotas", "-n", ns}, "no"},
		{[]string{"update", "resourcequotas", "-n", ns}, "no"},
		{[]string{"delete", "limitranges", "-n", ns}, "no"},
		{[]string{"patch", "namespace/" + ns}, "no"},
		{[]string{"get", "namespace/" + ns}, "yes"},
		{[]string{"get", "tenant/guard"}, "yes"},
		{[]string{"patch", "tenant/guard"}, "no"},
	}
	for _, tc := range rbac {
		out, _ := asTenantAdmin(group, append([]string{"auth", "can-i"}, tc.args...)...)
		if got := strings.TrimSpace(out); got != tc.want {
			t.Errorf("can-i %s = %q, want %q", strings.Join(tc.args, " "), got, tc.want)
		}
	}
	// Viewers read, and do nothing else.
	for args, want := range map[string]string{"list pods": "yes", "create pods": "no", "get secrets": "no"} {
		out, _ := kubectl(append(append([]string{"auth", "can-i"}, strings.Fields(args)...), "-n", ns, "--as", "bob", "--as-group", "guard-viewers")...)
		if got := strings.TrimSpace(out); got != want {
			t.Errorf("viewer: can-i %s = %q, want %q", args, got, want)
		}
	}

	// What the admin tries, and what stops them.
	refused := []struct {
		name  string
		args  []string
		stdin string
		want  string
	}{
		{"delete the quota", []string{"delete", "resourcequota", "trellis-tenant-quota", "-n", ns}, "", "forbidden"},
		{"raise the quota", []string{"patch", "resourcequota", "trellis-tenant-quota", "-n", ns, "--type=merge", "-p", `{"spec":{"hard":{"pods":"100"}}}`}, "", "forbidden"},
		{"delete the limit range", []string{"delete", "limitrange", "trellis-tenant-limits", "-n", ns}, "", "forbidden"},
		{"delete the network policy", []string{"delete", "networkpolicy", "trellis-tenant-isolation", "-n", ns}, "", "a guardrail or binding Trellis keeps"},
		{"open the network policy", []string{"patch", "networkpolicy", "trellis-tenant-isolation", "-n", ns, "--type=merge",
			"-p", `{"spec":{"ingress":[{"from":[{"namespaceSelector":{}}]}]}}`}, "", "a guardrail or binding Trellis keeps"},
		{"admit every namespace with a policy of their own", []string{"apply", "-n", ns, "-f", "-"}, `apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-all}
spec:
  podSelector: {}
  ingress: [{from: [{namespaceSelector: {}}]}]
`, "network-isolated"},
		{"delete the admins' binding", []string{"delete", "rolebinding", "trellis-tenant-admin", "-n", ns}, "", "a guardrail or binding Trellis keeps"},
		{"loosen Pod Security", []string{"label", "namespace", ns, "pod-security.kubernetes.io/enforce=privileged", "--overwrite"}, "", "forbidden"},
		{"take the network-isolation label off", []string{"label", "namespace", ns, "tenancy.trellis.dev/network-isolation-"}, "", "forbidden"},
		{"run a privileged pod", []string{"apply", "-n", ns, "-f", "-"}, `apiVersion: v1
kind: Pod
metadata: {name: root}
spec:
  containers:
  - name: app
    image: registry.example.com/app:1
    securityContext: {privileged: true}
`, `violates PodSecurity "restricted:latest"`},
	}
	for _, tc := range refused {
		var out string
		var err error
		if tc.stdin != "" {
			out, err = kubectlIn([]byte(tc.stdin), append(tc.args, "--as", "alice", "--as-group", group)...)
		} else {
			out, err = asTenantAdmin(group, tc.args...)
		}
		if err == nil {
			t.Errorf("%s: allowed (%s)", tc.name, strings.TrimSpace(out))
			continue
		}
		if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(tc.want)) {
			t.Errorf("%s: refused, but not as expected (want %q): %v", tc.name, tc.want, err)
		}
	}
	// Everything is as declared.
	for _, check := range [][]string{
		{"namespace", ns, "jsonpath={.metadata.labels.pod-security\\.kubernetes\\.io/enforce}", "restricted"},
		{"resourcequota", "trellis-tenant-quota", "jsonpath={.spec.hard.pods}", "2"},
		{"networkpolicy", "trellis-tenant-isolation", "jsonpath={.spec.ingress[0].from[0].namespaceSelector.matchLabels.tenancy\\.trellis\\.dev/tenant}", "guard"},
	} {
		out, err := kubectl("get", check[0], check[1], "-n", ns, "-o", check[2])
		if err != nil || strings.TrimSpace(out) != check[3] {
			t.Errorf("%s %s: %s = %q (%v), want %q", check[0], check[1], check[2], out, err, check[3])
		}
	}

	// Pods: the restricted level admits a compliant pod; the LimitRange
	// gives it its requests; the quota admits two, not three. Quota
	// admission waits for the quota controller to have counted once.
	waitOutput(t, 120*time.Second, "2", "get", "resourcequota", "trellis-tenant-quota", "-n", ns, "-o", "jsonpath={.status.hard.pods}")
	for _, pod := range []string{"ok-1", "ok-2"} {
		if _, err := kubectlIn([]byte(restrictedPod(pod)), "apply", "-n", ns, "-f", "-", "--as", "alice", "--as-group", group); err != nil {
			t.Fatalf("a compliant pod was refused: %v", err)
		}
	}
	out, err := kubectl("get", "pod", "ok-1", "-n", ns, "-o", "jsonpath={.spec.containers[0].resources.requests.cpu}")
	if err != nil || strings.TrimSpace(out) != "100m" {
		t.Errorf("the LimitRange's default request: got %q (%v), want 100m", out, err)
	}
	waitOutput(t, 120*time.Second, "2", "get", "resourcequota", "trellis-tenant-quota", "-n", ns, "-o", "jsonpath={.status.used.pods}")
	_, err = kubectlIn([]byte(restrictedPod("ok-3")), "apply", "-n", ns, "-f", "-", "--as", "alice", "--as-group", group)
	if err == nil || !strings.Contains(err.Error(), "exceeded quota") {
		t.Errorf("a third pod over a quota of two: got %v, want exceeded quota", err)
	}
	// The Tenant reports the tenant-wide figures: 2 of 4 pods, 200m of 2 CPUs.
	waitOutput(t, 120*time.Second, "2", "get", "tenant", "guard", "-o", "jsonpath={.status.quota.used.pods}")
	waitOutput(t, 30*time.Second, "4", "get", "tenant", "guard", "-o", "jsonpath={.status.quota.hard.pods}")
	waitOutput(t, 30*time.Second, "200m", "get", "tenant", "guard", "-o", "jsonpath={.status.quota.used.requests\\.cpu}")

	if _, err := kubectl("delete", "tenant", "guard", "--wait=true", "--timeout=120s"); err != nil {
		t.Fatal(err)
	}
}
