package tenancy

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// TestReinstallIsANoOp deletes the Tenant CRD (as an uninstall, or an
// upgrade by reinstall, does) and installs it again. Nothing may be removed
// when the CRD goes away, whatever the deletion policy; the same Tenant
// applied again finds its namespaces, bindings and guardrails where they
// were, and takes them back by rewriting one annotation per namespace: no
// object is created, deleted or re-created.
//
// Deleting the CRD deletes every Tenant of the API server, and a test
// creating Tenants meanwhile would fail: so the test runs on an API server
// and manager of its own, set up as the package's, and may run in any order.
func TestReinstallIsANoOp(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	var writes testenv.WriteCounter
	var own *Reconciler
	suite := newSuite(&writes, &own, true)
	g.Expect(suite.Start(ctx)).To(Succeed())
	t.Cleanup(func() { g.Expect(suite.Stop()).To(Succeed()) })
	c := suite.Client

	spec := func() *tenancyv1.Tenant {
		t := newGuardedTenant("crd", "crd-", "data", "web")
		t.Spec.NamespaceDeletionPolicy = tenancyv1.NamespaceDelete // even so
		t.Spec.Viewers = []tenancyv1.Subject{subjectGroup("auditors")}
		return t
	}
	g.Expect(c.Create(ctx, spec())).To(Succeed())
	before := eventuallyReadyOn(g, c, "crd")
	g.Expect(c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "crd-data", Name: "precious"}})).To(Succeed())

	kept := []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "trellis:tenant:crd"}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "trellis:tenant:crd"}},
	}
	for _, ns := range []string{"crd-data", "crd-web"} {
		kept = append(kept,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: adminRoleBindingName}},
			&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: viewerRoleBindingName}},
			&corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: quotaName}},
			&corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: limitRangeName}},
			&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: networkPolicyName}},
		)
	}
	uids := map[string]types.UID{}
	for _, obj := range kept {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		uids[key(obj)] = obj.GetUID()
	}
	expectAllKept := func(g Gomega) {
		for _, obj := range kept {
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed(), key(obj))
			g.Expect(obj.GetUID()).To(Equal(uids[key(obj)]), "%s was re-created", key(obj))
			g.Expect(obj.GetDeletionTimestamp()).To(BeNil(), key(obj))
			g.Expect(obj.GetLabels()).To(HaveKeyWithValue(TenantLabel, "crd"), key(obj))
		}
		g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "crd-data", Name: "precious"}, &corev1.ConfigMap{})).To(Succeed())
	}
	uidOf := func(g Gomega, ns string) string {
		live := &corev1.Namespace{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: ns}, live)).To(Succeed())
		return live.Annotations[TenantUIDAnnotation]
	}

	// Uninstall: the CRD goes, and with it the Tenant.
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: tenantCRDName}}
	g.Expect(c.Delete(ctx, crd)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: tenantCRDName}, &apiextensionsv1.CustomResourceDefinition{}))
	}, 60*time.Second, interval).Should(BeTrue(), "the CRD is gone once the controller let its Tenants go")
	expectAllKept(g)
	g.Expect(uidOf(g, "crd-data")).To(Equal(string(before.UID)))
	// The team keeps its rights while Trellis is away.
	g.Expect(canIOn(g, c, "crd-admins", "get", "namespaces", "", "", "crd-web")).To(BeTrue())

	// Reinstall, and apply the same Tenant again.
	_, err := envtest.InstallCRDs(suite.Config, envtest.CRDInstallOptions{
		Paths: []string{filepath.Join(testenv.RepoRoot(), "config", "crd", "bases", "tenancy.trellis.dev_tenants.yaml")},
	})
	g.Expect(err).NotTo(HaveOccurred())
	waitForQuietOf(g, &writes)
	writes.Reset()
	g.Eventually(func() error { return c.Create(ctx, spec()) }, 60*time.Second, interval).Should(Succeed())
	after := eventuallyReadyOn(g, c, "crd")
	g.Expect(after.UID).NotTo(Equal(before.UID))
	waitForQuietOf(g, &writes)

	expectAllKept(g)
	for _, ns := range []string{"crd-data", "crd-web"} {
		g.Expect(uidOf(g, ns)).To(Equal(string(after.UID)))
	}
	_, paths := writes.Writes()
	var mine []string
	for _, p := range paths {
		if !strings.Contains(p, "/events") {
			mine = append(mine, shortWrite(p))
		}
	}
	g.Expect(mine).To(ConsistOf(
		"PATCH /api/v1/namespaces/crd-data", "PATCH /api/v1/namespaces/crd-web", // the UID annotation
		"PATCH tenants/crd/status",
	), "all writes: %v", paths)
	g.Eventually(func(g Gomega) {
		g.Expect(tenantEventReasonsOn(g, c, "crd")).To(ContainElement("NamespaceReclaimed"))
	}, timeout, interval).Should(Succeed())
}

func key(obj client.Object) string {
	return typeName(obj) + " " + client.ObjectKeyFromObject(obj).String()
}

func typeName(obj client.Object) string {
	switch obj.(type) {
	case *corev1.Namespace:
		return "Namespace"
	case *rbacv1.RoleBinding:
		return "RoleBinding"
	case *rbacv1.ClusterRole:
		return "ClusterRole"
	case *rbacv1.ClusterRoleBinding:
		return "ClusterRoleBinding"
	case *corev1.ResourceQuota:
		return "ResourceQuota"
	case *corev1.LimitRange:
		return "LimitRange"
	case *networkingv1.NetworkPolicy:
		return "NetworkPolicy"
	}
	return "?"
}

// TestRequestsGoingWithTheirCRDTakeNoNamespace deletes the
// NamespaceRequest CRD alone (as an uninstall does, before the Tenants go):
// its requests go with it, and nobody asked for their namespaces to go,
// whatever the policy (Delete here). While the CRD is away, the Tenant keeps
// them. On an API server of its own, as TestReinstallIsANoOp.
func TestRequestsGoingWithTheirCRDTakeNoNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	var writes testenv.WriteCounter
	var own *Reconciler
	suite := newSuite(&writes, &own, true)
	g.Expect(suite.Start(ctx)).To(Succeed())
	t.Cleanup(func() { g.Expect(suite.Stop()).To(Succeed()) })
	c := suite.Client

	tenant := newTenant("rc", "rc-", "home")
	tenant.Spec.NamespaceDeletionPolicy = tenancyv1.NamespaceDelete
	tenant.Spec.SelfService = tenancyv1.SelfService{MaxNamespaces: 2}
	g.Expect(c.Create(ctx, tenant)).To(Succeed())
	eventuallyReadyOn(g, c, "rc")
	g.Expect(c.Create(ctx, newRequest("rc-home", "extra"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		live := eventuallyReadyOn(g, c, "rc")
		g.Expect(live.Status.Namespaces).To(ContainElement(HaveField("RequestedBy", "rc-home/extra")))
	}, timeout, interval).Should(Succeed())

	g.Expect(c.Delete(ctx, &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: requestCRDName}})).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: requestCRDName}, &apiextensionsv1.CustomResourceDefinition{}))
	}, 60*time.Second, interval).Should(BeTrue())
	// A change of the Tenant makes it look again, with no request left.
	live := &tenancyv1.Tenant{}
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "rc"}, live)).To(Succeed())
	live.Spec.Viewers = []tenancyv1.Subject{subjectGroup("rc-viewers")}
	g.Expect(c.Update(ctx, live)).To(Succeed())
	after := eventuallyReadyOn(g, c, "rc")
	g.Expect(after.Status.Namespaces).To(ContainElement(HaveField("RequestedBy", "rc-home/extra")))
	g.Consistently(func(g Gomega) {
		ns := &corev1.Namespace{}
		g.Expect(c.Get(ctx, client.ObjectKey{Name: "rc-extra"}, ns)).To(Succeed())
		g.Expect(ns.DeletionTimestamp).To(BeNil(), "a namespace went with its request's CRD")
	}, 5*time.Second, interval).Should(Succeed())
}
