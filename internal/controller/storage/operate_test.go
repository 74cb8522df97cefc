package storage

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/operate"
	bucketaccess "github.com/trellis-dev/trellis/internal/controller/storage/access"
	storagebucket "github.com/trellis-dev/trellis/internal/controller/storage/bucket"
	"github.com/trellis-dev/trellis/internal/testenv"
)

func mergePatch(g Gomega, obj client.Object, patch string) {
	g.Expect(k8s.Patch(context.Background(), obj, client.RawPatch("application/merge-patch+json", []byte(patch)))).To(Succeed())
}

// eventuallySuspended waits until obj's status says Suspended for its
// generation, and returns what kstatus makes of it.
func eventuallySuspended(g Gomega, obj client.Object, conds func() []metav1.Condition, observed func() int64) kstatus.Status {
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		g.Expect(conditions.IsTrue(conds(), operate.ConditionSuspended)).To(BeTrue(), "%+v", conds())
		g.Expect(observed()).To(Equal(obj.GetGeneration()))
	}, timeout, poll).Should(Succeed())
	res, _, err := testenv.KStatusOnServer(context.Background(), k8s, obj)
	g.Expect(err).NotTo(HaveOccurred())
	return res.Status
}

// TestSuspendedStorageKeepsWhatItHas: a suspended ObjectStore, StorageBucket
// and BucketAccess each write the status that says so and nothing else: no
// request reaches the store for the bucket (its 10s checks stop), a new
// keyVersion is not issued; kstatus reads them Current. Resuming acts at once.
func TestSuspendedStorageKeepsWhatItHas(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, newStore("sus-store", credsSecret))).To(Succeed())
	ns := newNamespace(t)
	g.Expect(k8s.Create(ctx, newBucket(ns, "susb", "sus-store"))).To(Succeed())
	b := eventuallyReason(g, ns, "susb", storagebucket.ReasonHealthy)
	g.Expect(k8s.Create(ctx, newAccess(ns, "susa", "susb", "susa-creds", storagev1.AccessReadWrite))).To(Succeed())
	a := eventuallyAccessReason(g, ns, "susa", bucketaccess.ReasonGranted)
	key := a.Status.AccessKeyID

	var bucketRequests atomic.Int64
	name := b.Status.BucketName
	s3srv.Fail(func(r *http.Request) bool {
		if strings.Contains(r.URL.Path, name) || strings.Contains(r.Host, name) {
			bucketRequests.Add(1)
		}
		return false // a spy, never a fault; it outlives the test, harmlessly
	}, http.StatusInternalServerError, 1)

	store := &storagev1.ObjectStore{}
	store.Name = "sus-store"
	mergePatch(g, store, `{"spec":{"suspend":true}}`)
	mergePatch(g, b, `{"spec":{"suspend":true}}`)
	mergePatch(g, a, `{"spec":{"suspend":true}}`)
	g.Expect(eventuallySuspended(g, store, func() []metav1.Condition { return store.Status.Conditions }, func() int64 { return store.Status.ObservedGeneration })).To(Equal(kstatus.CurrentStatus))
	g.Expect(eventuallySuspended(g, b, func() []metav1.Condition { return b.Status.Conditions }, func() int64 { return b.Status.ObservedGeneration })).To(Equal(kstatus.CurrentStatus))
	g.Expect(eventuallySuspended(g, a, func() []metav1.Condition { return a.Status.Conditions }, func() int64 { return a.Status.ObservedGeneration })).To(Equal(kstatus.CurrentStatus))
	time.Sleep(time.Second)

	mgrWrites.Reset()
	bucketRequests.Store(0)
	mergePatch(g, a, `{"spec":{"keyVersion":2}}`)
	eventuallySuspended(g, a, func() []metav1.Condition { return a.Status.Conditions }, func() int64 { return a.Status.ObservedGeneration })
	time.Sleep(12 * time.Second) // more than the bucket's check interval
	_, paths := mgrWrites.Writes()
	var writes []string
	for _, p := range paths {
		if strings.Contains(p, "sus") && !strings.Contains(p, "/events") {
			writes = append(writes, p)
		}
	}
	g.Expect(writes).To(HaveLen(1), "only the access's status, that it saw the edit: %v", writes)
	g.Expect(writes[0]).To(HaveSuffix("/bucketaccesses/susa/status"))
	g.Expect(bucketRequests.Load()).To(BeZero(), "no check of a suspended bucket")
	g.Expect(getAccess(g, ns, "susa").Status.AccessKeyID).To(Equal(key), "no key issued while suspended")

	mergePatch(g, store, `{"spec":{"suspend":false}}`)
	mergePatch(g, b, `{"spec":{"suspend":false}}`)
	mergePatch(g, a, `{"spec":{"suspend":false}}`)
	g.Eventually(func(g Gomega) {
		got := getAccess(g, ns, "susa")
		g.Expect(got.Status.KeyVersion).To(Equal(int32(2)))
		g.Expect(got.Status.AccessKeyID).NotTo(Equal(key))
		g.Expect(conditions.Get(got.Status.Conditions, operate.ConditionSuspended)).To(BeNil())
		gotB := getBucket(g, ns, "susb")
		g.Expect(conditions.Get(gotB.Status.Conditions, operate.ConditionSuspended)).To(BeNil())
		gotS := &storagev1.ObjectStore{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "sus-store"}, gotS)).To(Succeed())
		g.Expect(conditions.Get(gotS.Status.Conditions, operate.ConditionSuspended)).To(BeNil())
	}, timeout, poll).Should(Succeed())
	g.Expect(bucketRequests.Load()).NotTo(BeZero(), "resumed, the bucket is checked at once")

	// Deleting a suspended bucket runs its deletion policy (Retain): the
	// finalizer is not left hanging.
	mergePatch(g, a, `{"spec":{"suspend":true}}`)
	mergePatch(g, b, `{"spec":{"suspend":true}}`)
	eventuallySuspended(g, b, func() []metav1.Condition { return b.Status.Conditions }, func() int64 { return b.Status.ObservedGeneration })
	deleteAccess(g, ns, "susa")
	deleteBucket(g, ns, "susb")
	g.Expect(client.IgnoreNotFound(k8s.Delete(ctx, store))).To(Succeed())
}

// TestBucketReconcileRequestIsAnsweredOnce: a healthy bucket checked every
// hour is checked now when reconcile.fluxcd.io/requestedAt changes, and the
// status records the value; the same value again costs nothing.
func TestBucketReconcileRequestIsAnsweredOnce(t *testing.T) {
	g := NewWithT(t)
	store := ensureStore(g)
	ns := newNamespace(t)
	b := newBucket(ns, "rnow", store)
	b.Spec.HealthCheck.IntervalSeconds = 3600
	g.Expect(k8s.Create(context.Background(), b)).To(Succeed())
	eventuallyReason(g, ns, "rnow", storagebucket.ReasonHealthy)
	time.Sleep(time.Second)

	mergePatch(g, b, `{"metadata":{"annotations":{"reconcile.fluxcd.io/requestedAt":"now-1"}}}`)
	g.Eventually(func(g Gomega) {
		g.Expect(getBucket(g, ns, "rnow").Status.LastHandledReconcileAt).To(Equal("now-1"))
	}, timeout, poll).Should(Succeed())
	time.Sleep(time.Second)

	mgrWrites.Reset()
	mergePatch(g, b, `{"metadata":{"labels":{"touched":"yes"}}}`)
	time.Sleep(2 * time.Second)
	_, paths := mgrWrites.Writes()
	for _, p := range paths {
		g.Expect(p).NotTo(ContainSubstring("/namespaces/"+ns+"/"), "an answered request costs nothing again")
	}
	deleteBucket(g, ns, "rnow")
}
