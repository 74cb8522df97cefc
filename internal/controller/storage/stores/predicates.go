package stores

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
)

// The watches of one storage kind on another that more than one kind sets.

// StoreReadyChanged passes a store's creation, its first check, changes of
// its Ready status (what buckets waiting on their store wait for), and the
// store controller taking in a new spec (its selectors decide who may use
// it). Not the spec change itself: until the store is checked against it,
// its users would only find it "not checked yet".
var StoreReadyChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*storagev1.ObjectStore)
		n, ok2 := e.ObjectNew.(*storagev1.ObjectStore)
		if !ok1 || !ok2 {
			return true
		}
		return readyStatus(o) != readyStatus(n) || o.Status.ObservedGeneration != n.Status.ObservedGeneration
	},
}

// AccessGone passes the deletion of a BucketAccess: the deletion of its
// StorageBucket, or of its ObjectStore, may be waiting for it.
var AccessGone = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	UpdateFunc:  func(event.UpdateEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

func readyStatus(store *storagev1.ObjectStore) metav1.ConditionStatus {
	if c := conditions.Get(store.Status.Conditions, conditions.Ready); c != nil {
		return c.Status
	}
	return ""
}
