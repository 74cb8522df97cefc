package stores

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/event"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
)

// StoreChecks asks the ObjectStore controller to check a store now: a
// bucket or access check, or the sweep, found it not answering while its
// status still says Ready. The controller reads the channel as an event
// source. When the store is back, its Ready condition re-queues what waits
// for it.
type StoreChecks chan<- event.TypedGenericEvent[*storagev1.ObjectStore]

// Request queues the store's check, or gives up when ctx ends first.
func (c StoreChecks) Request(ctx context.Context, store *storagev1.ObjectStore) {
	select {
	case c <- event.TypedGenericEvent[*storagev1.ObjectStore]{Object: store}:
	case <-ctx.Done():
	}
}

// TrustChanges tells the BucketAccess controller that a store's clients
// trust another CA bundle since its last check: its BucketAccess Secrets
// carry the bundle (ca.crt), and nothing they watch changes with it (the
// store stays Ready). A nil TrustChanges tells no one.
type TrustChanges chan<- event.TypedGenericEvent[*storagev1.ObjectStore]

// Tell queues the store's BucketAccesses, or gives up when ctx ends first.
func (c TrustChanges) Tell(ctx context.Context, store *storagev1.ObjectStore) {
	if c == nil {
		return
	}
	select {
	case c <- event.TypedGenericEvent[*storagev1.ObjectStore]{Object: store}:
	case <-ctx.Done():
	}
}
