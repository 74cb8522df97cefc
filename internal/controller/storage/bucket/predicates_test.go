package bucket

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/storage/storagetest"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
)

func TestAccessGone(t *testing.T) {
	g := NewWithT(t)
	a := &storagev1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "app"},
		Spec:   storagev1.BucketAccessSpec{BucketRef: storagev1.BucketReference{Name: "assets"}},
		Status: storagev1.BucketAccessStatus{StoreName: "store-a"}}
	g.Expect(stores.AccessGone.Delete(event.DeleteEvent{Object: a})).To(BeTrue(), "a bucket or store being deleted may be waiting for it")
	g.Expect(stores.AccessGone.Create(event.CreateEvent{Object: a})).To(BeFalse())
	g.Expect(stores.AccessGone.Update(event.UpdateEvent{ObjectOld: a, ObjectNew: a})).To(BeFalse())
	g.Expect(bucketOfAccess(context.Background(), a)).To(Equal([]reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: "team-a", Name: "assets"}}}))
}

// TestOthersHearWhenAClaimantLeaves: a StorageBucket that starts or ends its
// deletion re-checks the others that name its bucket in its store, so their
// Conflict message tells what is true now.
func TestOthersHearWhenAClaimantLeaves(t *testing.T) {
	g := NewWithT(t)
	holder := storagetest.ClaimedBucket()
	waiting := func(ns, name, store string) *storagev1.StorageBucket {
		return &storagev1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name)},
			Spec: storagev1.StorageBucketSpec{StoreRef: storagev1.StoreReference{Name: store}, BucketName: testBucket}}
	}
	f := newFixture(holder, waiting(otherNS, "wants", rtStore), waiting(otherNS, "elsewhere", "store-b"))
	r := f.reconciler()

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
	refused := storagetest.ClaimedBucket()
	refused.Name = "refused"
	conditions.Summarize(&refused.Status.Conditions, 1, conditions.Summary{Progress: conditions.Blocked, Reason: ReasonPolicyRefused, Message: "no"})
	elsewhere := refused.DeepCopy()
	elsewhere.Namespace = otherNS
	f := newFixture(storagetest.ClaimedBucket(), refused, elsewhere)

	before := storagetest.Access()
	after := storagetest.GrantedAccess()
	g.Expect(accessKeysChanged.Update(event.UpdateEvent{ObjectOld: before, ObjectNew: after})).To(BeTrue(), "a key issued")
	g.Expect(accessKeysChanged.Update(event.UpdateEvent{ObjectOld: after, ObjectNew: after})).To(BeFalse())
	retired := after.DeepCopy()
	retired.Status.RetiringKeys = []storagev1.RetiringKey{{AccessKeyID: "old"}}
	g.Expect(accessKeysChanged.Update(event.UpdateEvent{ObjectOld: after, ObjectNew: retired})).To(BeTrue(), "a key retiring")
	g.Expect(accessKeysChanged.Create(event.CreateEvent{Object: after})).To(BeFalse())
	g.Expect(f.reconciler().refusedPoliciesOf(context.Background(), after)).To(Equal([]reconcile.Request{
		{NamespacedName: client.ObjectKey{Namespace: testNS, Name: "refused"}}}))
}
