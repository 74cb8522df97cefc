package tenancy

import (
	"context"
	"strings"
	"testing"
	"time"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/operate"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// patchTenant sends a merge patch of the Tenant's metadata or spec.
func patchTenant(g Gomega, name, patch string) {
	t := &tenancyv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name}}
	g.Expect(k8s.Patch(context.Background(), t, client.RawPatch("application/merge-patch+json", []byte(patch)))).To(Succeed())
}

// eventuallySuspended waits until the Tenant's status says it is suspended,
// for its generation.
func eventuallySuspended(g Gomega, name string) *tenancyv1.Tenant {
	t := &tenancyv1.Tenant{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Name: name}, t)).To(Succeed())
		g.Expect(conditions.IsTrue(t.Status.Conditions, operate.ConditionSuspended)).To(BeTrue(), "status: %+v", t.Status)
		g.Expect(t.Status.ObservedGeneration).To(Equal(t.Generation))
	}, timeout, interval).Should(Succeed())
	return t
}

// TestSuspendedTenantKeepsWhatItHas: a suspended Tenant says so once and
// then writes nothing: a spec edit is not acted on (only seen, in
// observedGeneration, so kstatus does not wait for it for ever), drift is
// not repaired, and nothing is looked at periodically (every 2s here).
// Resuming acts at once; deleting a suspended Tenant runs its deletion
// policy.
func TestSuspendedTenantKeepsWhatItHas(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, newTenant("sus", "sus-", "a"))).To(Succeed())
	eventuallyReady(g, "sus")

	patchTenant(g, "sus", `{"spec":{"suspend":true}}`)
	got := eventuallySuspended(g, "sus")
	g.Expect(conditions.IsTrue(got.Status.Conditions, conditions.Ready)).To(BeTrue(), "Ready is kept as it was")
	res, _, err := testenv.KStatusOnServer(ctx, k8s, got)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Status).To(Equal(kstatus.CurrentStatus), "kstatus: %s", res.Message)
	waitForQuiet(g)

	mgrWrites.Reset()
	g.Expect(k8s.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "sus-a", Name: adminRoleBindingName}})).To(Succeed())
	patchTenant(g, "sus", `{"spec":{"namespaces":["a","b"]}}`)
	eventuallySuspended(g, "sus")
	time.Sleep(5 * time.Second)
	var writes []string
	for _, p := range writesFor("sus") {
		if !strings.Contains(p, "/events") {
			writes = append(writes, shortWrite(p))
		}
	}
	g.Expect(writes).To(Equal([]string{"PATCH tenants/sus/status"}), "only the status, that it saw the edit and is suspended")
	err = k8s.Get(ctx, client.ObjectKey{Namespace: "sus-a", Name: adminRoleBindingName}, &rbacv1.RoleBinding{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "drift is left while suspended")
	err = k8s.Get(ctx, client.ObjectKey{Name: "sus-b"}, &corev1.Namespace{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "a namespace added while suspended is not made")
	for range 3 {
		res, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: "sus"}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(ctrl.Result{}), "no periodic look while suspended")
	}

	patchTenant(g, "sus", `{"spec":{"suspend":false}}`)
	got = eventuallyReady(g, "sus")
	g.Expect(conditions.Get(got.Status.Conditions, operate.ConditionSuspended)).To(BeNil())
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "sus-a", Name: adminRoleBindingName}, &rbacv1.RoleBinding{})).To(Succeed())
	g.Expect(getNamespace(g, "sus-b").Labels).To(HaveKeyWithValue(TenantLabel, "sus"))

	// Deleting a suspended Tenant is what a user asked for: the policy
	// (Retain) runs, and the namespaces are released, not deleted.
	patchTenant(g, "sus", `{"spec":{"suspend":true}}`)
	eventuallySuspended(g, "sus")
	deleteTenant(g, "sus")
	ns := getNamespace(g, "sus-a")
	g.Expect(ns.DeletionTimestamp).To(BeNil())
	g.Expect(ns.Labels).NotTo(HaveKey(TenantLabel))
}

// TestReconcileRequestIsAnsweredOnce: a changed reconcile.fluxcd.io/requestedAt
// starts a reconcile although the generation did not move, and the status
// records the value; the same value again costs nothing. The Tenant is
// Stalled (a namespace someone else made), which Trellis looks at only
// every 2 minutes: nothing but the annotation starts the reconcile.
func TestReconcileRequestIsAnsweredOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "rnow-a"}})).To(Succeed())
	g.Expect(k8s.Create(ctx, newTenant("rnow", "rnow-", "a"))).To(Succeed())
	g.Eventually(func(g Gomega) {
		tn := getTenant(g, "rnow")
		g.Expect(conditions.IsTrue(tn.Status.Conditions, conditions.Stalled)).To(BeTrue(), "status: %+v", tn.Status)
	}, timeout, interval).Should(Succeed())
	waitForQuiet(g)

	patchTenant(g, "rnow", `{"metadata":{"annotations":{"reconcile.fluxcd.io/requestedAt":"2026-11-28T17:00:00Z"}}}`)
	g.Eventually(func(g Gomega) {
		g.Expect(getTenant(g, "rnow").Status.LastHandledReconcileAt).To(Equal("2026-11-28T17:00:00Z"))
	}, timeout, interval).Should(Succeed())
	waitForQuiet(g)

	mgrWrites.Reset()
	patchTenant(g, "rnow", `{"metadata":{"labels":{"touched":"yes"}}}`)
	for range 3 {
		_, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: "rnow"}})
		g.Expect(err).NotTo(HaveOccurred())
	}
	time.Sleep(time.Second)
	g.Expect(writesFor("rnow")).To(BeEmpty(), "an answered request costs nothing again")
	deleteTenant(g, "rnow")
	g.Expect(k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "rnow-a"}})).To(Succeed())
}

// TestTenantColumns reads Tenants as kubectl does (a server-side Table):
// the Ready reason, and the namespaces the Tenant holds by their full
// names, a requested one included; SUSPENDED with -o wide.
func TestTenantColumns(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, newTenant("cols", "cols-", "a", "b"))).To(Succeed())
	eventuallyReady(g, "cols")
	patchTenant(g, "cols", `{"spec":{"suspend":true}}`)
	eventuallySuspended(g, "cols")

	rows, priority, err := testenv.Table(adminCfg, "/apis/tenancy.trellis.dev/v1/tenants?fieldSelector=metadata.name%3Dcols")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rows).To(HaveLen(1))
	cells := rows[0]
	g.Expect(cells).To(HaveKeyWithValue("Reason", "Ready"))
	g.Expect(cells).To(HaveKeyWithValue("Namespaces", `["cols-a","cols-b"]`))
	g.Expect(cells).To(HaveKeyWithValue("Suspended", true))
	g.Expect(priority).To(HaveKeyWithValue("Suspended", int32(1)), "only with -o wide")
	g.Expect(priority).To(HaveKeyWithValue("Reason", int32(0)))
	deleteTenant(g, "cols")
}
