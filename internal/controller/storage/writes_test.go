package storage

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// TestEveryWriteIsTrellis: whatever the storage controllers write (the
// finalizers, the three statuses, a BucketAccess's Secret) is written as the
// field manager "trellis", so `kubectl get --show-managed-fields` tells a
// person which fields are Trellis' and Server-Side Apply conflicts name it.
func TestEveryWriteIsTrellis(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	store := ensureStore(g)
	ns := newNamespace(t)
	g.Expect(k8s.Create(ctx, newBucket(ns, "data", store))).To(Succeed())
	eventuallyReason(g, ns, "data", ReasonHealthy)
	g.Expect(k8s.Create(ctx, newAccess(ns, "app", "data", "app-s3", storagev1.AccessReadWrite))).To(Succeed())
	eventuallyAccessReason(g, ns, "app", ReasonGranted)

	for _, obj := range []client.Object{
		&storagev1.ObjectStore{}, &storagev1.StorageBucket{}, &storagev1.BucketAccess{},
	} {
		key := client.ObjectKey{Namespace: ns, Name: "data"}
		switch obj.(type) {
		case *storagev1.ObjectStore:
			key = client.ObjectKey{Name: store}
		case *storagev1.BucketAccess:
			key.Name = "app"
		}
		g.Expect(k8s.Get(ctx, key, obj)).To(Succeed())
		managers := testenv.FieldManagers(obj)
		g.Expect(managers["status"]).To(ConsistOf("trellis"), "%T status", obj)
		// The object is the creator's; the finalizer is Trellis'.
		g.Expect(managers[""]).To(ContainElement("trellis"), "%T finalizer", obj)
	}
	g.Expect(testenv.FieldManagers(secretOf(g, ns, "app-s3"))[""]).To(ConsistOf("trellis"))
}
