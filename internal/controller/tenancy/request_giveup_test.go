package tenancy

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
)

// Who may make the Tenant give up a namespace granted to a request (issue
// #34): only an admin of that namespace, whatever route the request's
// deletion takes. The attacking actor is a contractor: admin, by a tenant
// admin's own binding, of the Tenant's namespace where the requests are,
// and of nothing else.

// The users the Kubernetes controllers act as (kube-controller-manager with
// per-controller credentials, as kubeadm and kind run it).
const (
	garbageCollector    = "system:serviceaccount:kube-system:generic-garbage-collector"
	namespaceController = "system:serviceaccount:kube-system:namespace-controller"
)

// controllerClient impersonates one of kube-controller-manager's
// controllers, after checking that the API server's bootstrap RBAC binds it
// to its role (envtest's API server makes the system:controller:* roles and
// bindings as any API server does): what refuses it below is then the
// admission policy, not RBAC.
func controllerClient(g Gomega, user string) client.Client {
	name := strings.TrimPrefix(user, "system:serviceaccount:kube-system:")
	binding := &rbacv1.ClusterRoleBinding{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Name: "system:controller:" + name}, binding)).To(Succeed())
	g.Expect(binding.RoleRef.Name).To(Equal("system:controller:" + name))
	g.Expect(binding.Subjects).To(ContainElement(rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: "kube-system", Name: name}))
	return serviceAccountClient(g, "kube-system", name)
}

// grantWithData makes the Tenant of deletingSelfServiceTenant (Delete) with
// a request <name>-home/x granted <name>-x, and in <name>-x a ConfigMap
// holding the team's data. It makes the tenant admins admins of what they
// hold (as the built-in roles would) and the group contractors admin of
// <name>-home alone, and returns the contractor's client.
func grantWithData(g Gomega, name, contractors string) client.Client {
	ctx := context.Background()
	deletingSelfServiceTenant(g, name, "x")
	letRequest(g, name+"-admins", name+"-home")
	emulateBuiltinRoles(g, name+"-home", name+"-x")
	makeAdminOf(g, contractors, name+"-home")
	g.Expect(k8s.Create(ctx, dataIn(name+"-x"))).To(Succeed())
	g.Expect(canI(g, contractors, "delete", "rolebindings", rbacv1.GroupName, name+"-x", "")).To(BeFalse(),
		"the contractor is admin of %s-home only", name)
	return clientAs(g, "dana", contractors)
}

// dataIn is what a team keeps in a namespace.
func dataIn(ns string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-data"}, Data: map[string]string{"rows": "42"}}
}

// expectKept checks that namespace ns is not given up: it exists, is not
// being deleted, is still the Tenant's, and holds the team's data.
func expectKept(g Gomega, tenant, ns string) {
	live := getNamespace(g, ns)
	g.Expect(live.DeletionTimestamp).To(BeNil(), "namespace %s is being deleted", ns)
	g.Expect(live.Labels).To(HaveKeyWithValue(TenantLabel, tenant), "namespace %s was released", ns)
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(dataIn(ns)), &corev1.ConfigMap{})).To(Succeed(),
		"the data in %s is gone", ns)
}

// expectPolicyRefused checks that err is the namespace-requests policy's
// refusal, saying want.
func expectPolicyRefused(g Gomega, err error, want string) {
	g.Expect(err).To(HaveOccurred(), "allowed: the namespace-requests policy should refuse it (%s)", want)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "not a refusal: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("ValidatingAdmissionPolicy 'namespace-requests' with binding 'namespace-requests' denied request"))
	g.Expect(err.Error()).To(ContainSubstring(want))
}

// danglingOwner is the patch of issue #34: an owner reference to an object
// that does not exist, which the garbage collector acts on by deleting the
// request.
const danglingOwner = `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"gone","uid":"11111111-1111-1111-1111-111111111111"}]}}`

// TestOwnerReferenceCannotGiveUpAGrantedNamespace is issue #34's attack, as
// reproduced on a real cluster: the contractor, refused the delete of a
// granted request, puts an owner reference to an object that does not exist
// on it; the garbage collector, which may delete anything, deletes the
// request; the Tenant (Delete) deletes the namespace with the team's data.
// The owner reference is refused to anyone who may not change Tenants. One
// there already (from before the policy, or a platform operator's) gets the
// request deleted by no one, the garbage collector included, whatever user
// it runs as (its ServiceAccount, or an admin's, as kube-controller-manager
// runs in some local clusters); its ServiceAccount is refused even once the
// reference is gone (it read the request with it). The namespace stays with
// its data. A request that holds none the garbage collector may delete.
func TestOwnerReferenceCannotGiveUpAGrantedNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	dana := grantWithData(g, "gco", "gco-contractors")
	x := newRequest("gco-home", "x")
	g.Expect(requestReason(g, "gco-home", "x", ReasonRequestGranted).Status.GrantedNamespace).To(Equal("gco-x"))
	gc := controllerClient(g, garbageCollector)
	stays := func() {
		g.Consistently(func(g Gomega) {
			expectKept(g, "gco", "gco-x")
			requestReason(g, "gco-home", "x", ReasonRequestGranted)
		}, "2s", interval).Should(Succeed())
	}

	expectPolicyRefused(g, mergePatch(dana, x, danglingOwner),
		"an owner reference on NamespaceRequest gco-home/x would let the garbage collector delete it")
	// The owner reference a cluster admin put there before the policy.
	g.Expect(mergePatch(k8s, x, danglingOwner)).To(Succeed())
	const owned = "NamespaceRequest gco-home/x holds namespace gco-x, which deleting it gives up, and has owner references"
	expectPolicyRefused(g, gc.Delete(ctx, x), owned)
	expectPolicyRefused(g, k8s.Delete(ctx, x), owned) // kube-controller-manager running as an admin
	stays()
	g.Expect(mergePatch(dana, x, `{"metadata":{"ownerReferences":null}}`)).To(Succeed())
	expectPolicyRefused(g, gc.Delete(ctx, x),
		"NamespaceRequest gco-home/x holds namespace gco-x, which deleting it gives up: the garbage collector may not delete it")
	stays()

	// A request that holds no namespace (its name is someone else's): the
	// garbage collector deletes it, nothing is given up.
	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "gco-taken"}})).To(Succeed())
	g.Expect(k8s.Create(ctx, newRequest("gco-home", "taken"))).To(Succeed())
	g.Expect(requestReason(g, "gco-home", "taken", ReasonNameTaken).Status.GrantedNamespace).To(BeEmpty())
	g.Expect(mergePatch(k8s, newRequest("gco-home", "taken"), danglingOwner)).To(Succeed())
	g.Expect(gc.Delete(ctx, newRequest("gco-home", "taken"))).To(Succeed())
	expectKept(g, "gco", "gco-x")
	deleteTenant(g, "gco")
}

// TestConflictedGrantCannotBeGivenUpByANamespaceAdmin: a granted namespace
// in Conflict turns its request Stalled. The way it happens: the team made
// an allow-all NetworkPolicy in it before the platform switched network
// isolation on (TestIsolationUndoneByAPolicyThatCameFirst). The request
// still holds the namespace (it is the Tenant's, marked for it): the
// contractor may not delete it, whatever its conditions say.
func TestConflictedGrantCannotBeGivenUpByANamespaceAdmin(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	dana := grantWithData(g, "cfl", "cfl-contractors")
	alice := clientAs(g, "alice", "cfl-admins")
	g.Expect(alice.Create(ctx, allowAll("cfl-x", "allow-all"))).To(Succeed())
	setIsolation(g, "cfl", &tenancyv1.NetworkIsolation{})
	g.Eventually(func(g Gomega) {
		g.Expect(nsState(g, "cfl", "cfl-x").State).To(Equal(tenancyv1.NamespaceConflict))
	}, timeout, interval).Should(Succeed())
	stalled := requestReason(g, "cfl-home", "x", ReasonNameTaken)
	g.Expect(meta.IsStatusConditionTrue(stalled.Status.Conditions, conditions.Stalled)).To(BeTrue())
	g.Expect(stalled.Status.GrantedNamespace).To(Equal("cfl-x"), "a conflict is no reason to hold nothing")

	expectPolicyRefused(g, dana.Delete(ctx, newRequest("cfl-home", "x")),
		"NamespaceRequest cfl-home/x holds namespace cfl-x, which deleting it gives up")
	g.Consistently(func(g Gomega) { expectKept(g, "cfl", "cfl-x") }, "2s", interval).Should(Succeed())
	deleteTenant(g, "cfl")
}

// emptyLikeTheNamespaceController does what the namespace controller does
// to a namespace being deleted (envtest runs none): it deletes the requests
// in it, as that controller. Nothing when the namespace is not being
// deleted.
func emptyLikeTheNamespaceController(g Gomega, nsc client.Client, ns string) {
	ctx := context.Background()
	live := &corev1.Namespace{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: ns}, live); apierrors.IsNotFound(err) || live.DeletionTimestamp.IsZero() {
		return
	}
	list := &tenancyv1.NamespaceRequestList{}
	g.Expect(k8s.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	for i := range list.Items {
		g.Expect(client.IgnoreNotFound(nsc.Delete(ctx, &list.Items[i]))).To(Succeed())
	}
}

// chainTenant makes Tenant name (Delete, self-service) with the namespaces
// home and base, a request home/mid granted <name>-mid, a request in it,
// mid/deep, granted <name>-deep, and the team's data in <name>-deep. The
// tenant admins are admins of all three, as the built-in roles would make
// them.
func chainTenant(g Gomega, name string) {
	ctx := context.Background()
	tenant := newTenant(name, name+"-", "home", "base")
	tenant.Spec.NamespaceDeletionPolicy = tenancyv1.NamespaceDelete
	tenant.Spec.SelfService = tenancyv1.SelfService{MaxNamespaces: 4}
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	eventuallyReady(g, name)
	g.Expect(k8s.Create(ctx, newRequest(name+"-home", "mid"))).To(Succeed())
	requestReason(g, name+"-home", "mid", ReasonRequestGranted)
	g.Expect(k8s.Create(ctx, newRequest(name+"-mid", "deep"))).To(Succeed())
	g.Expect(requestReason(g, name+"-mid", "deep", ReasonRequestGranted).Status.GrantedNamespace).To(Equal(name + "-deep"))
	g.Expect(k8s.Create(ctx, dataIn(name+"-deep"))).To(Succeed())
	letRequest(g, name+"-admins", name+"-home", name+"-mid", name+"-deep")
	emulateBuiltinRoles(g, name+"-home", name+"-mid", name+"-deep")
}

// TestNamespacesGrantedInsideAGivenUpNamespaceStay: a namespace is given up
// only after every namespace granted from inside it (HNC's rule). The
// contractor is admin of <home> and <mid>, not of <deep>, granted to a
// request in <mid>. Their delete of home/mid is theirs to make (they are
// mid's admin); were <mid> given up, the namespace controller would delete
// mid/deep as it empties it (its delete is not asked about), and <deep>
// would be given up at the word of someone who was never its admin. The
// Tenant keeps <mid>, saying why, until an admin of <deep> deletes mid/deep;
// then both go, as the policy (Delete) says.
func TestNamespacesGrantedInsideAGivenUpNamespaceStay(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	chainTenant(g, "csc")
	const contractors = "csc-contractors"
	makeAdminOf(g, contractors, "csc-home")
	makeAdminOf(g, contractors, "csc-mid")
	g.Expect(canI(g, contractors, "delete", "rolebindings", rbacv1.GroupName, "csc-deep", "")).To(BeFalse())
	dana := clientAs(g, "dana", contractors)
	nsc := controllerClient(g, namespaceController)

	g.Expect(dana.Delete(ctx, newRequest("csc-home", "mid"))).To(Succeed())
	g.Consistently(func(g Gomega) {
		emptyLikeTheNamespaceController(g, nsc, "csc-mid")
		expectKept(g, "csc", "csc-deep")
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "csc-mid", Name: "deep"}, &tenancyv1.NamespaceRequest{})).To(Succeed(),
			"csc-mid/deep deleted as csc-mid is emptied: csc-deep is given up with it")
		g.Expect(getNamespace(g, "csc-mid").DeletionTimestamp).To(BeNil(), "csc-mid given up with a granted request in it")
	}, "3s", interval).Should(Succeed())
	requestReason(g, "csc-mid", "deep", ReasonRequestGranted)
	g.Eventually(func(g Gomega) {
		mid := nsState(g, "csc", "csc-mid")
		g.Expect(mid.State).To(Equal(tenancyv1.NamespaceReady))
		g.Expect(mid.RequestedBy).To(Equal("csc-home/mid"))
		g.Expect(mid.Message).To(ContainSubstring("NamespaceRequest csc-home/mid is gone, but requests in this namespace hold namespaces: csc-mid/deep (csc-deep)"))
	}, timeout, interval).Should(Succeed())
	g.Expect(eventuallyReady(g, "csc").Status.Namespaces).To(HaveLen(4))

	// An admin of csc-deep (a tenant admin) gives it up; csc-mid follows.
	alice := clientAs(g, "alice", "csc-admins")
	mayDeleteBindings(g, "csc-admins", "csc-deep")
	g.Expect(alice.Delete(ctx, newRequest("csc-mid", "deep"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		for _, ns := range []string{"csc-deep", "csc-mid"} {
			g.Expect(getNamespace(g, ns).DeletionTimestamp).NotTo(BeNil(), "%s was kept", ns)
		}
	}, timeout, interval).Should(Succeed())
	deleteTenant(g, "csc")
}

// TestPlatformGivesUpTheWholeChain: the platform's own acts are authorized
// over every namespace of the Tenant. Dropping <home> from the spec (Delete)
// gives up home, then mid (its request went with home), then deep (its
// request went with mid), the namespace controller emptying each in turn.
func TestPlatformGivesUpTheWholeChain(t *testing.T) {
	g := NewWithT(t)
	chainTenant(g, "pgc")
	nsc := controllerClient(g, namespaceController)
	g.Expect(mergePatch(k8s, &tenancyv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "pgc"}}, `{"spec":{"namespaces":["base"]}}`)).To(Succeed())
	g.Eventually(func(g Gomega) {
		for _, ns := range []string{"pgc-home", "pgc-mid"} {
			emptyLikeTheNamespaceController(g, nsc, ns)
		}
		for _, ns := range []string{"pgc-home", "pgc-mid", "pgc-deep"} {
			g.Expect(getNamespace(g, ns).DeletionTimestamp).NotTo(BeNil(), "%s was kept", ns)
		}
	}, timeout, interval).Should(Succeed())
	deleteTenant(g, "pgc")
}

// TestNamespaceRequestsPolicyByOperation is the namespace-requests policy
// (config/admission) operation by operation, each row as its actor, against
// request pol-home/x, which holds pol-x (Delete), where the team keeps data.
// The actors: the contractor (admin of pol-home alone), a tenant admin
// (admin of pol-home and of pol-x, through Trellis' bindings), a platform
// operator (may patch Tenants and write requests, no right in pol-x), the
// garbage collector and the namespace controller (as kube-controller-manager
// runs them). Each row names the verdict (allowed, refused by the policy
// with its reason, or by RBAC) and what must hold after it. The rows run in
// order, those that give something up last.
func TestNamespaceRequestsPolicyByOperation(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	dana := grantWithData(g, "pol", "pol-contractors")
	alice := clientAs(g, "alice", "pol-admins")
	mayDeleteBindings(g, "pol-admins", "pol-x")
	g.Expect(k8s.Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "test-pol-platform"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{tenancyv1.GroupVersion.Group}, Resources: []string{"tenants", "namespacerequests"}, Verbs: []string{"get", "list", "create", "patch", "update"}},
		},
	})).To(Succeed())
	g.Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-pol-platform"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "test-pol-platform"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "pol-platform"}},
	})).To(Succeed())
	g.Eventually(func() bool { return canI(g, "pol-platform", "patch", "tenants", tenancyv1.GroupVersion.Group, "", "") }, timeout, interval).Should(BeTrue())
	platform := clientAs(g, "pat", "pol-platform")
	gc := controllerClient(g, garbageCollector)
	nsc := controllerClient(g, namespaceController)

	// A second granted request, in a namespace of the spec the platform
	// drops (Delete): pol-gone is deleted, and the namespace controller
	// empties it.
	pol := &tenancyv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "pol"}}
	g.Expect(mergePatch(k8s, pol, `{"spec":{"namespaces":["home","gone"]}}`)).To(Succeed())
	eventuallyReady(g, "pol")
	g.Expect(k8s.Create(ctx, newRequest("pol-gone", "y"))).To(Succeed())
	requestReason(g, "pol-gone", "y", ReasonRequestGranted)

	x := newRequest("pol-home", "x")
	withOwner := func(namespace, name string) *tenancyv1.NamespaceRequest {
		r := newRequest(namespace, name)
		r.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "gone", UID: "11111111-1111-1111-1111-111111111111"}}
		return r
	}
	const (
		ownerRefused = "an owner reference on NamespaceRequest pol-home/"
		adminOnly    = "NamespaceRequest pol-home/x holds namespace pol-x, which deleting it gives up (deleted or released"
		notTheGC     = "NamespaceRequest pol-home/x holds namespace pol-x, which deleting it gives up: the garbage collector may not delete it"
		owned        = "NamespaceRequest pol-home/x holds namespace pol-x, which deleting it gives up, and has owner references"
	)
	// The verdicts: allowed is "", byRBAC a refusal by RBAC, anything else
	// the policy's refusal saying that.
	const allowed, byRBAC = "", "RBAC"
	xHeld := func(g Gomega) {
		expectKept(g, "pol", "pol-x")
		g.Expect(requestReason(g, "pol-home", "x", ReasonRequestGranted).Status.GrantedNamespace).To(Equal("pol-x"))
	}
	rows := []struct {
		actor, op string
		do        func() error
		verdict   string
		after     func(g Gomega)
	}{
		{"contractor", "CREATE a request", func() error { return dana.Create(ctx, newRequest("pol-home", "z")) }, allowed, xHeld},
		{"contractor", "CREATE a request with an owner reference", func() error { return dana.Create(ctx, withOwner("pol-home", "w")) },
			ownerRefused + "w would let the garbage collector delete it", xHeld},
		{"platform operator", "CREATE a request with an owner reference (dry run)", func() error {
			return platform.Create(ctx, withOwner("pol-home", "w"), client.DryRunAll)
		}, allowed, xHeld},
		{"contractor", "UPDATE metadata.ownerReferences: add one", func() error { return mergePatch(dana, x, danglingOwner) },
			ownerRefused + "x would let the garbage collector delete it", xHeld},
		{"tenant admin", "UPDATE metadata.ownerReferences: add one", func() error { return mergePatch(alice, x, danglingOwner) },
			ownerRefused + "x would let the garbage collector delete it", xHeld},
		{"platform operator", "UPDATE metadata.ownerReferences: add one", func() error { return mergePatch(platform, x, danglingOwner) }, allowed, xHeld},
		{"contractor", "UPDATE metadata.labels, the owner reference unchanged", func() error {
			return mergePatch(dana, x, `{"metadata":{"labels":{"team.example/env":"feature"}}}`)
		}, allowed, xHeld},
		{"garbage collector", "DELETE, an owner reference on it", func() error { return gc.Delete(ctx, x) }, owned, xHeld},
		{"tenant admin", "DELETE, an owner reference on it", func() error { return alice.Delete(ctx, x) }, owned, xHeld},
		{"contractor", "UPDATE metadata.ownerReferences: change one", func() error {
			return mergePatch(dana, x, `{"metadata":{"ownerReferences":[{"apiVersion":"v1","kind":"ConfigMap","name":"other","uid":"22222222-2222-2222-2222-222222222222"}]}}`)
		}, ownerRefused + "x would let the garbage collector delete it", xHeld},
		{"contractor", "UPDATE metadata.ownerReferences: remove them", func() error {
			return mergePatch(dana, x, `{"metadata":{"ownerReferences":null}}`)
		}, allowed, xHeld},
		{"contractor", "UPDATE metadata.finalizers", func() error {
			return mergePatch(dana, x, `{"metadata":{"finalizers":["team.example/hold"]}}`)
		}, allowed, xHeld},
		{"contractor", "UPDATE metadata.finalizers: remove", func() error {
			return mergePatch(dana, x, `{"metadata":{"finalizers":null}}`)
		}, allowed, xHeld},
		{"contractor", "UPDATE metadata.annotations", func() error {
			return mergePatch(dana, x, `{"metadata":{"annotations":{"team.example/note":"mine"}}}`)
		}, allowed, xHeld},
		{"contractor", "UPDATE status (grantedNamespace cleared)", func() error {
			return dana.Status().Patch(ctx, x, client.RawPatch("application/merge-patch+json", []byte(`{"status":{"grantedNamespace":null}}`)))
		}, byRBAC, xHeld},
		{"tenant admin", "UPDATE status (grantedNamespace cleared)", func() error {
			return alice.Status().Patch(ctx, x, client.RawPatch("application/merge-patch+json", []byte(`{"status":{"grantedNamespace":null}}`)))
		}, byRBAC, xHeld},
		{"contractor", "DELETE", func() error { return dana.Delete(ctx, x) }, adminOnly, xHeld},
		{"garbage collector", "DELETE", func() error { return gc.Delete(ctx, x) }, notTheGC, xHeld},
		{"namespace controller", "DELETE pol-gone/y, pol-gone being deleted (the platform dropped it)", func() error {
			g.Expect(mergePatch(k8s, pol, `{"spec":{"namespaces":["home"]}}`)).To(Succeed())
			g.Eventually(func(g Gomega) {
				g.Expect(getNamespace(g, "pol-gone").DeletionTimestamp).NotTo(BeNil())
			}, timeout, interval).Should(Succeed())
			return nsc.Delete(ctx, newRequest("pol-gone", "y"))
		}, allowed, func(g Gomega) {
			xHeld(g)
			g.Eventually(func(g Gomega) {
				g.Expect(getNamespace(g, "pol-y").DeletionTimestamp).NotTo(BeNil(), "pol-y kept: the platform's drop gives it up")
			}, timeout, interval).Should(Succeed())
		}},
		{"tenant admin", "DELETE", func() error { return alice.Delete(ctx, x) }, allowed, func(g Gomega) {
			g.Eventually(func(g Gomega) {
				g.Expect(getNamespace(g, "pol-x").DeletionTimestamp).NotTo(BeNil(), "pol-x kept: its admin gave it up")
			}, timeout, interval).Should(Succeed())
		}},
	}
	for _, row := range rows {
		t.Run(row.actor+": "+row.op, func(t *testing.T) {
			g := NewWithT(t)
			err := row.do()
			switch row.verdict {
			case allowed:
				g.Expect(err).NotTo(HaveOccurred())
			case byRBAC:
				g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "not a refusal: %v", err)
				g.Expect(err.Error()).NotTo(ContainSubstring("ValidatingAdmissionPolicy"), "refused by a policy, not RBAC")
			default:
				expectPolicyRefused(g, err, row.verdict)
			}
			row.after(g)
		})
	}
	deleteTenant(g, "pol")
}
