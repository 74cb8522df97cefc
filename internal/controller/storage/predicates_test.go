package storage

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
)

func TestStoreReadyChanged(t *testing.T) {
	withReady := func(status metav1.ConditionStatus, reason string) *storagev1.ObjectStore {
		s := testStore("a")
		if status != "" {
			s.Status.Conditions = []metav1.Condition{{Type: conditions.Ready, Status: status, Reason: reason}}
		}
		return s
	}
	cases := map[string]struct {
		old, updated *storagev1.ObjectStore
		want         bool
	}{
		"first check, up":         {old: withReady("", ""), updated: withReady(metav1.ConditionTrue, "Reachable"), want: true},
		"first check, down":       {old: withReady("", ""), updated: withReady(metav1.ConditionFalse, "StoreUnreachable"), want: true},
		"went down":               {old: withReady(metav1.ConditionTrue, "Reachable"), updated: withReady(metav1.ConditionFalse, "StoreUnreachable"), want: true},
		"came back":               {old: withReady(metav1.ConditionFalse, "StoreUnreachable"), updated: withReady(metav1.ConditionTrue, "Reachable"), want: true},
		"down for another reason": {old: withReady(metav1.ConditionFalse, "StoreUnreachable"), updated: withReady(metav1.ConditionFalse, "AccessDenied"), want: false},
		"still up":                {old: withReady(metav1.ConditionTrue, "Reachable"), updated: withReady(metav1.ConditionTrue, "Reachable"), want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(storeReadyChanged.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.updated})).To(Equal(tc.want))
		})
	}
	t.Run("a new store passes", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(storeReadyChanged.Create(event.CreateEvent{Object: testStore("a")})).To(BeTrue())
	})
}

func TestBucketCreatedOrGone(t *testing.T) {
	g := NewWithT(t)
	b := statusBucket(1, storagev1.StorageBucketStatus{})
	g.Expect(bucketCreatedOrGone.Create(event.CreateEvent{Object: b})).To(BeTrue())
	g.Expect(bucketCreatedOrGone.Delete(event.DeleteEvent{Object: b})).To(BeTrue())
	g.Expect(bucketCreatedOrGone.Update(event.UpdateEvent{ObjectOld: b, ObjectNew: b})).To(BeFalse(), "a store only counts its buckets")
	g.Expect(storeOfBucket(context.Background(), b)).To(Equal([]reconcile.Request{{NamespacedName: client.ObjectKey{Name: "store-a"}}}))
}

func TestStoreReadyChangedFollowsTheStoreController(t *testing.T) {
	g := NewWithT(t)
	old := testStore("a")
	old.Status.ObservedGeneration = 1
	old.Status.Conditions = []metav1.Condition{{Type: conditions.Ready, Status: metav1.ConditionTrue, Reason: ReasonReachable}}
	edited := old.DeepCopy()
	edited.Generation = 2
	g.Expect(storeReadyChanged.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: edited})).To(BeFalse(),
		"a spec change alone: its users would only find the store not checked yet")
	seen := edited.DeepCopy()
	seen.Status.ObservedGeneration = 2
	g.Expect(storeReadyChanged.Update(event.UpdateEvent{ObjectOld: edited, ObjectNew: seen})).To(BeTrue(),
		"the store controller took in the new spec (a selector may have changed)")
}

func TestBucketStateChanged(t *testing.T) {
	base := statusBucket(1, storagev1.StorageBucketStatus{ObservedGeneration: 1, BucketName: testBucket, Claim: storagev1.BucketClaimed,
		Conditions: []metav1.Condition{{Type: conditions.Ready, Status: metav1.ConditionTrue, Reason: ReasonHealthy}}})
	now := metav1.Now()
	cases := map[string]struct {
		change func(*storagev1.StorageBucket)
		want   bool
	}{
		"nothing":               {change: func(*storagev1.StorageBucket) {}},
		"a health check's news": {change: func(b *storagev1.StorageBucket) { b.Status.Conditions[0].Message = "slow" }},
		"spec interval":         {change: func(b *storagev1.StorageBucket) { b.Generation = 2 }},
		"claim":                 {change: func(b *storagev1.StorageBucket) { b.Status.Claim = storagev1.BucketCreating }, want: true},
		"bucket name":           {change: func(b *storagev1.StorageBucket) { b.Status.BucketName = "other" }, want: true},
		"deletion starts":       {change: func(b *storagev1.StorageBucket) { b.DeletionTimestamp = &now }, want: true},
		"stalled": {change: func(b *storagev1.StorageBucket) {
			b.Status.Conditions = append(b.Status.Conditions, metav1.Condition{Type: conditions.Stalled, Status: metav1.ConditionTrue})
		}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			updated := base.DeepCopy()
			tc.change(updated)
			g.Expect(bucketStateChanged.Update(event.UpdateEvent{ObjectOld: base, ObjectNew: updated})).To(Equal(tc.want))
		})
	}
}

func TestAccessGone(t *testing.T) {
	g := NewWithT(t)
	a := &storagev1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "app"},
		Spec:   storagev1.BucketAccessSpec{BucketRef: storagev1.BucketReference{Name: "assets"}},
		Status: storagev1.BucketAccessStatus{StoreName: "store-a"}}
	g.Expect(accessGone.Delete(event.DeleteEvent{Object: a})).To(BeTrue(), "a bucket or store being deleted may be waiting for it")
	g.Expect(accessGone.Create(event.CreateEvent{Object: a})).To(BeFalse())
	g.Expect(accessGone.Update(event.UpdateEvent{ObjectOld: a, ObjectNew: a})).To(BeFalse())
	g.Expect(bucketOfAccess(context.Background(), a)).To(Equal([]reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: "team-a", Name: "assets"}}}))
	g.Expect(storeOfAccess(context.Background(), a)).To(Equal([]reconcile.Request{{NamespacedName: client.ObjectKey{Name: "store-a"}}}))
	a.Status.StoreName = ""
	g.Expect(storeOfAccess(context.Background(), a)).To(BeEmpty(), "no account made anywhere yet")
}

// TestBucketsWakeTheirStoreOnlyWhileItIsDeleted: a bucket created in a store in
// use costs the store no check; one created or gone while the store is being
// deleted lets the deletion recount.
func TestBucketsWakeTheirStoreOnlyWhileItIsDeleted(t *testing.T) {
	inUse := testStore("store-a")
	deleting := testStore("store-b")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	deleting.Finalizers = []string{StoreFinalizer}
	sch := runtime.NewScheme()
	utilruntime.Must(storagev1.AddToScheme(sch))
	r := &ObjectStoreReconciler{client: fake.NewClientBuilder().WithScheme(sch).WithObjects(inUse, deleting).Build()}
	mapBucket := r.whileDeleting(storeOfBucket)
	ctx := context.Background()
	bucketIn := func(store string) *storagev1.StorageBucket {
		b := statusBucket(1, storagev1.StorageBucketStatus{})
		b.Spec.StoreRef.Name = store
		return b
	}

	g := NewWithT(t)
	g.Expect(mapBucket(ctx, bucketIn("store-a"))).To(BeEmpty(), "a store in use is not checked again for a new bucket")
	g.Expect(mapBucket(ctx, bucketIn("store-b"))).To(Equal([]reconcile.Request{{NamespacedName: client.ObjectKey{Name: "store-b"}}}))
	g.Expect(mapBucket(ctx, bucketIn("no-such-store"))).To(BeEmpty())
}

// TestOthersHearWhenAClaimantLeaves: a StorageBucket that starts or ends its
// deletion re-checks the others that name its bucket in its store, so their
// Conflict message tells what is true now.
func TestOthersHearWhenAClaimantLeaves(t *testing.T) {
	g := NewWithT(t)
	holder := claimedBucket()
	waiting := func(ns, name, store string) *storagev1.StorageBucket {
		return &storagev1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name)},
			Spec: storagev1.StorageBucketSpec{StoreRef: storagev1.StoreReference{Name: store}, BucketName: testBucket}}
	}
	f := newFixture(holder, waiting(otherNS, "wants", rtStore), waiting(otherNS, "elsewhere", "store-b"))
	r := f.bucketReconciler()

	leaving := holder.DeepCopy()
	leaving.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	g.Expect(claimantLeaving.Update(event.UpdateEvent{ObjectOld: holder, ObjectNew: leaving})).To(BeTrue(), "its deletion starts")
	g.Expect(claimantLeaving.Update(event.UpdateEvent{ObjectOld: leaving, ObjectNew: leaving})).To(BeFalse())
	g.Expect(claimantLeaving.Update(event.UpdateEvent{ObjectOld: holder, ObjectNew: holder})).To(BeFalse())
	g.Expect(claimantLeaving.Delete(event.DeleteEvent{Object: leaving})).To(BeTrue(), "it is gone")
	g.Expect(claimantLeaving.Create(event.CreateEvent{Object: holder})).To(BeFalse())
	g.Expect(r.othersWantingBucket(context.Background(), leaving)).To(Equal([]reconcile.Request{
		{NamespacedName: client.ObjectKey{Namespace: otherNS, Name: "wants"}}}), "the others of the same store and bucket, not itself")
}

// TestRefusedPoliciesHearOfNewKeys: a BucketAccess whose keys change
// re-checks the buckets of its namespace whose policy was refused, which may
// have named the key before it was issued.
func TestRefusedPoliciesHearOfNewKeys(t *testing.T) {
	g := NewWithT(t)
	refused := claimedBucket()
	refused.Name = "refused"
	conditions.Summarize(&refused.Status.Conditions, 1, conditions.Summary{Progress: conditions.Blocked, Reason: ReasonPolicyRefused, Message: "no"})
	elsewhere := refused.DeepCopy()
	elsewhere.Namespace = otherNS
	f := newFixture(claimedBucket(), refused, elsewhere)

	before := rtAccessObj()
	after := grantedAccess()
	g.Expect(accessKeysChanged.Update(event.UpdateEvent{ObjectOld: before, ObjectNew: after})).To(BeTrue(), "a key issued")
	g.Expect(accessKeysChanged.Update(event.UpdateEvent{ObjectOld: after, ObjectNew: after})).To(BeFalse())
	retired := after.DeepCopy()
	retired.Status.RetiringKeys = []storagev1.RetiringKey{{AccessKeyID: "old"}}
	g.Expect(accessKeysChanged.Update(event.UpdateEvent{ObjectOld: after, ObjectNew: retired})).To(BeTrue(), "a key retiring")
	g.Expect(accessKeysChanged.Create(event.CreateEvent{Object: after})).To(BeFalse())
	g.Expect(f.bucketReconciler().refusedPoliciesOf(context.Background(), after)).To(Equal([]reconcile.Request{
		{NamespacedName: client.ObjectKey{Namespace: testNS, Name: "refused"}}}))
}
