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

// letRequest gives group what config/rbac's namespacerequest-editor-role
// aggregates into the built-in admin role on a real cluster (envtest runs
// no aggregation), in the namespaces given.
func letRequest(g Gomega, group string, namespaces ...string) {
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "emulated-namespacerequest-editor"}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{tenancyv1.GroupVersion.Group}, Resources: []string{"namespacerequests"},
			Verbs: []string{"create", "delete", "get", "list", "patch", "update", "watch"}},
	}}
	if err := k8s.Create(ctx, role); !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	for _, ns := range namespaces {
		g.Expect(k8s.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "emulated-namespacerequests"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: group}},
		})).To(Succeed())
	}
}

func newRequest(namespace, name string) *tenancyv1.NamespaceRequest {
	return &tenancyv1.NamespaceRequest{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
}

// requestCondition waits until the request's Ready condition has reason,
// and returns the request.
func requestReason(g Gomega, namespace, name, reason string) *tenancyv1.NamespaceRequest {
	r := &tenancyv1.NamespaceRequest{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, r)).To(Succeed())
		c := meta.FindStatusCondition(r.Status.Conditions, conditions.Ready)
		g.Expect(c).NotTo(BeNil(), "status %+v", r.Status)
		g.Expect(c.Reason).To(Equal(reason), "status %+v", r.Status)
	}, timeout, interval).Should(Succeed())
	return r
}

// TestTenantAdminAddsNamespacesWithinBounds: a tenant admin asks for
// namespaces with NamespaceRequests; each is made with every guardrail and
// reported on the request and the Tenant; the count, the pattern and names
// someone else holds are refused on the request, never on the Tenant; a
// deleted request gives its namespace up as the policy says, and the room
// it frees goes to the oldest waiting request.
func TestTenantAdminAddsNamespacesWithinBounds(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tenant := newGuardedTenant("ss", "ss-", "home")
	tenant.Spec.Viewers = []tenancyv1.Subject{{Kind: rbacv1.GroupKind, Name: "ss-viewers", APIGroup: rbacv1.GroupName}}
	tenant.Spec.NamespaceDeletionPolicy = tenancyv1.NamespaceDelete
	tenant.Spec.SelfService = tenancyv1.SelfService{MaxNamespaces: 2, NamePattern: "f-[a-z0-9-]+"}
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	eventuallyReady(g, "ss")
	letRequest(g, "ss-admins", "ss-home")
	admin := clientAs(g, "alice", "ss-admins")

	// A namespace someone else made holds the name of the first request.
	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ss-f-taken"}})).To(Succeed())
	g.Expect(admin.Create(ctx, newRequest("ss-home", "f-taken"))).To(Succeed())
	taken := requestReason(g, "ss-home", "f-taken", ReasonNameTaken)
	g.Expect(meta.IsStatusConditionTrue(taken.Status.Conditions, conditions.Stalled)).To(BeTrue())
	g.Expect(getNamespace(g, "ss-f-taken").Labels).NotTo(HaveKey(TenantLabel), "a taken name was adopted")
	g.Expect(admin.Delete(ctx, taken)).To(Succeed())

	noted := newRequest("ss-home", "f-one")
	noted.Annotations = map[string]string{"team.example/note": strings.Repeat("x", 4096)}
	g.Expect(admin.Create(ctx, noted)).To(Succeed())
	one := requestReason(g, "ss-home", "f-one", ReasonRequestGranted)
	g.Expect(one.Status.Namespace).To(Equal("ss-f-one"))
	g.Expect(one.Status.Tenant).To(Equal("ss"))
	g.Expect(one.Annotations).To(HaveKey("team.example/note"))
	// What the team wrote on the request is not kept in the manager's cache
	// (read once the cache has seen the granted status: it may lag the API).
	g.Eventually(func(g Gomega) {
		cached := &tenancyv1.NamespaceRequest{}
		g.Expect(reconciler.client.Get(ctx, client.ObjectKeyFromObject(one), cached)).To(Succeed())
		g.Expect(cached.Status.Namespace).To(Equal("ss-f-one"))
		g.Expect(cached.Annotations).To(BeEmpty())
	}, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) { expectGuardrails(g, tenant, "ss-f-one") }, timeout, interval).Should(Succeed())
	ready := eventuallyReady(g, "ss")
	g.Expect(ready.Status.Namespaces).To(ContainElement(tenancyv1.TenantNamespaceStatus{
		Name: "ss-f-one", State: tenancyv1.NamespaceReady, RequestedBy: "ss-home/f-one"}))

	g.Expect(admin.Create(ctx, newRequest("ss-home", "f-two"))).To(Succeed())
	requestReason(g, "ss-home", "f-two", ReasonRequestGranted)
	g.Expect(admin.Create(ctx, newRequest("ss-home", "f-three"))).To(Succeed())
	requestReason(g, "ss-home", "f-three", ReasonLimitReached)
	g.Expect(admin.Create(ctx, newRequest("ss-home", "other"))).To(Succeed())
	requestReason(g, "ss-home", "other", ReasonNameNotAllowed)
	g.Expect(admin.Create(ctx, newRequest("ss-home", "home"))).To(Succeed())
	requestReason(g, "ss-home", "home", ReasonNameNotAllowed)
	err := k8s.Get(ctx, client.ObjectKey{Name: "ss-f-three"}, &corev1.Namespace{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a namespace past maxNamespaces: %v", err)
	g.Expect(eventuallyReady(g, "ss").Status.Namespaces).To(HaveLen(3), "refused requests held the Tenant back or joined it")

	// A request outside any Tenant's namespace is refused when it is made.
	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ss-outside"}})).To(Succeed())
	err = k8s.Create(ctx, newRequest("ss-outside", "f-out"))
	g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "a request outside a Tenant: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("belongs to no Tenant"))

	// Deleting a request follows namespaceDeletionPolicy (Delete), and the
	// oldest waiting request takes the room. Only an admin of the namespace
	// granted may give it up (the namespace-requests policy): the tenant
	// admins are, through Trellis' binding to admin there.
	emulateBuiltinRoles(g, "ss-f-one")
	mayDeleteBindings(g, "ss-admins", "ss-f-one")
	g.Expect(admin.Delete(ctx, one)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getNamespace(g, "ss-f-one").DeletionTimestamp).NotTo(BeNil())
	}, timeout, interval).Should(Succeed())
	requestReason(g, "ss-home", "f-three", ReasonRequestGranted)
	g.Eventually(func(g Gomega) { expectGuardrails(g, tenant, "ss-f-three") }, timeout, interval).Should(Succeed())
}

// TestSelfServiceNeedsAPrefix: the names a team asks for are named within
// the Tenant's prefix; without one, a team could ask for any name.
func TestSelfServiceNeedsAPrefix(t *testing.T) {
	g := NewWithT(t)
	tenant := newTenant("ssnp", "", "ssnp-home")
	tenant.Spec.SelfService = tenancyv1.SelfService{MaxNamespaces: 1}
	err := k8s.Create(context.Background(), tenant)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("selfService needs a namespacePrefix"))
}

// TestRequestsLeaveWithTheirNamespace: a request whose namespace leaves the
// Tenant grants nothing any more: its namespace is given up as the policy
// says (Retain: kept, released), and the request says why.
func TestRequestsLeaveWithTheirNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tenant := newTenant("ssl", "ssl-", "home", "base")
	tenant.Spec.SelfService = tenancyv1.SelfService{MaxNamespaces: 4}
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	eventuallyReady(g, "ssl")
	g.Expect(k8s.Create(ctx, newRequest("ssl-home", "extra"))).To(Succeed())
	requestReason(g, "ssl-home", "extra", ReasonRequestGranted)

	live := getTenant(g, "ssl")
	live.Spec.Namespaces = []string{"base"}
	g.Expect(k8s.Update(ctx, live)).To(Succeed())
	req := requestReason(g, "ssl-home", "extra", ReasonNotInTenant)
	g.Expect(meta.IsStatusConditionTrue(req.Status.Conditions, conditions.Stalled)).To(BeTrue())
	g.Eventually(func(g Gomega) {
		ns := getNamespace(g, "ssl-extra")
		g.Expect(ns.DeletionTimestamp).To(BeNil(), "Retain deleted a namespace")
		g.Expect(ns.Labels).To(HaveKeyWithValue(ReleasedFromLabel, "ssl"))
		g.Expect(ns.Annotations).NotTo(HaveKey(TenantUIDAnnotation))
	}, timeout, interval).Should(Succeed())
	g.Expect(eventuallyReady(g, "ssl").Status.Namespaces).To(HaveLen(1))
}

// deletingSelfServiceTenant makes a Ready Tenant name with the prefix
// name-, a namespace home, selfService for 4 namespaces and the policy
// Delete (what a request that goes wrong would cost most), and, for each of
// granted, a request in name-home that it grants.
func deletingSelfServiceTenant(g Gomega, name string, granted ...string) {
	ctx := context.Background()
	tenant := newTenant(name, name+"-", "home")
	tenant.Spec.NamespaceDeletionPolicy = tenancyv1.NamespaceDelete
	tenant.Spec.SelfService = tenancyv1.SelfService{MaxNamespaces: 4}
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	eventuallyReady(g, name)
	for _, r := range granted {
		g.Expect(k8s.Create(ctx, newRequest(name+"-home", r))).To(Succeed())
		requestReason(g, name+"-home", r, ReasonRequestGranted)
	}
}

// TestGrantedNamespaceOutlivesANewNeighbourPrefix: a namespace granted to a
// request stays the Tenant's when another Tenant is made later with a
// longer prefix that covers its name: that Tenant could never take it (it
// is marked), and nobody asked for it to go. Refusing it again would apply
// namespaceDeletionPolicy (here Delete) to a namespace full of the team's
// work.
func TestGrantedNamespaceOutlivesANewNeighbourPrefix(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	deletingSelfServiceTenant(g, "nbp", "b-data")

	// The platform makes a neighbour whose prefix covers the granted name;
	// a new request (any event of the Tenant) makes nbp decide again.
	g.Expect(k8s.Create(ctx, newTenant("nbpb", "nbp-b-", "other"))).To(Succeed())
	eventuallyReady(g, "nbpb")
	g.Expect(k8s.Create(ctx, newRequest("nbp-home", "later"))).To(Succeed())
	requestReason(g, "nbp-home", "later", ReasonRequestGranted)
	g.Consistently(func(g Gomega) {
		g.Expect(getNamespace(g, "nbp-b-data").DeletionTimestamp).To(BeNil(), "a granted namespace was deleted")
	}, "2s", interval).Should(Succeed())
	requestReason(g, "nbp-home", "b-data", ReasonRequestGranted)
	// A new request in the neighbour's prefix is still refused.
	g.Expect(k8s.Create(ctx, newRequest("nbp-home", "b-new"))).To(Succeed())
	requestReason(g, "nbp-home", "b-new", ReasonNameTaken)
	deleteTenant(g, "nbpb")
	deleteTenant(g, "nbp")
}

// TestARequestWaitingForASpecNamespaceDoesNotKeepIt: a request made in
// advance for a namespace of the spec is refused as taken; when the
// platform drops that namespace from the spec, the request does not keep
// it with its contents (here Delete: it goes). A request gets only a
// namespace Trellis makes for it: once the old one is gone, a new one.
func TestARequestWaitingForASpecNamespaceDoesNotKeepIt(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tenant := newTenant("ssa", "ssa-", "home", "old")
	tenant.Spec.NamespaceDeletionPolicy = tenancyv1.NamespaceDelete
	tenant.Spec.SelfService = tenancyv1.SelfService{MaxNamespaces: 4}
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	eventuallyReady(g, "ssa")
	oldUID := getNamespace(g, "ssa-old").UID
	g.Expect(k8s.Create(ctx, newRequest("ssa-home", "old"))).To(Succeed())
	requestReason(g, "ssa-home", "old", ReasonNameTaken)

	live := getTenant(g, "ssa")
	live.Spec.Namespaces = []string{"home"}
	g.Expect(k8s.Update(ctx, live)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getNamespace(g, "ssa-old").DeletionTimestamp).NotTo(BeNil(), "the dropped namespace was kept for a request made in advance")
	}, timeout, interval).Should(Succeed())
	// envtest runs no namespace controller: finish the deletion.
	g.Eventually(func() error {
		ns := getNamespace(g, "ssa-old")
		ns.Spec.Finalizers = nil
		return k8s.SubResource("finalize").Update(ctx, ns)
	}, timeout, interval).Should(Succeed())
	requestReason(g, "ssa-home", "old", ReasonRequestGranted)
	made := getNamespace(g, "ssa-old")
	g.Expect(made.UID).NotTo(Equal(oldUID), "the old namespace was kept")
	g.Expect(made.Annotations).To(HaveKeyWithValue(RequestedByAnnotation, "ssa-home/old"))
	deleteTenant(g, "ssa")
}

// TestRelabelledNamespaceKeepsItsRequests: anyone who may patch a tenant
// namespace's labels can take it out of the manager's cache. The requests
// in it still grant their namespaces (here Delete: none is deleted), since
// the namespace, read live, is still the Tenant's; the labels come back.
func TestRelabelledNamespaceKeepsItsRequests(t *testing.T) {
	g := NewWithT(t)
	deletingSelfServiceTenant(g, "ssr", "work")

	g.Expect(mergePatch(k8s, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ssr-home"}},
		`{"metadata":{"labels":{"app.kubernetes.io/managed-by":"argocd","tenancy.trellis.dev/tenant":null}}}`)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getNamespace(g, "ssr-home").Labels).To(HaveKeyWithValue(TenantLabel, "ssr"), "the labels were not restored")
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(getNamespace(g, "ssr-work").DeletionTimestamp).To(BeNil(), "a granted namespace was deleted")
	}, "3s", interval).Should(Succeed())
	requestReason(g, "ssr-home", "work", ReasonRequestGranted)
	g.Expect(getNamespace(g, "ssr-work").Annotations).To(HaveKeyWithValue(RequestedByAnnotation, "ssr-home/work"))
	deleteTenant(g, "ssr")
}

// mayDeleteBindings waits until members of group may delete RoleBindings in
// namespace, as the authorizer of the namespace-requests policy sees it (a
// RoleBinding just made reaches the authorizer's cache a moment later).
func mayDeleteBindings(g Gomega, group, namespace string) {
	g.Eventually(func() bool {
		return canI(g, group, "delete", "rolebindings", rbacv1.GroupName, namespace, "")
	}, timeout, interval).Should(BeTrue(), "%s may not delete rolebindings in %s", group, namespace)
}

// makeAdminOf makes group admin of namespace, as a tenant admin would with a
// RoleBinding of their own to admin (envtest aggregates nothing: bound to
// what admin holds on a real cluster, NamespaceRequests included; letRequest
// must have made that role), and waits until the authorizer knows it.
func makeAdminOf(g Gomega, group, namespace string) {
	ctx := context.Background()
	for _, role := range []string{emulatedAdminRole, "emulated-namespacerequest-editor"} {
		g.Expect(k8s.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: group + "-" + role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: group}},
		})).To(Succeed())
	}
	g.Eventually(func() bool {
		return canI(g, group, "delete", "namespacerequests", tenancyv1.GroupVersion.Group, namespace, "")
	}, timeout, interval).Should(BeTrue())
	mayDeleteBindings(g, group, namespace)
}

// TestNamespaceAdminCannotGiveUpAGrantedNamespace: a tenant admin makes
// someone admin of one namespace of the Tenant only (a contractor, a CI
// ServiceAccount). Admin there lets them delete the NamespaceRequests there,
// and deleting a granted one makes the manager give its namespace up (here:
// delete it). They hold no right in that namespace: the manager must not
// delete it for them. Refused by the namespace-requests admission policy;
// the Tenant's admins, admins of the granted namespace too, may still
// delete the request; a request that holds no namespace (refused, or not
// decided yet), or one whose own namespace is being deleted, is anyone's
// with admin where it is.
func TestNamespaceAdminCannotGiveUpAGrantedNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tenant := newTenant("rqd", "rqd-", "dev")
	tenant.Spec.NamespaceDeletionPolicy = tenancyv1.NamespaceDelete
	tenant.Spec.SelfService = tenancyv1.SelfService{MaxNamespaces: 1}
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	eventuallyReady(g, "rqd")
	letRequest(g, "rqd-admins", "rqd-dev")
	emulateBuiltinRoles(g) // the roles; Trellis' bindings are read below
	const contractors = "rqd-contractors"
	makeAdminOf(g, contractors, "rqd-dev")
	dana := clientAs(g, "dana", contractors)
	alice := clientAs(g, "alice", "rqd-admins")

	g.Expect(alice.Create(ctx, newRequest("rqd-dev", "one"))).To(Succeed())
	one := requestReason(g, "rqd-dev", "one", ReasonRequestGranted)
	g.Expect(one.Status.Namespace).To(Equal("rqd-one"))
	g.Expect(one.Status.GrantedNamespace).To(Equal("rqd-one"))
	g.Expect(alice.Create(ctx, newRequest("rqd-dev", "two"))).To(Succeed())
	two := requestReason(g, "rqd-dev", "two", ReasonLimitReached)
	g.Expect(two.Status.Namespace).To(Equal("rqd-two"), "a refused request names the namespace it asked for")
	g.Expect(two.Status.GrantedNamespace).To(BeEmpty(), "a refused request holds none")
	emulateBuiltinRoles(g, "rqd-one")
	mayDeleteBindings(g, "rqd-admins", "rqd-one")
	g.Expect(canI(g, contractors, "delete", "rolebindings", rbacv1.GroupName, "rqd-one", "")).To(BeFalse(),
		"the contractor is admin of rqd-dev only")

	// expectRefused checks the policy's refusal of the contractor's delete.
	expectRefused := func(g Gomega, err error, request, namespace string) {
		g.Expect(err).To(HaveOccurred(), "deleted: the manager gives up %s for someone with no right in it", namespace)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "not a refusal: %v", err)
		g.Expect(err.Error()).To(ContainSubstring("ValidatingAdmissionPolicy 'namespace-requests' with binding 'namespace-requests' denied request"))
		g.Expect(err.Error()).To(ContainSubstring("NamespaceRequest " + request + " holds namespace " + namespace))
		g.Expect(err.Error()).To(ContainSubstring("you may not delete rolebindings.rbac.authorization.k8s.io in namespace " + namespace))
	}

	t.Run("the namespace-only admin deletes a granted request: refused", func(t *testing.T) {
		g := NewWithT(t)
		expectRefused(g, dana.Delete(ctx, newRequest("rqd-dev", "one")), "rqd-dev/one", "rqd-one")
		g.Consistently(func(g Gomega) {
			g.Expect(getNamespace(g, "rqd-one").DeletionTimestamp).To(BeNil())
		}, "1s", interval).Should(Succeed())
		requestReason(g, "rqd-dev", "one", ReasonRequestGranted)
	})

	t.Run("the namespace-only admin deletes a refused request: allowed", func(t *testing.T) {
		// Refused (LimitReached): it holds none, whatever namespace its
		// status asks for.
		g := NewWithT(t)
		g.Expect(dana.Delete(ctx, two)).To(Succeed())
	})

	t.Run("a tenant admin, admin of the granted namespace too, deletes it: allowed", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(alice.Delete(ctx, one)).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(getNamespace(g, "rqd-one").DeletionTimestamp).NotTo(BeNil())
		}, timeout, interval).Should(Succeed())
	})

	// Two namespaces whose requests no Tenant decides: the tenant-UID
	// annotation lets requests be made there (the CREATE rule), and no
	// Tenant's label maps them to a reconcile. What their status says, the
	// test writes, and nobody rewrites.
	undecided := func(g Gomega, ns string) {
		g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Annotations: map[string]string{TenantUIDAnnotation: "00000000-0000-0000-0000-000000000000"}}})).To(Succeed())
		makeAdminOf(g, contractors, ns)
		g.Expect(dana.Create(ctx, newRequest(ns, "req"))).To(Succeed())
	}

	t.Run("the namespace-only admin deletes a request not decided yet: allowed", func(t *testing.T) {
		g := NewWithT(t)
		undecided(g, "rqd-undecided")
		req := &tenancyv1.NamespaceRequest{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "rqd-undecided", Name: "req"}, req)).To(Succeed())
		g.Expect(req.Status.Namespace).To(BeEmpty())
		g.Expect(dana.Delete(ctx, req)).To(Succeed())
	})

	t.Run("the request's own namespace is being deleted: not in the way", func(t *testing.T) {
		// What the namespace controller does to every request of a namespace
		// being deleted, done here by the contractor, whose rights do not
		// matter then: the Tenant has stopped granting those requests. (The
		// Tenant would also soon mark such a request NotInTenant, Stalled;
		// here no Tenant rewrites the status.)
		g := NewWithT(t)
		undecided(g, "rqd-going")
		req := &tenancyv1.NamespaceRequest{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "rqd-going", Name: "req"}, req)).To(Succeed())
		req.Status.Namespace, req.Status.GrantedNamespace = "rqd-granted", "rqd-granted"
		g.Expect(k8s.Status().Update(ctx, req)).To(Succeed())
		expectRefused(g, dana.Delete(ctx, newRequest("rqd-going", "req")), "rqd-going/req", "rqd-granted")
		g.Expect(k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "rqd-going"}})).To(Succeed())
		// The policy reads the namespace from the API server's cache.
		g.Eventually(func() error {
			return dana.Delete(ctx, newRequest("rqd-going", "req"))
		}, timeout, interval).Should(Succeed())
	})
	deleteTenant(g, "rqd")
}
