package tenancy

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// TestCopyAttackAnEditorMakesThemselvesAdminOfACopy: a platform operator
// who may not get a source cannot read it through a Tenant another operator
// gave a copy of it, by making themselves admin of the Tenant's namespaces
// (or adding a namespace they are admin of) and leaving the item as it is.
func TestCopyAttackAnEditorMakesThemselvesAdminOfACopy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cpe-src"}})).To(Succeed())
	g.Expect(k8s.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "cpe-src", Name: "token"},
		Data: map[string][]byte{"token": []byte("s3cr3t-cpe")}})).To(Succeed())
	grantCopySource(g, "cpe-src")
	reader := platformOperator(g, "cpe-reader", "cpe-src")
	other := platformOperator(g, "cpe-other")

	tenant := newTenant("cpe", "cpe-", "a")
	tenant.Spec.Copies = []tenancyv1.TenantCopy{copyItem(tenancyv1.CopySecret, "token", "cpe-src", "token")}
	g.Expect(reader.Create(ctx, tenant)).To(Succeed())
	eventuallyReady(g, "cpe")
	g.Eventually(func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: "cpe-a", Name: "token"}, &corev1.Secret{})
	}, timeout, interval).Should(Succeed())

	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "cpe"}, tenant)).To(Succeed())
	tenant.Spec.Admins = append(tenant.Spec.Admins, tenancyv1.Subject{Kind: rbacv1.UserKind, Name: "cpe-other", APIGroup: rbacv1.GroupName})
	err := other.Update(ctx, tenant)
	if err == nil {
		eventuallyReady(g, "cpe")
		emulateBuiltinRoles(g, "cpe-a")
		got := &corev1.Secret{}
		g.Eventually(func() error {
			return clientAs(g, "cpe-other").Get(ctx, client.ObjectKey{Namespace: "cpe-a", Name: "token"}, got)
		}, timeout, interval).Should(Succeed())
		t.Fatalf("cpe-other may not get cpe-src/token, made themselves admin of a namespace holding its copy and read %q", got.Data["token"])
	}
	g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "not a refusal: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("you may not get secrets cpe-src/token yourself"))

	// Nor by adding a namespace of the tenant and being its only admin there:
	// the same spec change, another field.
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "cpe"}, tenant)).To(Succeed())
	tenant.Spec.Namespaces = append(tenant.Spec.Namespaces, "b")
	g.Expect(other.Update(ctx, tenant)).NotTo(Succeed())

	// What cpe-other may still do: change the Tenant's metadata, and drop
	// the copies altogether. The operator who may read the source changes
	// anything.
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "cpe"}, tenant)).To(Succeed())
	g.Expect(mergePatch(other, tenant, `{"metadata":{"labels":{"team":"cpe"}}}`)).To(Succeed())
	g.Expect(mergePatch(reader, tenant, `{"spec":{"viewers":[{"kind":"User","name":"cpe-reader","apiGroup":"rbac.authorization.k8s.io"}]}}`)).To(Succeed())
	g.Expect(mergePatch(other, tenant, `{"spec":{"copies":null}}`)).To(Succeed())
	deleteTenant(g, "cpe")
}

// TestCopyAttackARevokedGrantIsNotReadThrough: once a source namespace's
// owner takes back the trellis-copy-source binding, the manager reads no
// Secret of that namespace any more: an edit of the source reaches no copy,
// and a Tenant that names it later gets nothing. (A watch the API server
// allowed runs on until it times out, 5 to 10 minutes, whatever RBAC says
// since.)
func TestCopyAttackARevokedGrantIsNotReadThrough(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cpg-src"}})).To(Succeed())
	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "cpg-src", Name: "token"},
		Data: map[string][]byte{"token": []byte("before")}}
	g.Expect(k8s.Create(ctx, src)).To(Succeed())
	grantCopySource(g, "cpg-src")
	operator := platformOperator(g, "cpg-operator", "cpg-src")
	tenant := newTenant("cpg", "cpg-", "a")
	tenant.Spec.Copies = []tenancyv1.TenantCopy{copyItem(tenancyv1.CopySecret, "token", "cpg-src", "token")}
	g.Expect(operator.Create(ctx, tenant)).To(Succeed())
	eventuallyReady(g, "cpg")
	copied := func(g Gomega, ns string) string {
		s := &corev1.Secret{}
		err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "token"}, s)
		if apierrors.IsNotFound(err) {
			return ""
		}
		g.Expect(err).NotTo(HaveOccurred())
		return string(s.Data["token"])
	}
	g.Eventually(func(g Gomega) string { return copied(g, "cpg-a") }, timeout, interval).Should(Equal("before"))

	// The owner takes the consent back, and the API server knows it.
	g.Expect(k8s.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "cpg-src", Name: "trellis-copy-source"}})).To(Succeed())
	g.Eventually(func(g Gomega) bool {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:" + testenv.ManagerNamespace + ":" + testenv.ManagerServiceAccount,
			Groups:             []string{"system:serviceaccounts", "system:serviceaccounts:" + testenv.ManagerNamespace, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "list", Resource: "secrets", Namespace: "cpg-src"},
		}}
		g.Expect(k8s.Create(ctx, sar)).To(Succeed())
		return sar.Status.Allowed
	}, timeout, interval).Should(BeFalse())

	t.Run("a Tenant naming the source afterwards gets no copy", func(t *testing.T) {
		g := NewWithT(t)
		late := newTenant("cpg-late", "cpg-late-", "a")
		late.Spec.Copies = []tenancyv1.TenantCopy{copyItem(tenancyv1.CopySecret, "token", "cpg-src", "token")}
		g.Expect(operator.Create(ctx, late)).To(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(getTenant(g, "cpg-late").Status.Copies).To(HaveLen(1))
		}, timeout, interval).Should(Succeed())
		g.Expect(copied(g, "cpg-late-a")).To(BeEmpty(), "read from a namespace whose owner took the binding back")
		g.Expect(getTenant(g, "cpg-late").Status.Copies).To(ConsistOf(HaveField("State", tenancyv1.CopySourceNotGranted)))
		deleteTenant(g, "cpg-late")
	})

	t.Run("an edit of the source reaches no copy", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(src), src)).To(Succeed())
		src.Data = map[string][]byte{"token": []byte("after")}
		g.Expect(k8s.Update(ctx, src)).To(Succeed())
		g.Consistently(func(g Gomega) string { return copied(g, "cpg-a") }, 3*time.Second, interval).
			Should(Equal("before"), "read from a namespace whose owner took the binding back")
		g.Eventually(func(g Gomega) {
			g.Expect(getTenant(g, "cpg").Status.Copies).To(ConsistOf(HaveField("State", tenancyv1.CopySourceNotGranted)))
		}, timeout, interval).Should(Succeed())
	})
	deleteTenant(g, "cpg")
}

// TestCopyAttackARecreatedSourceNamespaceFeedsNoCopy: a source is the
// object in the namespace the editor was checked against, not whatever
// someone puts under its name later. Once the source's namespace is gone,
// whoever may create namespaces makes one of that name with a ConfigMap of
// their own (a CA bundle every namespace of the tenant trusts): it must not
// reach the copies, which keep what they hold, and the Tenant says
// SourceReplaced, until a change of the spec by an editor who may get the
// new source. Identity is a UID, not a name.
func TestCopyAttackARecreatedSourceNamespaceFeedsNoCopy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cpn-shared"}})).To(Succeed())
	bundle := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "cpn-shared", Name: "ca-bundle"},
		Data: map[string]string{"ca.crt": "the platform's CA"}}
	g.Expect(k8s.Create(ctx, bundle)).To(Succeed())
	operator := platformOperator(g, "cpn-operator", "cpn-shared")
	tenant := newTenant("cpn", "cpn-", "a")
	tenant.Spec.Copies = []tenancyv1.TenantCopy{copyItem(tenancyv1.CopyConfigMap, "ca-bundle", "cpn-shared", "ca-bundle")}
	g.Expect(operator.Create(ctx, tenant)).To(Succeed())
	eventuallyReady(g, "cpn")
	expectConfigMapCopy(g, "cpn-a", "ca-bundle", bundle.Data)

	// The shared namespace goes (envtest has no namespace controller: its
	// contents are deleted, then the namespace finalized, by hand).
	g.Expect(k8s.Delete(ctx, bundle)).To(Succeed())
	g.Expect(k8s.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "cpn-shared", Name: "cpn-operator-read"}})).To(Succeed())
	g.Expect(k8s.Delete(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "cpn-shared", Name: "cpn-operator-read"}})).To(Succeed())
	g.Expect(k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cpn-shared"}})).To(Succeed())
	g.Eventually(func() error {
		ns := &corev1.Namespace{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: "cpn-shared"}, ns); err != nil {
			return err
		}
		ns.Spec.Finalizers = nil
		return k8s.SubResource("finalize").Update(ctx, ns)
	}, timeout, interval).Should(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: "cpn-shared"}, &corev1.Namespace{}))
	}, timeout, interval).Should(BeTrue())

	// mallory may create namespaces, and write ConfigMaps in those she makes
	// (as a cluster's self-service would let her).
	g.Expect(k8s.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "cpn-namespace-creator"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"create"}}}})).To(Succeed())
	g.Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "cpn-namespace-creator"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cpn-namespace-creator"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "cpn-mallory"}}})).To(Succeed())
	mallory := clientAs(g, "cpn-mallory")
	g.Expect(mallory.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "cpn-shared"}})).To(Succeed())
	g.Expect(k8s.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: "cpn-shared", Name: "creator"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}}}})).To(Succeed())
	g.Expect(k8s.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "cpn-shared", Name: "creator"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "creator"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "cpn-mallory"}}})).To(Succeed())
	g.Eventually(func() error {
		return mallory.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "cpn-shared", Name: "ca-bundle"},
			Data: map[string]string{"ca.crt": "mallory's CA"}})
	}, timeout, interval).Should(Succeed())

	g.Consistently(func(g Gomega) map[string]string {
		got := &corev1.ConfigMap{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "cpn-a", Name: "ca-bundle"}, got)).To(Succeed())
		return got.Data
	}, 5*time.Second, interval).Should(Equal(bundle.Data), "a namespace made again under the source's name fed the copies")
	g.Eventually(func(g Gomega) {
		tenant := getTenant(g, "cpn")
		g.Expect(tenant.Status.ObservedGeneration).To(Equal(tenant.Generation))
		g.Expect(tenant.Status.Copies).To(ConsistOf(And(
			HaveField("State", tenancyv1.CopySourceReplaced),
			HaveField("Message", ContainSubstring("namespace cpn-shared was deleted and made again")))))
		stalled := conditions.Get(tenant.Status.Conditions, conditions.Stalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(ReasonCopySourceUnavailable))
	}, timeout, interval).Should(Succeed())
	expectConfigMapCopy(g, "cpn-a", "ca-bundle", bundle.Data)

	// A platform operator who may get the new source changes the spec: that
	// is their word for the new namespace, and its ConfigMap is copied.
	approver := platformOperator(g, "cpn-approver", "cpn-shared")
	g.Expect(mergePatch(approver, getTenant(g, "cpn"),
		`{"spec":{"viewers":[{"kind":"User","name":"cpn-approver","apiGroup":"rbac.authorization.k8s.io"}]}}`)).To(Succeed())
	expectConfigMapCopy(g, "cpn-a", "ca-bundle", map[string]string{"ca.crt": "mallory's CA"})
	eventuallyReady(g, "cpn")
	g.Expect(getTenant(g, "cpn").Status.Copies).To(ConsistOf(HaveField("State", tenancyv1.CopyReady)))
	deleteTenant(g, "cpn")
}

// TestCopyAttackSourceNamespaceObjectsDoNotGrowTheManager: whoever may
// create ConfigMaps in a source namespace (here a tenant admin, whose own
// namespace a Tenant copies a ConfigMap from) cannot grow the manager's
// memory with objects that are no source: it keeps what it watches of a
// source namespace to the sources.
func TestCopyAttackSourceNamespaceObjectsDoNotGrowTheManager(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tenant := newTenant("cpm", "cpm-", "a", "b")
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	eventuallyReady(g, "cpm")
	g.Expect(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "cpm-a", Name: "settings"},
		Data: map[string]string{"a": "b"}})).To(Succeed())
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "cpm"}, tenant)).To(Succeed())
	tenant.Spec.Copies = []tenancyv1.TenantCopy{copyItem(tenancyv1.CopyConfigMap, "settings", "cpm-a", "settings")}
	g.Expect(k8s.Update(ctx, tenant)).To(Succeed())
	eventuallyReady(g, "cpm")
	expectConfigMapCopy(g, "cpm-b", "settings", map[string]string{"a": "b"})

	emulateBuiltinRoles(g, "cpm-a")
	admin := clientAs(g, "mallory", "cpm-admins")
	const n = 200
	for i := range n {
		g.Eventually(func() error {
			return admin.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "cpm-a", Name: fmt.Sprintf("junk-%03d", i)}})
		}, timeout, interval).Should(Succeed())
	}
	held := func() int {
		reconciler.sources.mu.Lock()
		defer reconciler.sources.mu.Unlock()
		total := 0
		for k, sw := range reconciler.sources.watches {
			if k.namespace == "cpm-a" {
				total += len(sw.informer.GetStore().List())
			}
		}
		return total
	}
	// Let the watch see them all, then count.
	g.Eventually(func() error {
		return k8s.Get(ctx, client.ObjectKey{Namespace: "cpm-a", Name: fmt.Sprintf("junk-%03d", n-1)}, &corev1.ConfigMap{})
	}, timeout, interval).Should(Succeed())
	time.Sleep(time.Second)
	g.Expect(held()).To(BeNumerically("<=", len(tenant.Spec.Copies)), "objects of the source namespace the manager holds")
	deleteTenant(g, "cpm")
}
