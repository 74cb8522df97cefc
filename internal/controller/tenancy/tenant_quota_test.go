package tenancy

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/outcome"
)

// envtest runs no quota controller: quotaSync writes what it would, the
// quota's status.hard from its spec and the usage given.
func quotaSync(g Gomega, ns string, usedPods int64) {
	ctx := context.Background()
	g.Eventually(func(g Gomega) {
		q := &corev1.ResourceQuota{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: quotaName}, q)).To(Succeed())
		q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: corev1.ResourceList{"pods": *resource.NewQuantity(usedPods, resource.DecimalSI)}}
		g.Expect(k8s.Status().Update(ctx, q)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}

// eventuallyPods waits until each namespace's quota spec.hard allows the pods given.
func eventuallyPods(g Gomega, want map[string]int64) {
	g.Eventually(func(g Gomega) {
		for ns, n := range want {
			q := &corev1.ResourceQuota{}
			g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: quotaName}, q)).To(Succeed())
			got := q.Spec.Hard["pods"]
			g.Expect(got.Value()).To(Equal(n), "%s: %v", ns, q.Spec.Hard)
		}
	}, timeout, interval).Should(Succeed())
}

// failingReader fails every read: a plan that needs no live read must not
// make one.
type failingReader struct{ client.Reader }

func (failingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return errors.New("live read")
}

// TestTenantQuota walks quota.tenant through its life: the first shares
// (admins bound only once the quota is counted), a usage change (the other
// namespaces lowered at once, the raise only once they are synced), an
// unchanged tenant (no writes, no live reads), and usage over a lowered
// limit (held at usage, reported).
func TestTenantQuota(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tenant := newTenant("tq", "tq-", "a", "b", "c")
	tenant.Spec.Quota = tenancyv1.TenantQuota{Tenant: tenancyv1.TenantWideQuota{Hard: corev1.ResourceList{"pods": resource.MustParse("6")}}}
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())

	// The first shares, out of the whole limit; nobody is bound before the
	// quota controller has counted the quota.
	eventuallyPods(g, map[string]int64{"tq-a": 2, "tq-b": 2, "tq-c": 2})
	g.Eventually(func(g Gomega) {
		got := getTenant(g, "tq")
		ready := meta.FindStatusCondition(got.Status.Conditions, conditions.Ready)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Reason).To(Equal(ReasonQuotaPending))
	}, timeout, interval).Should(Succeed())
	err := k8s.Get(ctx, client.ObjectKey{Namespace: "tq-a", Name: adminRoleBindingName}, &rbacv1.RoleBinding{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no admin before the quota enforces: %v", err)
	for _, ns := range []string{"tq-a", "tq-b", "tq-c"} {
		quotaSync(g, ns, 0)
	}
	got := eventuallyReady(g, "tq")
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "tq-a", Name: adminRoleBindingName}, &rbacv1.RoleBinding{})).To(Succeed())
	g.Expect(got.Status.Quota.Hard).To(HaveKeyWithValue(corev1.ResourceName("pods"), resource.MustParse("6")))
	g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, ConditionQuotaWithinLimit)).To(BeTrue())

	// Unchanged: no write, and no live read.
	waitForQuiet(g)
	mgrWrites.Reset()
	for range 3 {
		_, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: "tq"}})
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(writesFor("tq")).To(BeEmpty())
	cacheOnly := &Reconciler{client: reconciler.client, apiReader: failingReader{}}
	s := cacheOnly.newScope(getTenant(g, "tq"))
	g.Expect(cacheOnly.planTenantQuota(ctx, s, []string{"tq-a", "tq-b", "tq-c"})).To(Succeed())
	g.Expect(s.quota.live).To(BeFalse())

	// tq-a uses its 2: the remainder 4 is split 2, 1, 1. b and c are
	// lowered at once; a is raised only once that is synced.
	quotaSync(g, "tq-a", 2)
	eventuallyPods(g, map[string]int64{"tq-a": 2, "tq-b": 1, "tq-c": 1})
	g.Consistently(func(g Gomega) { eventuallyPods(g, map[string]int64{"tq-a": 2}) }, "1s", interval).Should(Succeed())
	quotaSync(g, "tq-b", 0)
	quotaSync(g, "tq-c", 0)
	eventuallyPods(g, map[string]int64{"tq-a": 4, "tq-b": 1, "tq-c": 1})

	// The limit lowered under the usage: everyone held at usage, reported.
	quotaSync(g, "tq-a", 4)
	quotaSync(g, "tq-b", 1)
	g.Eventually(func(g Gomega) {
		got := getTenant(g, "tq")
		got.Spec.Quota.Tenant.Hard["pods"] = resource.MustParse("3")
		g.Expect(k8s.Update(ctx, got)).To(Succeed())
	}, timeout, interval).Should(Succeed())
	eventuallyPods(g, map[string]int64{"tq-a": 4, "tq-b": 1, "tq-c": 0})
	g.Eventually(func(g Gomega) {
		got := getTenant(g, "tq")
		c := meta.FindStatusCondition(got.Status.Conditions, ConditionQuotaWithinLimit)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(ReasonUsageOverLimit))
		g.Expect(c.Message).To(ContainSubstring("pods 5 of 3"))
		g.Expect(got.Status.Quota.Used).To(HaveKeyWithValue(corev1.ResourceName("pods"), resource.MustParse("5")))
	}, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) []string { return tenantEventReasons(g, "tq") }, timeout, interval).Should(ContainElement(ReasonUsageOverLimit))
	deleteTenant(g, "tq")
}

// TestReleasedQuotasStayCounted: a team that fills a requested namespace
// and deletes its request (Retain: the namespace stays, its quota too, and
// credentials the team made there still reach it) gets none of that share
// back for the namespaces it still holds; doing it twice reaches no more
// than the limit either.
func TestReleasedQuotasStayCounted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tenant := newTenant("qe", "qe-", "a")
	tenant.Spec.SelfService = tenancyv1.SelfService{MaxNamespaces: 1}
	tenant.Spec.Quota = tenancyv1.TenantQuota{Tenant: tenancyv1.TenantWideQuota{Hard: corev1.ResourceList{"pods": resource.MustParse("4")}}}
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	eventuallyPods(g, map[string]int64{"qe-a": 4})
	quotaSync(g, "qe-a", 0)
	eventuallyReady(g, "qe")

	fillAndRelease := func(name string, aShare, share int64) {
		t.Helper()
		g.Expect(k8s.Create(ctx, newRequest("qe-a", name))).To(Succeed())
		eventuallyPods(g, map[string]int64{"qe-a": aShare})
		quotaSync(g, "qe-a", 0)
		eventuallyPods(g, map[string]int64{"qe-" + name: share})
		quotaSync(g, "qe-"+name, share) // the team fills it
		requestReason(g, "qe-a", name, ReasonRequestGranted)
		g.Expect(k8s.Delete(ctx, newRequest("qe-a", name))).To(Succeed()) // Retain: released
		g.Eventually(func(g Gomega) {
			g.Expect(getNamespace(g, "qe-"+name).Labels).To(HaveKeyWithValue(ReleasedFromLabel, "qe"))
		}, timeout, interval).Should(Succeed())
	}
	fillAndRelease("x", 2, 2)
	// qe-x keeps its quota of 2, all used: qe-a may have the other 2, not 4.
	g.Consistently(func(g Gomega) {
		q := &corev1.ResourceQuota{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "qe-a", Name: quotaName}, q)).To(Succeed())
		g.Expect(q.Spec.Hard.Pods().Value()).To(BeNumerically("<=", 2), "the released share came back")
	}, 3*time.Second, interval).Should(Succeed())
	fillAndRelease("y", 1, 1)

	var reachable int64
	for _, ns := range []string{"qe-a", "qe-x", "qe-y"} {
		q := &corev1.ResourceQuota{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: quotaName}, q)).To(Succeed())
		reachable += max(q.Spec.Hard.Pods().Value(), q.Status.Hard.Pods().Value(), q.Status.Used.Pods().Value())
	}
	g.Expect(reachable).To(BeNumerically("<=", 4), "pods the team can reach over its namespaces, held and released")
}

// forgedQuota puts, in namespace ns, a quota labelled as Tenant tenant's
// (trellis-tenant-quota, managed-by trellis), counted as using all of its
// pods.
func forgedQuota(g Gomega, ns, tenant string, pods int64) {
	ctx := context.Background()
	q := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: quotaName, Labels: map[string]string{
			TenantLabel: tenant, "app.kubernetes.io/managed-by": "trellis", "app.kubernetes.io/part-of": "trellis",
		}},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"pods": *resource.NewQuantity(pods, resource.DecimalSI)}},
	}
	g.Expect(k8s.Create(ctx, q)).To(Succeed())
	quotaSync(g, ns, pods)
}

// TestForgedQuotasDoNotShrinkTheBudget: quotas labelled as the tenant's
// outside its namespaces count only where the namespace says the Tenant
// object left them there. One in a namespace that was never the tenant's
// (labels anyone who may write quotas there can put on), and one an earlier
// Tenant of the same name left in a namespace it released, take nothing
// from the tenant's budget.
func TestForgedQuotasDoNotShrinkTheBudget(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fq-elsewhere"}})).To(Succeed())
	forgedQuota(g, "fq-elsewhere", "fq", 100)
	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "fq-earlier",
		Labels:      map[string]string{ReleasedFromLabel: "fq"},
		Annotations: map[string]string{ReleasedFromUIDAnnotation: "uid-of-an-earlier-fq"},
	}})).To(Succeed())
	forgedQuota(g, "fq-earlier", "fq", 3)

	tenant := newTenant("fq", "fq-", "a")
	tenant.Spec.Quota = tenancyv1.TenantQuota{Tenant: tenancyv1.TenantWideQuota{Hard: corev1.ResourceList{"pods": resource.MustParse("4")}}}
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	eventuallyPods(g, map[string]int64{"fq-a": 4})
	quotaSync(g, "fq-a", 0)
	eventuallyReady(g, "fq")
	g.Consistently(func(g Gomega) { eventuallyPods(g, map[string]int64{"fq-a": 4}) }, "2s", interval).Should(Succeed())
	deleteTenant(g, "fq")
}

// TestAnUnrecordedReleaseIsAClusterAdminsToSettle: a namespace labelled
// released by a Tenant of this name, without the UID of the Tenant that
// released it (released before Trellis recorded it, or labelled by hand),
// holds a quota labelled as the tenant's. A name is not the Tenant: the
// quota is not counted, and the Tenant is Stalled, ReleaseUnrecorded,
// naming the namespace and the command that settles it. Once a cluster
// admin records the release with the Tenant's UID, the quota counts.
func TestAnUnrecordedReleaseIsAClusterAdminsToSettle(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "uq-old",
		Labels: map[string]string{ReleasedFromLabel: "uq"},
	}})).To(Succeed())
	forgedQuota(g, "uq-old", "uq", 3)

	tenant := newTenant("uq", "uq-", "a")
	tenant.Spec.Quota = tenancyv1.TenantQuota{Tenant: tenancyv1.TenantWideQuota{Hard: corev1.ResourceList{"pods": resource.MustParse("4")}}}
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	eventuallyPods(g, map[string]int64{"uq-a": 4})
	quotaSync(g, "uq-a", 0)
	g.Eventually(func(g Gomega) {
		got := getTenant(g, "uq")
		stalled := meta.FindStatusCondition(got.Status.Conditions, conditions.Stalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(stalled.Reason).To(Equal(ReasonReleaseUnrecorded))
		g.Expect(stalled.Message).To(ContainSubstring("namespace uq-old is labelled tenancy.trellis.dev/released-from=uq without tenancy.trellis.dev/released-from-uid"))
		g.Expect(stalled.Message).To(ContainSubstring("kubectl annotate namespace <namespace> tenancy.trellis.dev/released-from-uid=" + string(got.UID)))
	}, timeout, interval).Should(Succeed())

	// A cluster admin records that this Tenant released it: it counts.
	uid := getTenant(g, "uq").UID
	ns := getNamespace(g, "uq-old")
	ns.Annotations = map[string]string{ReleasedFromUIDAnnotation: string(uid)}
	g.Expect(k8s.Update(ctx, ns)).To(Succeed())
	// A namespace outside the cache sends no event: the blocked Tenant's
	// retry (every ~2 minutes) finds it. The test runs that retry now (again
	// if it loses a race with the manager's own reconcile).
	g.Eventually(func() error {
		_, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: "uq"}})
		return err
	}, timeout, interval).Should(Succeed())
	eventuallyPods(g, map[string]int64{"uq-a": 1})
	eventuallyReady(g, "uq")
	deleteTenant(g, "uq")
}

// TestQuotaFrozenWhileANamespaceIsDeleted: a team fills a namespace and has
// it deleted (namespaceDeletionPolicy Delete). The namespace controller
// deletes its quota in the same sweep as everything else, while what a
// finalizer holds (a volume claim) stays: until the namespace is gone, no
// other namespace's quota goes up, and the status says why. Once it is
// gone, the budget comes back. (envtest runs no namespace controller: the
// namespace stays Terminating, and the test deletes its quota, then
// finalizes it, as that controller would.)
func TestQuotaFrozenWhileANamespaceIsDeleted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tenant := newTenant("qd", "qd-", "a", "b")
	tenant.Spec.NamespaceDeletionPolicy = tenancyv1.NamespaceDelete
	tenant.Spec.Quota = tenancyv1.TenantQuota{Tenant: tenancyv1.TenantWideQuota{Hard: corev1.ResourceList{"pods": resource.MustParse("6")}}}
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	eventuallyPods(g, map[string]int64{"qd-a": 3, "qd-b": 3})
	quotaSync(g, "qd-a", 0)
	quotaSync(g, "qd-b", 0)
	eventuallyReady(g, "qd")

	// qd-b uses 3: the remainder 3 goes 2 to a, 1 to b.
	quotaSync(g, "qd-b", 3)
	eventuallyPods(g, map[string]int64{"qd-a": 2})
	quotaSync(g, "qd-a", 0)
	eventuallyPods(g, map[string]int64{"qd-b": 4})
	quotaSync(g, "qd-b", 3)

	// qd-b leaves the spec and is deleted; its quota goes in the sweep.
	g.Eventually(func() error {
		got := getTenant(g, "qd")
		got.Spec.Namespaces = []string{"a"}
		return k8s.Update(ctx, got)
	}, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getNamespace(g, "qd-b").DeletionTimestamp).NotTo(BeNil())
	}, timeout, interval).Should(Succeed())
	// Deleted with its marks: the Tenant still finds it, and its end maps to the Tenant.
	g.Expect(getNamespace(g, "qd-b").Labels).To(HaveKeyWithValue(TenantLabel, "qd"))
	g.Expect(k8s.Delete(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "qd-b", Name: quotaName}})).To(Succeed())

	g.Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(getTenant(g, "qd").Status.Conditions, ConditionQuotaWithinLimit)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(ReasonQuotaFrozen))
		g.Expect(c.Message).To(ContainSubstring("namespace qd-b of this tenant is being deleted"))
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		q := &corev1.ResourceQuota{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "qd-a", Name: quotaName}, q)).To(Succeed())
		g.Expect(q.Spec.Hard.Pods().Value()).To(BeNumerically("<=", 2), "raised while qd-b still holds its 3")
	}, 3*time.Second, interval).Should(Succeed())

	// qd-b is gone, and all it held with it: a gets the whole limit.
	g.Eventually(func() error {
		ns := &corev1.Namespace{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: "qd-b"}, ns); err != nil {
			return err
		}
		ns.Spec.Finalizers = nil
		return k8s.SubResource("finalize").Update(ctx, ns)
	}, timeout, interval).Should(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: "qd-b"}, &corev1.Namespace{}))
	}, timeout, interval).Should(BeTrue())
	eventuallyPods(g, map[string]int64{"qd-a": 6})
	g.Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(getTenant(g, "qd").Status.Conditions, ConditionQuotaWithinLimit)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(ReasonWithinLimit))
	}, timeout, interval).Should(Succeed())
	deleteTenant(g, "qd")
}

// TestQuotaConditionSaysWhyFrozen: while a namespace of the tenant is being
// deleted, QuotaWithinLimit names it; usage over the limit stays False.
func TestQuotaConditionSaysWhyFrozen(t *testing.T) {
	tenant := unitTenant("acme", "uid-acme", "acme-", "a")
	tenant.Spec.Quota.Tenant.Hard = corev1.ResourceList{"pods": resource.MustParse("4")}
	for name, tc := range map[string]struct {
		going  []string
		over   bool
		status metav1.ConditionStatus
		reason string
		says   string
	}{
		"one going":       {going: []string{"acme-b"}, status: metav1.ConditionTrue, reason: ReasonQuotaFrozen, says: "namespace acme-b of this tenant is being deleted"},
		"two going":       {going: []string{"acme-b", "acme-c"}, status: metav1.ConditionTrue, reason: ReasonQuotaFrozen, says: "namespaces acme-b, acme-c of this tenant are being deleted"},
		"going, and over": {going: []string{"acme-b"}, over: true, status: metav1.ConditionFalse, reason: ReasonUsageOverLimit, says: "acme-b"},
		"none":            {status: metav1.ConditionTrue, reason: ReasonWithinLimit, says: "no more than"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			p := &quotaPlan{seen: map[string]*corev1.ResourceQuota{}, going: tc.going}
			if tc.over {
				p.out.Over = []corev1.ResourceName{"pods"}
				p.out.Used = corev1.ResourceList{"pods": resource.MustParse("5")}
			}
			obs := newObservation([]string{"acme-a"}, nil)
			p.report(obs, tenant, nil)
			st := computeStatus(tenant, obs, outcome.Outcome{})
			c := meta.FindStatusCondition(st.Conditions, ConditionQuotaWithinLimit)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(tc.status))
			g.Expect(c.Reason).To(Equal(tc.reason))
			g.Expect(c.Message).To(ContainSubstring(tc.says))
		})
	}
}
