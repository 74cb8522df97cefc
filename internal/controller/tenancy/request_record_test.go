package tenancy

import (
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
)

// TestGrantIsRecordedBeforeTheNamespaceIsMade: the namespace-requests
// policy judges a request's deletion by the namespace its status records.
// Were the record written after the namespace was made, a delete in
// between would get past the policy and give up a namespace its deleter
// has no right in. So the record comes first, on the fake API server of
// TestTenantReconcileExits: the request's status names the namespace before
// the namespace is created, and a request whose record cannot be written
// gets no namespace.
func TestGrantIsRecordedBeforeTheNamespaceIsMade(t *testing.T) {
	selfService := func(t *tenancyv1.Tenant) { t.Spec.SelfService = tenancyv1.SelfService{MaxNamespaces: 2} }
	world := func() *exitFixture {
		tenant := exitTenant(selfService)
		req := &tenancyv1.NamespaceRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "acme-a", Name: "x", UID: "uid-x"}}
		return newExitFixture(tenant, ourNamespace(tenant, "acme-a"), req)
	}

	t.Run("recorded, then made", func(t *testing.T) {
		g := NewWithT(t)
		f := world()
		f.reconcile()
		g.Expect(f.err).NotTo(HaveOccurred())
		recorded := slices.Index(f.writes(), "status NamespaceRequest acme-a/x")
		made := slices.Index(f.writes(), "create Namespace acme-x")
		g.Expect(recorded).To(BeNumerically(">=", 0), "writes %v", f.writes())
		g.Expect(made).To(BeNumerically(">", recorded), "the namespace was made before the request recorded it: writes %v", f.writes())
		req := &tenancyv1.NamespaceRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "acme-a", Name: "x"}}
		g.Expect(f.read(g, req)).To(BeTrue())
		g.Expect(req.Status.GrantedNamespace).To(Equal("acme-x"))
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme-x"}}
		g.Expect(f.read(g, ns)).To(BeTrue())
		g.Expect(ns.Annotations).To(HaveKeyWithValue(RequestedByAnnotation, "acme-a/x"))
		g.Expect(ns.Annotations).To(HaveKeyWithValue(RequestedByUIDAnnotation, "uid-x"))
	})

	t.Run("not recorded, not made", func(t *testing.T) {
		g := NewWithT(t)
		f := world()
		f.FailRequests(map[string]error{"status NamespaceRequest acme-a/x": errExitUnavailable})
		f.reconcile()
		g.Expect(f.err).To(HaveOccurred())
		g.Expect(f.writes()).NotTo(ContainElement("create Namespace acme-x"))
		g.Expect(f.read(g, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme-x"}})).To(BeFalse())
	})
}

// TestARequestRestoredWithItsCRDKeepsItsNamespace: a request made again
// under the name of one whose namespace it asks for is a new request, and
// the namespace, made for the one deleted, is given up (here Delete) as its
// deletion asked. Unless the NamespaceRequest CRD was installed after the
// namespace was made: every request of that time went with the CRD, and
// docs/tenant.md asks for them to be restored (from a backup, Git) before
// the Tenant looks; the restored request, under a new UID, holds its
// namespace again.
func TestARequestRestoredWithItsCRDKeepsItsNamespace(t *testing.T) {
	made := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	world := func(crdInstalled time.Time) *exitFixture {
		tenant := exitTenant(func(t *tenancyv1.Tenant) {
			t.Spec.SelfService = tenancyv1.SelfService{MaxNamespaces: 2}
			t.Spec.NamespaceDeletionPolicy = tenancyv1.NamespaceDelete
		})
		granted := desiredNamespace(tenant, "acme-x", requestMark{key: "acme-a/x", uid: "uid-before"})
		granted.CreationTimestamp = made
		req := &tenancyv1.NamespaceRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "acme-a", Name: "x", UID: "uid-restored"}}
		crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: requestCRDName,
			CreationTimestamp: metav1.NewTime(crdInstalled)}}
		return newExitFixture(tenant, ourNamespace(tenant, "acme-a"), granted, req, crd)
	}
	read := func(g Gomega, f *exitFixture) (*corev1.Namespace, *tenancyv1.NamespaceRequest) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "acme-x"}}
		req := &tenancyv1.NamespaceRequest{ObjectMeta: metav1.ObjectMeta{Namespace: "acme-a", Name: "x"}}
		if !f.read(g, ns) {
			ns = nil
		}
		g.Expect(f.read(g, req)).To(BeTrue())
		return ns, req
	}

	t.Run("the CRD installed since: restored, it holds its namespace", func(t *testing.T) {
		g := NewWithT(t)
		f := world(made.Add(time.Hour))
		f.reconcile()
		g.Expect(f.err).NotTo(HaveOccurred())
		ns, req := read(g, f)
		g.Expect(ns).NotTo(BeNil(), "a restored request's namespace was deleted")
		g.Expect(ns.Annotations).To(HaveKeyWithValue(RequestedByUIDAnnotation, "uid-restored"))
		g.Expect(req.Status.GrantedNamespace).To(Equal("acme-x"))
	})

	t.Run("the CRD installed before: made again, it takes nothing", func(t *testing.T) {
		g := NewWithT(t)
		f := world(made.Add(-time.Hour))
		f.reconcile()
		g.Expect(f.err).NotTo(HaveOccurred())
		g.Expect(f.writes()).To(ContainElement("delete Namespace acme-x"), "the namespace of the deleted request was kept")
		_, req := read(g, f)
		g.Expect(req.Status.GrantedNamespace).To(BeEmpty())
		g.Expect(conditions.Get(req.Status.Conditions, conditions.Ready).Reason).To(Equal(ReasonNameTaken))
	})
}
