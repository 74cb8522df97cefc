package tenancy

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
)

// Network isolation must hold whatever NetworkPolicies a tenant namespace
// holds when it is switched on, or gets later from someone the admission
// policy does not stop: Trellis reports them and never touches them.

// letWritePolicies gives the tenant's admin group, in namespace ns, what the
// built-in admin role gives on a real cluster and envtest's empty one does
// not: writing NetworkPolicies. What refuses them is then the admission policy.
func letWritePolicies(g Gomega, ns, group string) {
	ctx := context.Background()
	err := k8s.Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "test-networkpolicy-writer"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"*"}}},
	})
	if !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(k8s.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "test-networkpolicy-writer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "test-networkpolicy-writer"},
		Subjects:   []rbacv1.Subject{{Kind: "Group", Name: group, APIGroup: rbacv1.GroupName}},
	})).To(Succeed())
	// The API server's authorizer learns of a binding from its own watch, a
	// moment after the create: until then the group is still refused.
	g.Eventually(func() bool {
		return canI(g, group, "create", "networkpolicies", "networking.k8s.io", ns, "")
	}, timeout, interval).Should(BeTrue(), "the API server has not yet seen the binding")
}

func allowAll(ns, name string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{}}},
	}
}

// setIsolation turns a Tenant's network isolation on or off, as the platform
// team would (a merge patch: no conflict with the controller's status writes).
func setIsolation(g Gomega, name string, isolation *tenancyv1.NetworkIsolation) {
	t := getTenant(g, name)
	before := t.DeepCopy()
	t.Spec.NetworkIsolation = isolation
	g.Expect(k8s.Patch(context.Background(), t, client.MergeFrom(before))).To(Succeed())
}

// eventuallyIsolationUndone waits for the Tenant to be Stalled, reason
// IsolationUndone, for its current generation, with a message naming each
// of the policies (namespace/name), and returns the Stalled condition.
func eventuallyIsolationUndone(g Gomega, name string, policies ...string) *metav1.Condition {
	var stalled *metav1.Condition
	g.Eventually(func(g Gomega) {
		t := getTenant(g, name)
		g.Expect(t.Status.ObservedGeneration).To(Equal(t.Generation))
		stalled = conditions.Get(t.Status.Conditions, conditions.Stalled)
		g.Expect(stalled).NotTo(BeNil(), "status: %+v", t.Status)
		g.Expect(stalled.Reason).To(Equal(ReasonIsolationUndone), "status: %+v", t.Status)
		for _, p := range policies {
			g.Expect(stalled.Message).To(ContainSubstring(p))
		}
	}, timeout, interval).Should(Succeed())
	return stalled
}

// expectUntouched checks that a policy is exactly as it was: Trellis never
// changes what it did not create.
func expectUntouched(g Gomega, was *networkingv1.NetworkPolicy) {
	now := &networkingv1.NetworkPolicy{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(was), now)).To(Succeed())
	g.Expect(now.UID).To(Equal(was.UID))
	g.Expect(now.ResourceVersion).To(Equal(was.ResourceVersion), "never written")
}

// TestIsolationUndoneByAPolicyThatCameFirst: the team made an allow-all
// policy while the tenant was not isolated (admission let it: nothing to
// protect yet). Isolation switched on does not make the tenant Ready: it is
// Stalled, IsolationUndone, naming the policy, and stays so, at no write,
// until the team deletes it. Trellis touches it at no point.
func TestIsolationUndoneByAPolicyThatCameFirst(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, newTenant("isofirst", "isofirst-", "a", "b"))).To(Succeed())
	eventuallyReady(g, "isofirst")
	letWritePolicies(g, "isofirst-a", "isofirst-admins")
	alice := clientAs(g, "alice", "isofirst-admins")
	policy := allowAll("isofirst-a", "allow-all")
	g.Expect(alice.Create(ctx, policy)).To(Succeed())

	setIsolation(g, "isofirst", &tenancyv1.NetworkIsolation{})
	stalled := eventuallyIsolationUndone(g, "isofirst", "isofirst-a/allow-all")
	g.Expect(stalled.Message).To(HavePrefix("1 of 2 namespaces ready: NetworkPolicy isofirst-a/allow-all admits ingress from outside the tenant"))
	g.Expect(nsState(g, "isofirst", "isofirst-a")).To(Equal(tenancyv1.TenantNamespaceStatus{
		Name: "isofirst-a", State: tenancyv1.NamespaceConflict,
		Message: "NetworkPolicy allow-all admits ingress from outside the tenant, which undoes its network isolation; it is left untouched",
	}))
	g.Expect(nsState(g, "isofirst", "isofirst-b").State).To(Equal(tenancyv1.NamespaceReady))
	g.Eventually(func(g Gomega) {
		g.Expect(tenantEventReasons(g, "isofirst")).To(ContainElement(ReasonIsolationUndone))
	}, timeout, interval).Should(Succeed())
	// Trellis still does its part: its own policy is in both namespaces.
	for _, ns := range []string{"isofirst-a", "isofirst-b"} {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: networkPolicyName}, &networkingv1.NetworkPolicy{})).To(Succeed())
	}
	expectUntouched(g, policy)

	// Stalled and unchanged, a reconcile writes nothing.
	waitForQuiet(g)
	mgrWrites.Reset()
	for range 3 {
		_, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: "isofirst"}})
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(writesFor("isofirst")).To(BeEmpty())
	expectUntouched(g, policy)

	// The team deletes it (a Stalled Tenant is looked at again only every
	// ~2 minutes: the deletion is an event, mapped by its namespace).
	g.Expect(alice.Delete(ctx, policy)).To(Succeed())
	eventuallyReady(g, "isofirst")
	deleteTenant(g, "isofirst")
}

// TestIsolationUndoneByAnExemptUser: the admission policy does not stop
// those who may change Tenants (a cluster admin here). Their allow-all
// policy in an isolated namespace makes the Tenant Stalled; isolation
// switched off again makes it Ready, the policy still in place.
func TestIsolationUndoneByAnExemptUser(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tenant := newTenant("isoadm", "isoadm-", "a")
	tenant.Spec.NetworkIsolation = &tenancyv1.NetworkIsolation{AllowFromNamespaces: []string{"ingress"}}
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	eventuallyReady(g, "isoadm")

	policy := allowAll("isoadm-a", "open-up")
	g.Expect(k8s.Create(ctx, policy)).To(Succeed())
	eventuallyIsolationUndone(g, "isoadm", "isoadm-a/open-up")
	g.Expect(nsState(g, "isoadm", "isoadm-a").State).To(Equal(tenancyv1.NamespaceConflict))

	setIsolation(g, "isoadm", nil)
	eventuallyReady(g, "isoadm")
	g.Expect(conditions.Get(getTenant(g, "isoadm").Status.Conditions, conditions.Stalled)).To(BeNil())
	g.Expect(nsState(g, "isoadm", "isoadm-a").State).To(Equal(tenancyv1.NamespaceReady))
	expectUntouched(g, policy)
	deleteTenant(g, "isoadm")
}

// TestIsolationUndoneInAHandedOverNamespace: a namespace handed over to an
// isolated Tenant brings the policies it held. One admitting an IP block
// makes the Tenant Stalled; one admitting the namespace's own pods does not
// count.
func TestIsolationUndoneInAHandedOverNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "isoho-legacy"}})).To(Succeed())
	cidr := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "isoho-legacy", Name: "office"},
		Spec: rules(peers(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "192.0.2.0/24"}}))}
	pods := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "isoho-legacy", Name: "web"},
		Spec: rules(peers(podPeer(map[string]string{"app": "web"})))}
	g.Expect(k8s.Create(ctx, cidr)).To(Succeed())
	g.Expect(k8s.Create(ctx, pods)).To(Succeed())
	tenant := newTenant("isoho", "isoho-", "legacy")
	tenant.Spec.NetworkIsolation = &tenancyv1.NetworkIsolation{}
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(nsState(g, "isoho", "isoho-legacy").State).To(Equal(tenancyv1.NamespaceConflict))
	}, timeout, interval).Should(Succeed())

	ns := getNamespace(g, "isoho-legacy")
	ns.Annotations = map[string]string{HandOverAnnotation: "isoho"}
	g.Expect(k8s.Update(ctx, ns)).To(Succeed())
	// The blocked Tenant's retry, run now (as in TestHandOverIsAClusterAdminsAct).
	_, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: "isoho"}})
	g.Expect(err).NotTo(HaveOccurred())

	stalled := eventuallyIsolationUndone(g, "isoho", "isoho-legacy/office")
	g.Expect(stalled.Message).NotTo(ContainSubstring("web"))
	g.Expect(getNamespace(g, "isoho-legacy").Labels).To(HaveKeyWithValue(TenantLabel, "isoho"), "handed over")
	g.Expect(nsState(g, "isoho", "isoho-legacy")).To(Equal(tenancyv1.TenantNamespaceStatus{
		Name: "isoho-legacy", State: tenancyv1.NamespaceConflict,
		Message: "NetworkPolicy office admits ingress from outside the tenant, which undoes its network isolation; it is left untouched",
	}))
	expectUntouched(g, cidr)
	expectUntouched(g, pods)
	deleteTenant(g, "isoho")
}

// TestIsolationHoldsWithTheTenantsOwnPolicies: policies admitting only the
// namespace's pods or the tenant's own namespaces, egress policies, and any
// policy outside the tenant's namespaces leave the Tenant Ready; one more
// policy admitting another tenant does not.
func TestIsolationHoldsWithTheTenantsOwnPolicies(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tenant := newTenant("isoown", "isoown-", "a", "b")
	tenant.Spec.NetworkIsolation = &tenancyv1.NetworkIsolation{}
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	eventuallyReady(g, "isoown")
	letWritePolicies(g, "isoown-a", "isoown-admins")
	alice := clientAs(g, "alice", "isoown-admins")
	for _, np := range []*networkingv1.NetworkPolicy{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "isoown-a", Name: "same-ns"}, Spec: rules(peers(podPeer(map[string]string{"app": "web"})))},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "isoown-a", Name: "own-tenant"}, Spec: rules(peers(tenantPeer("isoown"), podPeer(nil)))},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "isoown-a", Name: "no-egress"},
			Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}}},
	} {
		g.Expect(alice.Create(ctx, np)).To(Succeed())
	}
	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "isoown-free"}})).To(Succeed())
	g.Expect(k8s.Create(ctx, allowAll("isoown-free", "allow-all"))).To(Succeed())
	// Re-verified every 2 s here: several rounds, each Ready.
	g.Consistently(func(g Gomega) {
		st := getTenant(g, "isoown").Status
		g.Expect(conditions.Get(st.Conditions, conditions.Ready).Status).To(Equal(metav1.ConditionTrue), "status: %+v", st)
	}, 5*time.Second, 250*time.Millisecond).Should(Succeed())

	// An exempt user's policy admitting another tenant: Stalled; gone: Ready.
	other := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "isoown-b", Name: "from-vap"},
		Spec: rules(peers(tenantPeer("vap")))}
	g.Expect(k8s.Create(ctx, other)).To(Succeed())
	stalled := eventuallyIsolationUndone(g, "isoown", "isoown-b/from-vap")
	g.Expect(stalled.Message).NotTo(ContainSubstring("isoown-a/"))
	g.Expect(nsState(g, "isoown", "isoown-a").State).To(Equal(tenancyv1.NamespaceReady))
	g.Expect(k8s.Delete(ctx, other)).To(Succeed())
	eventuallyReady(g, "isoown")
	deleteTenant(g, "isoown")
}

// TestIsolationVerdictAgreesWithTheAdmissionPolicy feeds isolationCases to
// config/admission's policy in the API server, as a tenant admin, in an
// isolated namespace (dry runs: nothing is stored): it refuses exactly the
// policies admitsFromOutside judges to admit traffic from outside the
// tenant, and judges the form the cache keeps of each policy the same way.
func TestIsolationVerdictAgreesWithTheAdmissionPolicy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tenant := newTenant("isocel", "isocel-", "a")
	tenant.Spec.NetworkIsolation = &tenancyv1.NetworkIsolation{}
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	eventuallyReady(g, "isocel")
	letWritePolicies(g, "isocel-a", "isocel-admins")
	alice := clientAs(g, "alice", "isocel-admins")
	refused := func(g Gomega, np *networkingv1.NetworkPolicy) bool {
		err := alice.Create(ctx, np.DeepCopy(), client.DryRunAll)
		if err == nil {
			return false
		}
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "refused for another reason: %v", err)
		g.Expect(err.Error()).To(ContainSubstring("the namespace's Tenant is network-isolated"))
		return true
	}
	for _, tc := range isolationCases("isocel", "vap") {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "isocel-a", Name: "probe"}, Spec: tc.spec}
			g.Expect(admitsFromOutside(&np.Spec, "isocel")).To(Equal(tc.outside), "the Go verdict")
			g.Expect(refused(g, np)).To(Equal(tc.outside), "the admission policy's verdict")
			cached := reduced(g, np)
			g.Expect(refused(g, cached)).To(Equal(tc.outside), "the admission policy's verdict on the cache's form %+v", cached.Spec)
		})
	}
	deleteTenant(g, "isocel")
}
