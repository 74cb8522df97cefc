package stores

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/event"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
)

// StoreChecks asks the ObjectStore controller to check a store now: a
// bucket or access check found it not answering while its status still
// says Ready (a typed call into the ObjectStore controller, which reads the
// channel as an event source). When the store is back, its Ready condition re-queues what
// waits for it.
type StoreChecks chan<- event.TypedGenericEvent[*storagev1.ObjectStore]

func (c StoreChecks) Request(ctx context.Context, store *storagev1.ObjectStore) {
	select {
	case c <- event.TypedGenericEvent[*storagev1.ObjectStore]{Object: store}:
	case <-ctx.Done():
	}
}
