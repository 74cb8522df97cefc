package tenancy

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
)

// TestALabelDoesNotHandANamespaceOver: someone who may create namespaces and
// bind roles in them (a provisioning job: not a cluster admin, and without
// the right to change Tenants) makes, before a Tenant lists it, a namespace
// labelled as that Tenant's, and binds a user of its own, intruder, to admin
// there. Labelled alone, or also marked with a made-up Tenant UID, or with
// the UID of the Tenant of that name that was there before, it is not
// taken: the Tenant is Stalled, NamespaceConflict, naming it, its admins are
// not bound there nor given it through the Tenant's ClusterRole, and the
// only binding in it is the provisioner's. A cluster admin's hand-over
// still gives it to the Tenant.
func TestALabelDoesNotHandANamespaceOver(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "test-namespace-provisioner"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"create", "get"}},
			{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"rolebindings"}, Verbs: []string{"create"}},
			{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles"}, Verbs: []string{"bind"}, ResourceNames: []string{"admin"}},
		},
	})).To(Succeed())
	g.Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "test-namespace-provisioner"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "test-namespace-provisioner"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "provisioner"}},
	})).To(Succeed())
	provisioner := clientAs(g, "provisioner")

	// The Tenant "lbl" that was there before, deleted as usual.
	g.Expect(k8s.Create(ctx, newTenant("lbl", "lbl-", "old"))).To(Succeed())
	before := eventuallyReady(g, "lbl")
	deleteTenant(g, "lbl")

	premade := map[string]map[string]string{ // namespace -> the marks the provisioner forges
		"lbl-qa":     nil,
		"lbl-uid":    {TenantUIDAnnotation: "a-uid-no-tenant-has"},
		"lbl-before": {TenantUIDAnnotation: string(before.UID)},
	}
	for name, annotations := range premade {
		g.Expect(provisioner.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: name, Labels: map[string]string{TenantLabel: "lbl"}, Annotations: annotations,
		}})).To(Succeed(), name)
		g.Expect(provisioner.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: name, Name: "intruder-admin"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "intruder"}},
		})).To(Succeed(), name)
	}

	g.Expect(k8s.Create(ctx, newTenant("lbl", "lbl-", "ok", "qa", "uid", "before"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		tenant := getTenant(g, "lbl")
		g.Expect(tenant.Status.ObservedGeneration).To(Equal(tenant.Generation))
		stalled := meta.FindStatusCondition(tenant.Status.Conditions, conditions.Stalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(stalled.Reason).To(Equal(ReasonNamespaceConflict))
		g.Expect(nsState(g, "lbl", "lbl-ok").State).To(Equal(tenancyv1.NamespaceReady))
		for name := range premade {
			st := nsState(g, "lbl", name)
			g.Expect(st.State).To(Equal(tenancyv1.NamespaceConflict), name)
			g.Expect(st.Message).To(ContainSubstring("namespace "+name+" is labelled tenancy.trellis.dev/tenant=lbl"), name)
			g.Expect(st.Message).To(ContainSubstring("a cluster admin can hand it over"), name)
		}
	}, timeout, interval).Should(Succeed())
	for name, annotations := range premade {
		ns := getNamespace(g, name)
		g.Expect(ns.Annotations[TenantUIDAnnotation]).To(Equal(annotations[TenantUIDAnnotation]), "%s: not marked as the Tenant's", name)
		bindings := &rbacv1.RoleBindingList{}
		g.Expect(k8s.List(ctx, bindings, client.InNamespace(name))).To(Succeed())
		g.Expect(bindings.Items).To(HaveLen(1), "%s: the provisioner's binding alone", name)
		g.Expect(bindings.Items[0].Name).To(Equal("intruder-admin"))
		g.Expect(canI(g, "lbl-admins", "get", "namespaces", "", "", name)).To(BeFalse(), "%s: not in the Tenant's ClusterRole", name)
	}

	// A cluster admin hands one over: it is the Tenant's.
	ns := getNamespace(g, "lbl-qa")
	ns.Annotations = map[string]string{HandOverAnnotation: "lbl"}
	g.Expect(k8s.Update(ctx, ns)).To(Succeed())
	_, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: "lbl"}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		g.Expect(nsState(g, "lbl", "lbl-qa").State).To(Equal(tenancyv1.NamespaceReady))
	}, timeout, interval).Should(Succeed())
	tenant := getTenant(g, "lbl")
	g.Expect(getNamespace(g, "lbl-qa").Annotations).To(HaveKeyWithValue(TenantUIDAnnotation, string(tenant.UID)))
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "lbl-qa", Name: adminRoleBindingName}, &rbacv1.RoleBinding{})).To(Succeed())
	deleteTenant(g, "lbl")
	err = k8s.Get(ctx, client.ObjectKey{Namespace: "lbl-uid", Name: adminRoleBindingName}, &rbacv1.RoleBinding{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
}
