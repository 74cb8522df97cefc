package tenancy

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/testenv"
)

const (
	timeout  = 20 * time.Second
	interval = 50 * time.Millisecond
)

func newTenant(name, prefix string, namespaces ...string) *tenancyv1.Tenant {
	return &tenancyv1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: tenancyv1.TenantSpec{
			Namespaces:      namespaces,
			NamespacePrefix: ptr.To(prefix),
			Admin:           tenancyv1.AdminSubject{Kind: rbacv1.GroupKind, Name: name + "-admins", APIGroup: rbacv1.GroupName},
		},
	}
}

func getTenant(g Gomega, name string) *tenancyv1.Tenant {
	t := &tenancyv1.Tenant{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Name: name}, t)).To(Succeed())
	return t
}

func eventuallyReady(g Gomega, name string) *tenancyv1.Tenant {
	var t *tenancyv1.Tenant
	g.Eventually(func(g Gomega) {
		t = getTenant(g, name)
		g.Expect(meta.IsStatusConditionTrue(t.Status.Conditions, conditions.Ready)).To(BeTrue(), "status: %+v", t.Status)
		g.Expect(t.Status.ObservedGeneration).To(Equal(t.Generation))
	}, timeout, interval).Should(Succeed())
	return t
}

func getNamespace(g Gomega, name string) *corev1.Namespace {
	ns := &corev1.Namespace{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Name: name}, ns)).To(Succeed())
	return ns
}

// canI asks the API server whether the group member may do verb on resource.
func canI(g Gomega, group, verb, resource, apiGroup, namespace, name string) bool {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   "someone",
		Groups: []string{group},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: verb, Resource: resource, Group: apiGroup, Namespace: namespace, Name: name,
		},
	}}
	g.Expect(k8s.Create(context.Background(), sar)).To(Succeed())
	return sar.Status.Allowed
}

func deleteTenant(g Gomega, name string) {
	t := &tenancyv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name}}
	g.Expect(client.IgnoreNotFound(k8s.Delete(context.Background(), t))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(context.Background(), client.ObjectKey{Name: name}, &tenancyv1.Tenant{}))
	}, timeout, interval).Should(BeTrue())
}

func TestTenantCreatesNamespacesAndRBAC(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, newTenant("alpha", "alpha-", "dev", "prod"))).To(Succeed())
	tenant := eventuallyReady(g, "alpha")

	g.Expect(tenant.Finalizers).To(ContainElement(Finalizer))
	g.Expect(tenant.Status.Namespaces).To(Equal([]tenancyv1.TenantNamespaceStatus{
		{Name: "alpha-dev", State: tenancyv1.NamespaceReady}, {Name: "alpha-prod", State: tenancyv1.NamespaceReady},
	}))
	for _, name := range []string{"alpha-dev", "alpha-prod"} {
		ns := getNamespace(g, name)
		g.Expect(ns.Labels).To(HaveKeyWithValue(TenantLabel, "alpha"))
		g.Expect(ns.Annotations).To(HaveKeyWithValue(TenantUIDAnnotation, string(tenant.UID)))
		// No owner reference: the garbage collector must never delete a namespace.
		g.Expect(ns.OwnerReferences).To(BeEmpty())

		rb := &rbacv1.RoleBinding{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: name, Name: adminRoleBindingName}, rb)).To(Succeed())
		g.Expect(rb.RoleRef.Name).To(Equal("admin"))
		g.Expect(rb.Subjects).To(ConsistOf(rbacv1.Subject{Kind: "Group", Name: "alpha-admins", APIGroup: rbacv1.GroupName}))
		g.Expect(metav1.IsControlledBy(rb, tenant)).To(BeTrue())
	}

	// The admin's effective rights, as the API server's authorizer sees them.
	// (envtest runs no ClusterRole aggregation, so the built-in admin role is
	// empty here: what it grants in the namespaces is checked by the e2e suite.)
	g.Eventually(func(g Gomega) {
		g.Expect(canI(g, "alpha-admins", "get", "tenants", "tenancy.trellis.dev", "", "alpha")).To(BeTrue())
		g.Expect(canI(g, "alpha-admins", "get", "namespaces", "", "", "alpha-dev")).To(BeTrue())
	}, timeout, interval).Should(Succeed())
	g.Expect(canI(g, "alpha-admins", "create", "deployments", "apps", "default", "")).To(BeFalse())
	g.Expect(canI(g, "alpha-admins", "list", "secrets", "", "", "")).To(BeFalse())
	g.Expect(canI(g, "alpha-admins", "update", "tenants", "tenancy.trellis.dev", "", "alpha")).To(BeFalse())
	g.Expect(canI(g, "alpha-admins", "get", "tenants", "tenancy.trellis.dev", "", "other")).To(BeFalse())
	g.Expect(canI(g, "alpha-admins", "delete", "namespaces", "", "", "alpha-dev")).To(BeFalse())
	g.Expect(canI(g, "alpha-admins", "get", "namespaces", "", "", "default")).To(BeFalse())

	// Ready is announced.
	g.Eventually(func(g Gomega) {
		events := &corev1.EventList{}
		g.Expect(k8s.List(ctx, events, client.InNamespace("default"))).To(Succeed())
		var reasons []string
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "alpha" {
				reasons = append(reasons, e.Reason)
			}
		}
		g.Expect(reasons).To(ContainElements(ReasonReady, "NamespaceCreated"))
	}, timeout, interval).Should(Succeed())
	deleteTenant(g, "alpha")
}

func TestTenantAdminsAreIsolated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, newTenant("iso-a", "iso-a-", "app"))).To(Succeed())
	g.Expect(k8s.Create(ctx, newTenant("iso-b", "iso-b-", "app"))).To(Succeed())
	eventuallyReady(g, "iso-a")
	eventuallyReady(g, "iso-b")
	g.Eventually(func(g Gomega) {
		g.Expect(canI(g, "iso-a-admins", "get", "namespaces", "", "", "iso-a-app")).To(BeTrue())
	}, timeout, interval).Should(Succeed())
	g.Expect(canI(g, "iso-a-admins", "get", "secrets", "", "iso-b-app", "")).To(BeFalse())
	g.Expect(canI(g, "iso-a-admins", "get", "tenants", "tenancy.trellis.dev", "", "iso-b")).To(BeFalse())
	g.Expect(canI(g, "iso-b-admins", "get", "namespaces", "", "", "iso-a-app")).To(BeFalse())
	deleteTenant(g, "iso-a")
	deleteTenant(g, "iso-b")
}

func TestTenantShrinkRetainKeepsNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, newTenant("keep", "keep-", "a", "b"))).To(Succeed())
	eventuallyReady(g, "keep")
	// Something the team put in keep-b.
	g.Expect(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "keep-b", Name: "data"}})).To(Succeed())

	tenant := getTenant(g, "keep")
	tenant.Spec.Namespaces = []string{"a"}
	g.Expect(k8s.Update(ctx, tenant)).To(Succeed())
	eventuallyReady(g, "keep")

	g.Eventually(func(g Gomega) {
		ns := getNamespace(g, "keep-b")
		g.Expect(ns.DeletionTimestamp).To(BeNil())
		g.Expect(ns.Labels).NotTo(HaveKey(TenantLabel))
		g.Expect(ns.Annotations).NotTo(HaveKey(TenantUIDAnnotation))
		err := k8s.Get(ctx, client.ObjectKey{Namespace: "keep-b", Name: adminRoleBindingName}, &rbacv1.RoleBinding{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	}, timeout, interval).Should(Succeed())
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "keep-b", Name: "data"}, &corev1.ConfigMap{})).To(Succeed())
	// The admin lost the rights there, and its ClusterRole no longer names it.
	g.Eventually(func(g Gomega) {
		g.Expect(canI(g, "keep-admins", "get", "configmaps", "", "keep-b", "")).To(BeFalse())
		g.Expect(canI(g, "keep-admins", "get", "namespaces", "", "", "keep-b")).To(BeFalse())
	}, timeout, interval).Should(Succeed())

	// Growing again: keep-b now exists without our marks, so it is a conflict, untouched.
	tenant = getTenant(g, "keep")
	tenant.Spec.Namespaces = []string{"a", "b"}
	g.Expect(k8s.Update(ctx, tenant)).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(getTenant(g, "keep").Status.Conditions, conditions.Ready)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(ReasonNamespaceConflict))
	}, timeout, interval).Should(Succeed())
	g.Expect(getNamespace(g, "keep-b").Labels).NotTo(HaveKey(TenantLabel))
	deleteTenant(g, "keep")
}

func TestTenantShrinkDeleteDeletesOnlyItsNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tenant := newTenant("drop", "drop-", "a", "b")
	tenant.Spec.NamespaceDeletionPolicy = tenancyv1.NamespaceDelete
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	eventuallyReady(g, "drop")

	tenant = getTenant(g, "drop")
	tenant.Spec.Namespaces = []string{"a"}
	g.Expect(k8s.Update(ctx, tenant)).To(Succeed())
	// envtest runs no namespace controller, so a deleted namespace stays Terminating.
	g.Eventually(func(g Gomega) {
		g.Expect(getNamespace(g, "drop-b").DeletionTimestamp).NotTo(BeNil())
	}, timeout, interval).Should(Succeed())
	g.Expect(getNamespace(g, "drop-a").DeletionTimestamp).To(BeNil())
	eventuallyReady(g, "drop")
	deleteTenant(g, "drop")
}

func TestTenantNeverTakesForeignOrProtectedNamespaces(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	foreign := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "clash-dev", Labels: map[string]string{"owner": "someone"}}}
	g.Expect(k8s.Create(ctx, foreign)).To(Succeed())

	tenant := newTenant("clash", "clash-", "dev", "ok")
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	// The manager's own namespace and the operator's extra pattern are refused too.
	protected := newTenant("grabby", "", "trellis-system", "protected-x", "fine-grabby")
	g.Expect(k8s.Create(ctx, protected)).To(Succeed())

	g.Eventually(func(g Gomega) {
		st := getTenant(g, "clash").Status
		c := meta.FindStatusCondition(st.Conditions, conditions.Ready)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(ReasonNamespaceConflict))
		g.Expect(st.Namespaces).To(ContainElement(tenancyv1.TenantNamespaceStatus{
			Name: "clash-dev", State: tenancyv1.NamespaceConflict,
			Message: "namespace clash-dev already exists and was not created by this Tenant; it is left untouched",
		}))
		g.Expect(st.Namespaces).To(ContainElement(tenancyv1.TenantNamespaceStatus{Name: "clash-ok", State: tenancyv1.NamespaceReady}))
	}, timeout, interval).Should(Succeed())
	got := getNamespace(g, "clash-dev")
	g.Expect(got.Labels).To(Equal(map[string]string{"owner": "someone", "kubernetes.io/metadata.name": "clash-dev"}))
	g.Expect(got.Annotations).NotTo(HaveKey(TenantUIDAnnotation))
	err := k8s.Get(ctx, client.ObjectKey{Namespace: "clash-dev", Name: adminRoleBindingName}, &rbacv1.RoleBinding{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no RoleBinding in a foreign namespace")

	g.Eventually(func(g Gomega) {
		st := getTenant(g, "grabby").Status
		g.Expect(st.Namespaces).To(HaveLen(3))
		g.Expect(st.Namespaces[0].State).To(Equal(tenancyv1.NamespaceProtected))
		g.Expect(st.Namespaces[0].Message).To(ContainSubstring("namespace Trellis runs in"))
		g.Expect(st.Namespaces[1].State).To(Equal(tenancyv1.NamespaceProtected))
		g.Expect(st.Namespaces[1].Message).To(ContainSubstring("protected pattern"))
		g.Expect(st.Namespaces[2].State).To(Equal(tenancyv1.NamespaceReady))
	}, timeout, interval).Should(Succeed())
	g.Expect(getNamespace(g, testManagerNamespace()).Labels).NotTo(HaveKey(TenantLabel))

	// A second Tenant claiming a name the first holds: the first keeps it.
	g.Expect(k8s.Create(ctx, newTenant("second", "clash-", "ok"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		st := getTenant(g, "second").Status
		g.Expect(st.Namespaces).To(ConsistOf(tenancyv1.TenantNamespaceStatus{
			Name: "clash-ok", State: tenancyv1.NamespaceConflict,
			Message: `namespace clash-ok belongs to Tenant "clash"; it is left untouched`,
		}))
	}, timeout, interval).Should(Succeed())
	g.Expect(getNamespace(g, "clash-ok").Labels).To(HaveKeyWithValue(TenantLabel, "clash"))
	g.Expect(canI(g, "second-admins", "get", "secrets", "", "clash-ok", "")).To(BeFalse())

	deleteTenant(g, "second")
	deleteTenant(g, "grabby")
	deleteTenant(g, "clash")
	// Deleting "clash" (Retain) left the foreign namespace exactly as it was.
	g.Expect(getNamespace(g, "clash-dev").Labels).To(HaveKeyWithValue("owner", "someone"))
	g.Expect(getNamespace(g, "clash-dev").DeletionTimestamp).To(BeNil())
}

func testManagerNamespace() string { return "trellis-system" }

func TestTenantDeletionFollowsPolicy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	retain := newTenant("bye-retain", "bye-r-", "x")
	del := newTenant("bye-delete", "bye-d-", "x")
	del.Spec.NamespaceDeletionPolicy = tenancyv1.NamespaceDelete
	g.Expect(k8s.Create(ctx, retain)).To(Succeed())
	g.Expect(k8s.Create(ctx, del)).To(Succeed())
	eventuallyReady(g, "bye-retain")
	eventuallyReady(g, "bye-delete")

	deleteTenant(g, "bye-retain")
	deleteTenant(g, "bye-delete")
	ns := getNamespace(g, "bye-r-x")
	g.Expect(ns.DeletionTimestamp).To(BeNil())
	g.Expect(ns.Labels).NotTo(HaveKey(TenantLabel))
	g.Expect(getNamespace(g, "bye-d-x").DeletionTimestamp).NotTo(BeNil())
	// The per-tenant ClusterRole goes with its Tenant (owner reference; envtest
	// runs no garbage collector, so check the reference instead).
	role := &rbacv1.ClusterRole{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: "trellis:tenant:bye-retain"}, role); err == nil {
		g.Expect(role.OwnerReferences).To(HaveLen(1))
		g.Expect(role.OwnerReferences[0].Kind).To(Equal("Tenant"))
	}
}

func TestUnchangedTenantMakesZeroWrites(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, newTenant("quiet", "quiet-", "a", "b", "c"))).To(Succeed())
	eventuallyReady(g, "quiet")
	g.Eventually(func() error {
		before, _ := mgrWrites.Writes()
		time.Sleep(500 * time.Millisecond)
		if after, paths := mgrWrites.Writes(); after != before {
			return fmt.Errorf("still writing: %v", paths[before:])
		}
		return nil
	}, timeout, interval).Should(Succeed())

	// Direct reconciles, and the periodic re-verification (every 2s here)
	// for a few rounds: nothing may be written.
	mgrWrites.Reset()
	for range 5 {
		res, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: "quiet"}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.RequeueAfter).To(BeNumerically("~", 2*time.Second, 200*time.Millisecond), "a Ready tenant is looked at again after the re-verify interval, jittered")
	}
	time.Sleep(5 * time.Second)
	n, paths := mgrWrites.Writes()
	var mine []string
	for _, p := range paths {
		if strings.Contains(p, "quiet") {
			mine = append(mine, p)
		}
	}
	g.Expect(mine).To(BeEmpty(), "writes: %v (all: %d)", mine, n)
	deleteTenant(g, "quiet")
}

func TestDriftIsRepaired(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, newTenant("drift", "drift-", "a"))).To(Succeed())
	eventuallyReady(g, "drift")

	// Strip our labels from the namespace: it leaves the label-selected
	// cache, which the controller sees as a deletion mapped back to its
	// tenant; the uncached read finds it still there, marked by the tenant's
	// UID, and the labels are put back.
	ns := getNamespace(g, "drift-a")
	delete(ns.Labels, TenantLabel)
	delete(ns.Labels, "app.kubernetes.io/managed-by")
	g.Expect(k8s.Update(ctx, ns)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getNamespace(g, "drift-a").Labels).To(HaveKeyWithValue(TenantLabel, "drift"))
	}, timeout, interval).Should(Succeed())

	// A hand-edited RoleBinding is restored.
	rb := &rbacv1.RoleBinding{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "drift-a", Name: adminRoleBindingName}, rb)).To(Succeed())
	rb.Subjects = append(rb.Subjects, rbacv1.Subject{Kind: "User", Name: "intruder", APIGroup: rbacv1.GroupName})
	g.Expect(k8s.Update(ctx, rb)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &rbacv1.RoleBinding{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "drift-a", Name: adminRoleBindingName}, got)).To(Succeed())
		g.Expect(got.Subjects).To(HaveLen(1))
	}, timeout, interval).Should(Succeed())
	deleteTenant(g, "drift")
}

// admTenant is a valid Tenant changed by mutate.
func admTenant(mutate func(*tenancyv1.Tenant)) *tenancyv1.Tenant {
	t := newTenant("adm", "", "a")
	mutate(t)
	return t
}

func TestTenantAdmission(t *testing.T) {
	ctx := context.Background()
	cases := map[string]struct {
		tenant *tenancyv1.Tenant
		want   string
	}{
		"no namespaces":    {newTenant("adm", "adm-"), "spec.namespaces: Required value"},
		"kube- prefix":     {newTenant("adm", "kube-", "x"), "reserved"},
		"default":          {newTenant("adm", "", "default"), "reserved"},
		"too long":         {newTenant("adm", strings.Repeat("a", 60), "abcde"), "DNS label"},
		"upper case":       {newTenant("adm", "", "Dev"), "DNS label"},
		"trailing dash":    {newTenant("adm", "x-", "dev-"), "DNS label"},
		"duplicate":        {newTenant("adm", "", "a", "a"), "Duplicate value"},
		"bad tenant name":  {newTenant("Bad_Name", "", "a"), "a Tenant name must be a DNS label"},
		"bad policy":       {admTenant(func(t *tenancyv1.Tenant) { t.Spec.NamespaceDeletionPolicy = "Shred" }), "Unsupported value"},
		"sa without ns":    {admTenant(func(t *tenancyv1.Tenant) { t.Spec.Admin = tenancyv1.AdminSubject{Kind: "ServiceAccount", Name: "ci"} }), "a ServiceAccount admin needs a namespace"},
		"group with ns":    {admTenant(func(t *tenancyv1.Tenant) { t.Spec.Admin.Namespace = "x" }), "needs apiGroup rbac.authorization.k8s.io and no namespace"},
		"user no apiGroup": {admTenant(func(t *tenancyv1.Tenant) { t.Spec.Admin.APIGroup = "" }), "needs apiGroup rbac.authorization.k8s.io"},
		"unknown kind":     {admTenant(func(t *tenancyv1.Tenant) { t.Spec.Admin.Kind = "Robot" }), "Unsupported value"},
		"empty admin name": {admTenant(func(t *tenancyv1.Tenant) { t.Spec.Admin.Name = "" }), "spec.admin.name"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			err := k8s.Create(ctx, tc.tenant)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
		})
	}

	t.Run("prefix is immutable", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(k8s.Create(ctx, newTenant("immut", "imm-", "a"))).To(Succeed())
		// A patch, so the controller's own writes (finalizer, status) cannot turn it into a conflict.
		err := k8s.Patch(ctx, getTenant(g, "immut"), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"namespacePrefix":"other-"}}`)))
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("namespacePrefix is immutable"))
		deleteTenant(g, "immut")
	})
	t.Run("a ServiceAccount admin is accepted", func(t *testing.T) {
		g := NewWithT(t)
		tenant := newTenant("sa-admin", "sa-", "a")
		tenant.Spec.Admin = tenancyv1.AdminSubject{Kind: "ServiceAccount", Name: "ci", Namespace: "sa-a"}
		g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
		eventuallyReady(g, "sa-admin")
		g.Eventually(func(g Gomega) {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User:               "system:serviceaccount:sa-a:ci",
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "namespaces", Name: "sa-a"},
			}}
			g.Expect(k8s.Create(ctx, sar)).To(Succeed())
			g.Expect(sar.Status.Allowed).To(BeTrue())
		}, timeout, interval).Should(Succeed())
		deleteTenant(g, "sa-admin")
	})
}

// TestCRDDeletionKeepsNamespaces must stay last in this file: it deletes the
// Tenant CRD (as an uninstall, or a reinstall gone wrong, would) and puts it
// back. A Tenant whose policy is Delete must still not take its namespaces
// with it: the CRD going away is not a user asking for exactly that.
func TestCRDDeletionKeepsNamespaces(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tenant := newTenant("crd", "crd-", "data")
	tenant.Spec.NamespaceDeletionPolicy = tenancyv1.NamespaceDelete
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	eventuallyReady(g, "crd")
	g.Expect(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "crd-data", Name: "precious"}})).To(Succeed())

	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: tenantCRDName}}
	g.Expect(k8s.Delete(ctx, crd)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: tenantCRDName}, &apiextensionsv1.CustomResourceDefinition{}))
	}, 60*time.Second, interval).Should(BeTrue(), "the CRD is gone once the controller let its Tenants go")

	ns := getNamespace(g, "crd-data")
	g.Expect(ns.DeletionTimestamp).To(BeNil())
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "crd-data", Name: "precious"}, &corev1.ConfigMap{})).To(Succeed())

	// Reinstall the CRD; the namespace is no longer anyone's, so nothing touches it.
	_, err := envtest.InstallCRDs(adminCfg, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "tenancy.trellis.dev_tenants.yaml")},
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(getNamespace(g, "crd-data").DeletionTimestamp).To(BeNil())
}

// TestNewObjectsAreInProgressBeforeAnyReconcile: no controller of these
// kinds runs in this suite, so what kstatus reads is the API server's alone.
// status.observedGeneration defaults to 0, below the generation (1): a GitOps
// tool waits for a controller instead of calling a new object Current.
func TestNewObjectsAreInProgressBeforeAnyReconcile(t *testing.T) {
	ctx := context.Background()
	manifests := map[string]string{
		"MarkdownView": `{"apiVersion":"view.trellis.dev/v1","kind":"MarkdownView","metadata":{"name":"fresh","namespace":"default"},"spec":{"markdowns":{"a.md":"# A"}}}`,
		"ObjectStore": `{"apiVersion":"storage.trellis.dev/v1","kind":"ObjectStore","metadata":{"name":"fresh"},` +
			`"spec":{"endpoint":"http://127.0.0.1:1","credentialsSecretRef":{"namespace":"trellis-system","name":"x"}}}`,
		"StorageBucket": `{"apiVersion":"storage.trellis.dev/v1","kind":"StorageBucket","metadata":{"name":"fresh","namespace":"default"},"spec":{"storeRef":{"name":"fresh"}}}`,
	}
	for kind, manifest := range manifests {
		t.Run(kind, func(t *testing.T) {
			g := NewWithT(t)
			res, err := testenv.KStatusOfNew(ctx, k8s, manifest)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Status).To(Equal(kstatus.InProgressStatus), res.Message)
		})
	}
}

// TestEveryWriteIsTrellis: namespaces, RBAC objects, the Tenant's finalizer
// and its status name trellis alone as their field manager.
func TestEveryWriteIsTrellis(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, newTenant("owned", "owned-", "a"))).To(Succeed())
	eventuallyReady(g, "owned")

	for _, obj := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "owned-a"}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "owned-a", Name: adminRoleBindingName}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "trellis:tenant:owned"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "trellis:tenant:owned"}},
	} {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		managers := testenv.FieldManagers(obj)
		if _, isNamespace := obj.(*corev1.Namespace); isNamespace {
			delete(managers, "status") // the API server sets a namespace's phase itself
		}
		g.Expect(managers).To(Equal(map[string][]string{"": {"trellis"}}), "%T %s", obj, obj.GetName())
	}
	tenant := getTenant(g, "owned")
	managers := testenv.FieldManagers(tenant)
	g.Expect(managers["status"]).To(ConsistOf("trellis"))
	// The spec is the test's; the finalizer is Trellis'.
	g.Expect(managers[""]).To(ContainElement("trellis"))
	for _, e := range tenant.ManagedFields {
		if e.Subresource == "" && e.Manager != "trellis" {
			g.Expect(e.FieldsV1.GetRawString()).NotTo(ContainSubstring("finalizers"), "manager %s", e.Manager)
		}
	}
	deleteTenant(g, "owned")
}
