package tenancy

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
)

func nsState(g Gomega, tenant, ns string) tenancyv1.TenantNamespaceStatus {
	for _, s := range getTenant(g, tenant).Status.Namespaces {
		if s.Name == ns {
			return s
		}
	}
	return tenancyv1.TenantNamespaceStatus{}
}

// TestHandOverIsAClusterAdminsAct: a namespace the Tenant did not create is
// taken only when a cluster admin annotates it with the Tenant's name, and
// never while an existing Tenant holds it.
func TestHandOverIsAClusterAdminsAct(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ho-legacy", Labels: map[string]string{"team": "ho"}}})).To(Succeed())
	g.Expect(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ho-legacy", Name: "data"}})).To(Succeed())
	g.Expect(k8s.Create(ctx, newTenant("ho", "ho-", "legacy"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(nsState(g, "ho", "ho-legacy").State).To(Equal(tenancyv1.NamespaceConflict))
	}, timeout, interval).Should(Succeed())

	ns := getNamespace(g, "ho-legacy")
	ns.Annotations = map[string]string{HandOverAnnotation: "ho"}
	g.Expect(k8s.Update(ctx, ns)).To(Succeed())
	// A namespace Trellis does not hold is outside its cache, so the
	// annotation is no event: the blocked Tenant's retry (every ~2 minutes)
	// finds it. The test runs that retry now.
	_, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: "ho"}})
	g.Expect(err).NotTo(HaveOccurred())
	tenant := eventuallyReady(g, "ho")
	got := getNamespace(g, "ho-legacy")
	g.Expect(got.Labels).To(HaveKeyWithValue(TenantLabel, "ho"))
	g.Expect(got.Labels).To(HaveKeyWithValue("team", "ho"), "what was there stays")
	g.Expect(got.Annotations).To(HaveKeyWithValue(TenantUIDAnnotation, string(tenant.UID)))
	g.Expect(got.Annotations).NotTo(HaveKey(HandOverAnnotation), "the hand-over has done its work")
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "ho-legacy", Name: "data"}, &corev1.ConfigMap{})).To(Succeed())
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "ho-legacy", Name: adminRoleBindingName}, &rbacv1.RoleBinding{})).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(tenantEventReasons(g, "ho")).To(ContainElement("NamespaceHandedOver"))
	}, timeout, interval).Should(Succeed())

	// Another Tenant wanting the same namespace, even when annotated with
	// its name, does not get it while "ho" holds it.
	g.Expect(k8s.Create(ctx, newTenant("ho2", "ho-", "legacy"))).To(Succeed())
	ns = getNamespace(g, "ho-legacy")
	ns.Annotations[HandOverAnnotation] = "ho2"
	g.Expect(k8s.Update(ctx, ns)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(nsState(g, "ho2", "ho-legacy")).To(Equal(tenancyv1.TenantNamespaceStatus{
			Name: "ho-legacy", State: tenancyv1.NamespaceConflict,
			Message: `namespace ho-legacy belongs to Tenant "ho"; it is left untouched`,
		}))
	}, timeout, interval).Should(Succeed())
	g.Expect(getNamespace(g, "ho-legacy").Annotations).To(HaveKeyWithValue(TenantUIDAnnotation, string(tenant.UID)))
	g.Expect(getNamespace(g, "ho-legacy").Annotations).To(HaveKeyWithValue(HandOverAnnotation, "ho2"), "not ours to remove")

	// Released (ho deleted under Retain), it can be handed over: the
	// annotation is still there, and now nobody holds the namespace.
	deleteTenant(g, "ho")
	eventuallyReady(g, "ho2")
	g.Expect(getNamespace(g, "ho-legacy").Labels).To(HaveKeyWithValue(TenantLabel, "ho2"))
	g.Expect(getNamespace(g, "ho-legacy").Annotations).NotTo(HaveKey(HandOverAnnotation))
	deleteTenant(g, "ho2")
}

// TestReclaimNeedsTheRecordAndAGoneTenant: a namespace Trellis held for a
// Tenant object that no longer exists (its marks name the Tenant, and the
// ClusterRole that Tenant left records the namespace's UID) is taken back
// by the Tenant of that name, and so are Trellis' leftovers in it. The same
// marks on a namespace the role does not record (made later, by whoever may
// create namespaces) are refused, and so are marks naming this Tenant but
// carrying the UID of another, existing, Tenant.
func TestReclaimNeedsTheRecordAndAGoneTenant(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	// What a Tenant "rc", deleted with its CRD, leaves behind; and a
	// namespace made later with the same marks.
	marked := func(name string) *corev1.Namespace {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{TenantLabel: "rc", "app.kubernetes.io/managed-by": "trellis"},
			Annotations: map[string]string{TenantUIDAnnotation: "a-uid-no-tenant-has"},
		}}
		g.Expect(k8s.Create(ctx, ns)).To(Succeed())
		return ns
	}
	held, later := marked("rc-x"), marked("rc-y")
	stale := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "rc-x", Name: adminRoleBindingName,
			Labels: map[string]string{TenantLabel: "rc", "app.kubernetes.io/managed-by": "trellis"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
		Subjects: []rbacv1.Subject{{Kind: "Group", Name: "rc-old-admins", APIGroup: rbacv1.GroupName}},
	}
	g.Expect(k8s.Create(ctx, stale)).To(Succeed())
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(stale), stale)).To(Succeed())
	left := desiredTenantRole(newTenant("rc", "rc-", "x"), []string{"rc-x"}, []types.UID{held.UID})
	g.Expect(k8s.Create(ctx, left)).To(Succeed())

	g.Expect(k8s.Create(ctx, newTenant("rc", "rc-", "x", "y"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(nsState(g, "rc", "rc-x").State).To(Equal(tenancyv1.NamespaceReady))
		g.Expect(nsState(g, "rc", "rc-y").State).To(Equal(tenancyv1.NamespaceConflict))
		g.Expect(nsState(g, "rc", "rc-y").Message).To(ContainSubstring("is labelled tenancy.trellis.dev/tenant=rc, but Trellis did not make it"))
	}, timeout, interval).Should(Succeed())
	tenant := getTenant(g, "rc")
	g.Expect(getNamespace(g, "rc-x").Annotations).To(HaveKeyWithValue(TenantUIDAnnotation, string(tenant.UID)))
	g.Expect(getNamespace(g, "rc-y").Annotations).To(HaveKeyWithValue(TenantUIDAnnotation, "a-uid-no-tenant-has"), "untouched")
	err := k8s.Get(ctx, client.ObjectKey{Namespace: "rc-y", Name: adminRoleBindingName}, &rbacv1.RoleBinding{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "nobody bound in the namespace made later")
	rb := &rbacv1.RoleBinding{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(stale), rb)).To(Succeed())
		g.Expect(rb.Subjects).To(Equal([]rbacv1.Subject{{Kind: "Group", Name: "rc-admins", APIGroup: rbacv1.GroupName}}))
		role := &rbacv1.ClusterRole{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(left), role)).To(Succeed())
		g.Expect(role.Annotations).To(HaveKeyWithValue(NamespaceUIDsAnnotation, string(held.UID)), "the record stays the held namespace's")
	}, timeout, interval).Should(Succeed())
	g.Expect(rb.UID).To(Equal(stale.UID), "kept and corrected, not re-created")
	g.Expect(later.UID).NotTo(Equal(held.UID))
	g.Eventually(func(g Gomega) {
		g.Expect(tenantEventReasons(g, "rc")).To(ContainElement("NamespaceReclaimed"))
	}, timeout, interval).Should(Succeed())

	// Forged: labelled with "fg", but marked with the UID of Tenant "rc",
	// which exists. "fg" does not take it; "rc" does not either (not in its spec).
	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:        "fg-x",
		Labels:      map[string]string{TenantLabel: "fg"},
		Annotations: map[string]string{TenantUIDAnnotation: string(tenant.UID)},
	}})).To(Succeed())
	g.Expect(k8s.Create(ctx, newTenant("fg", "fg-", "x"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(nsState(g, "fg", "fg-x")).To(Equal(tenancyv1.TenantNamespaceStatus{
			Name: "fg-x", State: tenancyv1.NamespaceConflict, Message: `namespace fg-x belongs to Tenant "rc"; it is left untouched`,
		}))
	}, timeout, interval).Should(Succeed())
	g.Expect(getNamespace(g, "fg-x").Annotations).To(HaveKeyWithValue(TenantUIDAnnotation, string(tenant.UID)))
	err = k8s.Get(ctx, client.ObjectKey{Namespace: "fg-x", Name: adminRoleBindingName}, &rbacv1.RoleBinding{})
	g.Expect(client.IgnoreNotFound(err)).To(Succeed())
	g.Expect(err).To(HaveOccurred(), "no binding in a namespace that is not the tenant's")
	deleteTenant(g, "fg")
	deleteTenant(g, "rc")
}

// TestReleasedNamespaceIsHandedOverWithItsGuardrails: a namespace a Tenant
// released keeps the guardrails Trellis made for it, labelled for that
// Tenant, which still exists. Given back to the same Tenant, or to another,
// by a cluster admin's hand-over, the new holder takes those guardrails as
// its own (the same objects, rewritten to its spec) instead of stalling on
// them, and the namespace is no longer marked released.
func TestReleasedNamespaceIsHandedOverWithItsGuardrails(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, newGuardedTenant("rh", "rh-", "a", "b"))).To(Succeed())
	eventuallyReady(g, "rh")
	kept := func() map[string]client.Object {
		return map[string]client.Object{
			quotaName: &corev1.ResourceQuota{}, limitRangeName: &corev1.LimitRange{}, networkPolicyName: &networkingv1.NetworkPolicy{},
		}
	}
	uids := map[string]types.UID{}
	for name, obj := range kept() {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "rh-b", Name: name}, obj)).To(Succeed())
		uids[name] = obj.GetUID()
	}
	setNamespaces := func(tenant string, names ...string) {
		g.Eventually(func() error {
			t := getTenant(g, tenant)
			t.Spec.Namespaces = names
			return k8s.Update(ctx, t)
		}, timeout, interval).Should(Succeed())
	}
	released := func(from string) {
		g.Eventually(func(g Gomega) {
			g.Expect(getNamespace(g, "rh-b").Labels).To(HaveKeyWithValue(ReleasedFromLabel, from))
		}, timeout, interval).Should(Succeed())
	}
	handOver := func(to string) {
		ns := getNamespace(g, "rh-b")
		ns.Annotations = map[string]string{HandOverAnnotation: to}
		g.Expect(k8s.Update(ctx, ns)).To(Succeed())
		// The namespace is outside the cache: the blocked Tenant's retry finds it.
		_, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: to}})
		g.Expect(err).NotTo(HaveOccurred())
	}

	setNamespaces("rh", "a")
	released("rh")
	// Wanted back, it is not taken on the Tenant's word: releasing was an act.
	setNamespaces("rh", "a", "b")
	g.Eventually(func(g Gomega) {
		g.Expect(nsState(g, "rh", "rh-b")).To(Equal(tenancyv1.TenantNamespaceStatus{
			Name: "rh-b", State: tenancyv1.NamespaceConflict,
			Message: `namespace rh-b was released by Tenant "rh"; it is left untouched ` +
				"(a cluster admin can hand it over with the annotation tenancy.trellis.dev/hand-over-to=<tenant>)",
		}))
	}, timeout, interval).Should(Succeed())

	// Handed back to the Tenant that released it: its guardrails are its own again.
	handOver("rh")
	rh := eventuallyReady(g, "rh")
	got := getNamespace(g, "rh-b")
	g.Expect(got.Labels).To(HaveKeyWithValue(TenantLabel, "rh"))
	g.Expect(got.Labels).NotTo(HaveKey(ReleasedFromLabel))
	g.Expect(got.Annotations).NotTo(HaveKey(HandOverAnnotation))
	expectGuardrailsExceptViewers := func(t *tenancyv1.Tenant) {
		for name, obj := range kept() {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "rh-b", Name: name}, obj)).To(Succeed())
			g.Expect(obj.GetUID()).To(Equal(uids[name]), "%s taken over, not re-created", name)
			g.Expect(obj.GetLabels()).To(HaveKeyWithValue(TenantLabel, t.Name))
		}
	}
	expectGuardrailsExceptViewers(rh)

	// Released again, and handed to another Tenant while "rh" still exists:
	// what Trellis kept there for "rh" becomes the new Tenant's, as it declares.
	setNamespaces("rh", "a")
	released("rh")
	other := newTenant("rh2", "rh-", "b")
	other.Spec.Quota = tenancyv1.TenantQuota{Hard: corev1.ResourceList{"pods": resource.MustParse("5")}}
	other.Spec.PodSecurity = tenancyv1.PodSecurity{Enforce: tenancyv1.PodSecurityBaseline}
	g.Expect(k8s.Create(ctx, other)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(nsState(g, "rh2", "rh-b").State).To(Equal(tenancyv1.NamespaceConflict))
	}, timeout, interval).Should(Succeed())
	handOver("rh2")
	other = eventuallyReady(g, "rh2")
	got = getNamespace(g, "rh-b")
	g.Expect(got.Labels).To(HaveKeyWithValue(TenantLabel, "rh2"))
	g.Expect(got.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "baseline"))
	g.Expect(got.Labels).NotTo(HaveKey("pod-security.kubernetes.io/warn"), "rh2 declares no warn level")
	g.Expect(got.Labels).NotTo(HaveKey(NetworkIsolationLabel))
	g.Expect(got.Labels).NotTo(HaveKey(ReleasedFromLabel))
	g.Expect(got.Annotations).To(HaveKeyWithValue(TenantUIDAnnotation, string(other.UID)))
	q := &corev1.ResourceQuota{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "rh-b", Name: quotaName}, q)).To(Succeed())
	g.Expect(q.UID).To(Equal(uids[quotaName]), "taken over, not re-created")
	g.Expect(q.Labels).To(HaveKeyWithValue(TenantLabel, "rh2"))
	g.Expect(q.Spec.Hard).To(Equal(corev1.ResourceList{"pods": resource.MustParse("5")}))
	for name, obj := range map[string]client.Object{limitRangeName: &corev1.LimitRange{}, networkPolicyName: &networkingv1.NetworkPolicy{}} {
		err := k8s.Get(ctx, client.ObjectKey{Namespace: "rh-b", Name: name}, obj)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%s: rh2 does not declare it (%v)", name, err)
	}
	rb := &rbacv1.RoleBinding{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "rh-b", Name: adminRoleBindingName}, rb)).To(Succeed())
	g.Expect(rb.Subjects).To(Equal([]rbacv1.Subject{{Kind: "Group", Name: "rh2-admins", APIGroup: rbacv1.GroupName}}))
	g.Expect(nsState(g, "rh", "rh-b")).To(Equal(tenancyv1.TenantNamespaceStatus{}), "no longer in rh's spec")
	deleteTenant(g, "rh2")
	deleteTenant(g, "rh")
}
