package store

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/controller/storage/storagetest"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
)

func TestBucketCreatedOrGone(t *testing.T) {
	g := NewWithT(t)
	b := bucketIn("store-a")
	g.Expect(bucketCreatedOrGone.Create(event.CreateEvent{Object: b})).To(BeTrue())
	g.Expect(bucketCreatedOrGone.Delete(event.DeleteEvent{Object: b})).To(BeTrue())
	g.Expect(bucketCreatedOrGone.Update(event.UpdateEvent{ObjectOld: b, ObjectNew: b})).To(BeFalse(), "a store only counts its buckets")
	g.Expect(storeOfBucket(context.Background(), b)).To(Equal([]reconcile.Request{{NamespacedName: client.ObjectKey{Name: "store-a"}}}))
}

// TestStoreOfAccess: a BucketAccess maps to the store its accounts live in.
func TestStoreOfAccess(t *testing.T) {
	g := NewWithT(t)
	a := accessIn("store-a")
	g.Expect(storeOfAccess(context.Background(), a)).To(Equal([]reconcile.Request{{NamespacedName: client.ObjectKey{Name: "store-a"}}}))
	a.Status.StoreName = ""
	g.Expect(storeOfAccess(context.Background(), a)).To(BeEmpty(), "no account made anywhere yet")
}

// TestBucketsWakeTheirStoreOnlyWhileItIsDeleted: a bucket created in a store in
// use costs the store no check; one created or gone while the store is being
// deleted lets the deletion recount.
func TestBucketsWakeTheirStoreOnlyWhileItIsDeleted(t *testing.T) {
	inUse := storagetest.NewStore("store-a")
	deleting := storagetest.NewStore("store-b")
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	deleting.Finalizers = []string{stores.StoreFinalizer}
	sch := runtime.NewScheme()
	utilruntime.Must(storagev1.AddToScheme(sch))
	r := &ObjectStoreReconciler{client: fake.NewClientBuilder().WithScheme(sch).WithObjects(inUse, deleting).Build()}
	mapBucket := r.whileDeleting(storeOfBucket)
	ctx := context.Background()

	g := NewWithT(t)
	g.Expect(mapBucket(ctx, bucketIn("store-a"))).To(BeEmpty(), "a store in use is not checked again for a new bucket")
	g.Expect(mapBucket(ctx, bucketIn("store-b"))).To(Equal([]reconcile.Request{{NamespacedName: client.ObjectKey{Name: "store-b"}}}))
	g.Expect(mapBucket(ctx, bucketIn("no-such-store"))).To(BeEmpty())
}
