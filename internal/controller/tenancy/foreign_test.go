package tenancy

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/controller/setup"
)

// TestLabelledForeignChildrenAreConflicts: objects in a tenant namespace
// that carry Trellis' label but are not recognisably the tenant's (a
// RoleBinding with the viewer binding's name but no tenant label; a quota
// with the tenant label under a name Trellis does not give) are cached as
// metadata only, and that is enough to see the first as a conflict when the
// Tenant asks for viewers; neither is written.
func TestLabelledForeignChildrenAreConflicts(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, newTenant("lfc", "lfc-", "a"))).To(Succeed())
	eventuallyReady(g, "lfc")

	binding := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "lfc-a", Name: viewerRoleBindingName,
			Labels: map[string]string{setup.ManagedByLabel: setup.ManagedByValue}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: builtinViewRole},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "mallory", APIGroup: rbacv1.GroupName}},
	}
	g.Expect(k8s.Create(ctx, binding)).To(Succeed())
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: "lfc-a", Name: "bigger",
			Labels: map[string]string{setup.ManagedByLabel: setup.ManagedByValue, TenantLabel: "lfc"}},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"pods": resource.MustParse("1000")}},
	}
	g.Expect(k8s.Create(ctx, quota)).To(Succeed())

	// The manager's cache holds them as metadata, with the tenant label.
	g.Eventually(func(g Gomega) {
		got := &rbacv1.RoleBinding{}
		g.Expect(reconciler.client.Get(ctx, client.ObjectKeyFromObject(binding), got)).To(Succeed())
		g.Expect(got.Subjects).To(BeEmpty())
		g.Expect(got.RoleRef).To(BeZero())
		gotQuota := &corev1.ResourceQuota{}
		g.Expect(reconciler.client.Get(ctx, client.ObjectKeyFromObject(quota), gotQuota)).To(Succeed())
		g.Expect(gotQuota.Spec.Hard).To(BeEmpty())
		g.Expect(gotQuota.Labels).To(HaveKeyWithValue(TenantLabel, "lfc"))
	}, timeout, interval).Should(Succeed())

	tenant := getTenant(g, "lfc")
	tenant.Spec.Viewers = []tenancyv1.Subject{{Kind: rbacv1.GroupKind, Name: "lfc-viewers", APIGroup: rbacv1.GroupName}}
	g.Expect(k8s.Update(ctx, tenant)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(nsState(g, "lfc", "lfc-a")).To(Equal(tenancyv1.TenantNamespaceStatus{
			Name: "lfc-a", State: tenancyv1.NamespaceConflict,
			Message: "RoleBinding lfc-a/trellis-tenant-viewer exists and was not created by this Tenant; it is left untouched",
		}))
	}, timeout, interval).Should(Succeed())

	got := &rbacv1.RoleBinding{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(binding), got)).To(Succeed())
	g.Expect(got.ResourceVersion).To(Equal(binding.ResourceVersion))
	gotQuota := &corev1.ResourceQuota{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(quota), gotQuota)).To(Succeed())
	g.Expect(gotQuota.Spec).To(Equal(quota.Spec))
	g.Expect(gotQuota.Labels).To(Equal(quota.Labels))
	deleteTenant(g, "lfc")
}
