//go:build e2e

package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfServiceTenant is guardedTenantManifest with self-service: two
// namespaces a team may add itself, named feature-..., deleted with their
// requests.
func selfServiceTenant(name string) string {
	return guardedTenantManifest(name) + `  namespaceDeletionPolicy: Delete
  selfService: {maxNamespaces: 2, namePattern: "feature-[a-z0-9-]+"}
`
}

// selfServiceHome is the namespace of the Tenant where its admin asks.
const selfServiceHome = "selfs-dev"

// waitRequest waits until the request's Ready condition has reason.
func waitRequest(t *testing.T, name, reason string) {
	t.Helper()
	waitRequestIn(t, selfServiceHome, name, reason)
}

// waitRequestIn waits until the request ns/name's Ready condition has reason.
func waitRequestIn(t *testing.T, ns, name, reason string) {
	t.Helper()
	if out, err := kubectl("wait", "-n", ns, "namespacerequest/"+name, "--timeout=90s",
		`--for=jsonpath={.status.conditions[?(@.type=="Ready")].reason}=`+reason); err != nil {
		status, _ := kubectl("get", "-n", ns, "namespacerequest/"+name, "-o", "jsonpath={.status}")
		t.Fatalf("request %s/%s never reached %s: %v %s; status %s", ns, name, reason, err, out, status)
	}
}

// request is a NamespaceRequest manifest.
func request(ns, name string) string {
	return fmt.Sprintf("apiVersion: tenancy.trellis.dev/v1\nkind: NamespaceRequest\nmetadata: {name: %s, namespace: %s}\n", name, ns)
}

// TestTenantAdminAddsNamespacesThemselves: a tenant admin, as the real
// authorizer sees them (the built-in admin role aggregated by the real
// kube-controller-manager), cannot create a namespace, but can ask for one
// of their Tenant with a NamespaceRequest: it is made with every guardrail,
// and the admin works in it. The count, names someone else holds (a
// namespace, another Tenant's prefix) and names outside the bounds are
// refused on the request; a request outside a Tenant is refused when made;
// deleting a request deletes its namespace, as the Tenant's policy says.
func TestTenantAdminAddsNamespacesThemselves(t *testing.T) {
	useLocalManager(t)
	installTenantAdmissionPolicy(t)
	// The roles `make deploy` installs (config/rbac) that put requests in
	// the built-in admin and view roles; the local manager's run has none.
	if _, err := kubectl("apply", "--server-side", "-f", filepath.Join(root, "config/rbac/namespacerequest_roles.yaml")); err != nil {
		t.Fatal(err)
	}
	const tenant, home, group = "selfs", selfServiceHome, "selfs-admins"
	t.Cleanup(func() {
		_, _ = kubectl("delete", "tenant", tenant, "selfs-neighbour", "--wait=false")
		_, _ = kubectl("delete", "namespace", "selfs-feature-held", "--wait=false")
	})
	if _, err := kubectlIn([]byte(selfServiceTenant(tenant)), "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	neighbour := `apiVersion: tenancy.trellis.dev/v1
kind: Tenant
metadata: {name: selfs-neighbour}
spec:
  namespaces: [a]
  namespacePrefix: selfs-feature-team-
  admins: [{kind: Group, name: neighbours, apiGroup: rbac.authorization.k8s.io}]
`
	if _, err := kubectlIn([]byte(neighbour), "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{tenant, "selfs-neighbour"} {
		if _, err := kubectl("wait", "--for=condition=Ready", "tenant/"+name, "--timeout=120s"); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kubectl("create", "namespace", "selfs-feature-held"); err != nil {
		t.Fatal(err)
	}

	// The admin may not make namespaces; they may ask (once the aggregation
	// controller has put requests in the admin role).
	if out, _ := asTenantAdmin(group, "auth", "can-i", "create", "namespaces"); strings.TrimSpace(out) != "no" {
		t.Fatalf("a tenant admin may create namespaces: %q", out)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, _ := asTenantAdmin(group, "auth", "can-i", "create", "namespacerequests.tenancy.trellis.dev", "-n", home)
		if strings.TrimSpace(out) == "yes" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the admin role never let a tenant admin create NamespaceRequests: %q", out)
		}
		time.Sleep(time.Second)
	}
	if out, _ := asTenantAdmin(group, "auth", "can-i", "patch", "namespacerequests.tenancy.trellis.dev", "--subresource=status", "-n", home); strings.TrimSpace(out) != "no" {
		t.Errorf("a tenant admin may write a request's status: %q", out)
	}

	create := func(name string) {
		t.Helper()
		if out, err := kubectlIn([]byte(request(home, name)), "create", "-f", "-", "--as", "alice", "--as-group", group); err != nil {
			t.Fatalf("creating request %s: %v %s", name, err, out)
		}
	}
	create("feature-x")
	waitRequest(t, "feature-x", "Ready")
	const added = "selfs-feature-x"
	expectRequestedNamespace(t, tenant, added, group)

	// Refused on the request, the Tenant untouched by it.
	create("feature-held") // a namespace someone else made
	waitRequest(t, "feature-held", "NameTaken")
	if l, _ := kubectl("get", "namespace", "selfs-feature-held", "-o", "jsonpath={.metadata.labels}"); strings.Contains(l, "tenancy.trellis.dev") {
		t.Errorf("a namespace someone else made was adopted: %s", l)
	}
	create("feature-team-b") // inside the neighbour's prefix
	waitRequest(t, "feature-team-b", "NameTaken")
	create("other") // outside namePattern
	waitRequest(t, "other", "NameNotAllowed")
	if out, err := kubectl("delete", "-n", home, "namespacerequest", "feature-held", "feature-team-b", "other", "--as", "alice", "--as-group", group); err != nil {
		t.Fatal(err, out)
	}
	create("feature-y")
	waitRequest(t, "feature-y", "Ready")
	create("feature-z") // a third, past maxNamespaces: 2
	waitRequest(t, "feature-z", "LimitReached")
	if _, err := kubectl("get", "namespace", "selfs-feature-z"); err == nil {
		t.Error("a namespace past maxNamespaces exists")
	}
	if out, err := kubectl("wait", "--for=condition=Ready", "tenant/"+tenant, "--timeout=60s"); err != nil {
		t.Errorf("refused requests held the Tenant back: %v %s", err, out)
	}

	// Refused when made: a name no namespace may have, and a request
	// outside any Tenant's namespace (a cluster admin's, so RBAC is not what
	// stops it).
	if out, err := kubectlIn([]byte(request(home, "feature-"+strings.Repeat("a", 60))), "create", "-f", "-", "--as", "alice", "--as-group", group); err == nil || !strings.Contains(fmt.Sprint(err, out), "DNS label") {
		t.Errorf("a request for a name longer than a namespace's: %v %s", err, out)
	}
	if out, err := kubectlIn([]byte(request("default", "feature-w")), "create", "-f", "-"); err == nil || !strings.Contains(fmt.Sprint(err, out), "belongs to no Tenant") {
		t.Errorf("a request outside a Tenant: %v %s", err, out)
	}

	// Deleting the request deletes its namespace (policy Delete), and the
	// waiting request takes the room.
	if out, err := kubectl("delete", "-n", home, "namespacerequest", "feature-x", "--as", "alice", "--as-group", group); err != nil {
		t.Fatal(err, out)
	}
	// Trellis' part is the delete; the namespace controller empties it
	// (the pod on the real node) in its own time.
	if out, err := kubectl("wait", "--for=jsonpath={.status.phase}=Terminating", "namespace/"+added, "--timeout=60s"); err != nil &&
		!strings.Contains(fmt.Sprint(err, out), "not found") {
		t.Errorf("the namespace of a deleted request: %v %s", err, out)
	}
	waitRequest(t, "feature-z", "Ready")
}

// expectRequestedNamespace checks a namespace granted to a request of
// tenant: every guardrail in it, the tenant's labels, its admin deploys
// there, the Tenant Ready and naming the request.
func expectRequestedNamespace(t *testing.T, tenant, added, group string) {
	t.Helper()
	for _, obj := range []string{"resourcequota/trellis-tenant-quota", "limitrange/trellis-tenant-limits",
		"networkpolicy/trellis-tenant-isolation", "rolebinding/trellis-tenant-admin", "rolebinding/trellis-tenant-viewer"} {
		if out, err := kubectl("get", "-n", added, obj); err != nil {
			t.Errorf("%s in the requested namespace: %v %s", obj, err, out)
		}
	}
	labels, _ := kubectl("get", "namespace", added, "-o", "jsonpath={.metadata.labels}")
	for _, want := range []string{`"pod-security.kubernetes.io/enforce":"restricted"`, `"tenancy.trellis.dev/tenant":"selfs"`, `"cost-center":"selfs"`} {
		if !strings.Contains(labels, want) {
			t.Errorf("namespace %s labels %s, want %s", added, labels, want)
		}
	}
	if out, err := kubectlIn([]byte(restrictedPod("app")), "apply", "-n", added, "-f", "-", "--as", "alice", "--as-group", group); err != nil {
		t.Errorf("the admin cannot deploy into the namespace they asked for: %v %s", err, out)
	}
	if out, err := kubectl("wait", "--for=condition=Ready", "tenant/"+tenant, "--timeout=60s"); err != nil {
		t.Errorf("the Tenant with a requested namespace: %v %s", err, out)
	}
	if by, _ := kubectl("get", "tenant", tenant, "-o", `jsonpath={.status.namespaces[?(@.name=="selfs-feature-x")].requestedBy}`); by != selfServiceHome+"/feature-x" {
		t.Errorf("the Tenant's status says %s was requested by %q", added, by)
	}
}

// TestGarbageCollectorGivesUpNoGrantedNamespace: the real garbage collector,
// as kube-controller-manager runs here, deletes a NamespaceRequest whose
// owner is gone. One that holds no namespace it deletes; one that holds a
// namespace (policy Delete) it may not: the namespace-requests policy
// refuses its delete, whatever user it runs as, and the request stays, and
// with it the namespace and the team's data (issue #34). The owner
// references are a cluster admin's: a tenant admin's is refused when made.
func TestGarbageCollectorGivesUpNoGrantedNamespace(t *testing.T) {
	useLocalManager(t)
	installTenantAdmissionPolicy(t)
	if _, err := kubectl("apply", "--server-side", "-f", filepath.Join(root, "config/rbac/namespacerequest_roles.yaml")); err != nil {
		t.Fatal(err)
	}
	const tenant, home, group, granted = "gcr", "gcr-dev", "gcr-admins", "gcr-feature-x"
	t.Cleanup(func() {
		_, _ = kubectl("patch", "-n", home, "namespacerequest", "feature-x", "--type", "merge", "-p", `{"metadata":{"ownerReferences":null}}`)
		_, _ = kubectl("delete", "tenant", tenant, "--wait=false")
		_, _ = kubectl("delete", "namespace", "gcr-feature-held", "--wait=false")
	})
	if _, err := kubectlIn([]byte(selfServiceTenant(tenant)), "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	if _, err := kubectl("wait", "--for=condition=Ready", "tenant/"+tenant, "--timeout=120s"); err != nil {
		t.Fatal(err)
	}
	if _, err := kubectl("create", "namespace", "gcr-feature-held"); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"feature-x", "feature-held"} {
		if out, err := kubectlIn([]byte(request(home, name)), "create", "-f", "-"); err != nil {
			t.Fatalf("creating request %s: %v %s", name, err, out)
		}
	}
	waitRequestIn(t, home, "feature-x", "Ready")
	waitRequestIn(t, home, "feature-held", "NameTaken")
	if out, err := kubectl("create", "configmap", "team-data", "-n", granted, "--from-literal=rows=42"); err != nil {
		t.Fatal(err, out)
	}

	// A tenant admin may write requests (once the aggregation controller
	// has put them in the admin role), not put an owner reference on one.
	waitFor(t, 60*time.Second, func() error {
		if _, err := asTenantAdmin(group, "auth", "can-i", "--quiet", "patch", "namespacerequests.tenancy.trellis.dev", "-n", home); err != nil {
			return fmt.Errorf("the admin role never let a tenant admin patch NamespaceRequests: %w", err)
		}
		return nil
	})
	const dangling = `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"gone","uid":"11111111-1111-1111-1111-111111111111"}]}}`
	if out, err := asTenantAdmin(group, "patch", "-n", home, "namespacerequest", "feature-x", "--type", "merge", "-p", dangling); err == nil ||
		!strings.Contains(fmt.Sprint(err, out), "would let the garbage collector delete it") {
		t.Fatalf("a tenant admin's owner reference on a granted request: %v %s", err, out)
	}

	// The cluster admin makes both requests dependents of a ConfigMap, then
	// deletes it: the garbage collector deletes what depended on it.
	if out, err := kubectl("create", "configmap", "owner", "-n", home); err != nil {
		t.Fatal(err, out)
	}
	uid, err := kubectl("get", "configmap", "owner", "-n", home, "-o", "jsonpath={.metadata.uid}")
	if err != nil {
		t.Fatal(err, uid)
	}
	owner := fmt.Sprintf(`{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"owner","uid":%q}]}}`, strings.TrimSpace(uid))
	for _, name := range []string{"feature-x", "feature-held"} {
		if out, err := kubectl("patch", "-n", home, "namespacerequest", name, "--type", "merge", "-p", owner); err != nil {
			t.Fatal(err, out)
		}
	}
	if out, err := kubectl("delete", "configmap", "owner", "-n", home); err != nil {
		t.Fatal(err, out)
	}
	// The request that holds none goes: the garbage collector is at work.
	if out, err := kubectl("wait", "--for=delete", "-n", home, "namespacerequest/feature-held", "--timeout=90s"); err != nil {
		t.Fatalf("the garbage collector did not delete a request that holds no namespace: %v %s", err, out)
	}
	// The one that holds gcr-feature-x stays, and so does all it holds.
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		if out, err := kubectl("get", "-n", home, "namespacerequest", "feature-x", "-o", "jsonpath={.status.grantedNamespace}"); err != nil || out != granted {
			t.Fatalf("the request that holds %s: %v %q", granted, err, out)
		}
		if out, err := kubectl("get", "namespace", granted, "-o", "jsonpath={.status.phase}"); err != nil || out != "Active" {
			t.Fatalf("namespace %s: %v %q", granted, err, out)
		}
		if out, err := kubectl("get", "configmap", "team-data", "-n", granted, "-o", "jsonpath={.data.rows}"); err != nil || out != "42" {
			t.Fatalf("the team's data in %s: %v %q", granted, err, out)
		}
		time.Sleep(2 * time.Second)
	}
}
