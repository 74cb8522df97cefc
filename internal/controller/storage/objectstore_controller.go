package storage

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/finalizer"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/controller/status"
)

// StoreFinalizer keeps an ObjectStore while StorageBuckets still use it.
const StoreFinalizer = "storage.trellis.dev/in-use"

// Reasons of an ObjectStore's conditions besides those of s3.Classify.
const (
	ReasonReachable = "Reachable"
	// ReasonInUse: a deletion waits for what uses the object (StorageBuckets
	// of a store, BucketAccesses of a bucket or of a store).
	ReasonInUse = "InUse"
	// ReasonInvalidSelector: a namespace selector of the store cannot be used.
	ReasonInvalidSelector = "InvalidSelector"
)

// storeCheckInterval is how often a healthy store is checked (and its
// credentials Secret re-read, which is how rotated keys are picked up).
const storeCheckInterval = time.Minute

// storeStatusEvents: every change of Ready is worth a line in the event stream; a
// store going down affects every bucket in it.
var storeStatusEvents = []status.EventRule{
	{Condition: conditions.Ready, Status: metav1.ConditionTrue, Type: corev1.EventTypeNormal},
	{Condition: conditions.Ready, Status: metav1.ConditionFalse, Type: corev1.EventTypeWarning},
}

// ObjectStoreReconciler checks stores and records the result in their status,
// where the StorageBucket controller reads it.
type ObjectStoreReconciler struct {
	client client.Client
	status *status.Patcher[*storagev1.ObjectStore, storagev1.ObjectStoreStatus]
	stores *Stores
	// storeEvents carries requests for an immediate check from bucket checks
	// that found the store not answering.
	storeEvents <-chan event.TypedGenericEvent[*storagev1.ObjectStore]
	now         func() time.Time
}

// +kubebuilder:rbac:groups=storage.trellis.dev,resources=objectstores,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=storage.trellis.dev,resources=objectstores/status,verbs=get;patch
// +kubebuilder:rbac:groups=storage.trellis.dev,resources=objectstores/finalizers,verbs=update
// Store credentials are read with the get on Secrets the BucketAccess
// controller holds (bucketaccess_controller.go); Stores.config still refuses
// any namespace but the manager's own.

// SetupWithManager watches ObjectStores (spec changes and the start of a
// deletion), the StorageBuckets that use them and the BucketAccesses with
// accounts in them (for in-use protection), and requests from bucket and
// access checks that found a store not answering.
func (r *ObjectStoreReconciler) SetupWithManager(mgr ctrl.Manager, opts setup.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("objectstore").
		For(&storagev1.ObjectStore{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&storagev1.StorageBucket{}, handler.EnqueueRequestsFromMapFunc(r.whileDeleting(storeOfBucket)), builder.WithPredicates(bucketCreatedOrGone)).
		Watches(&storagev1.BucketAccess{}, handler.EnqueueRequestsFromMapFunc(r.whileDeleting(storeOfAccess)), builder.WithPredicates(accessGone)).
		WatchesRawSource(source.Channel(r.storeEvents, &handler.TypedEnqueueRequestForObject[*storagev1.ObjectStore]{})).
		WithOptions(opts.ControllerOptions()).
		Complete(r)
}

// whileDeleting passes on what storeOf maps to only while that store is being
// deleted: a store counts its users for nothing but letting its deletion go
// on, and checking a store in use again for every bucket created in it would
// be one more request to the store per bucket (a thousand for a thousand
// buckets, against a store that may be down). When the cache cannot say, the
// store is enqueued: one check too many is cheaper than a deletion that waits
// for nothing.
func (r *ObjectStoreReconciler) whileDeleting(storeOf handler.MapFunc) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		reqs := storeOf(ctx, o)
		kept := reqs[:0]
		for _, req := range reqs {
			store := &storagev1.ObjectStore{}
			err := r.client.Get(ctx, req.NamespacedName, store)
			switch {
			case apierrors.IsNotFound(err):
			case err != nil, !store.DeletionTimestamp.IsZero():
				kept = append(kept, req)
			}
		}
		return kept
	}
}

func storeOfBucket(_ context.Context, o client.Object) []reconcile.Request {
	b, ok := o.(*storagev1.StorageBucket)
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: b.Spec.StoreRef.Name}}}
}

// storeOfAccess maps a BucketAccess to the store its accounts live in.
func storeOfAccess(_ context.Context, o client.Object) []reconcile.Request {
	a, ok := o.(*storagev1.BucketAccess)
	if !ok || a.Status.StoreName == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: a.Status.StoreName}}}
}

// bucketCreatedOrGone: a store only cares how many buckets use it (and only
// while it is being deleted: whileDeleting).
var bucketCreatedOrGone = predicate.Funcs{
	UpdateFunc: func(event.UpdateEvent) bool { return false },
}

// Reconcile checks one store and records the result for its buckets.
func (r *ObjectStoreReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	store := &storagev1.ObjectStore{}
	found, err := r.status.Get(ctx, req.NamespacedName, store)
	if err != nil || !found {
		if !found {
			r.stores.Forget(req.Name)
			forgetStoreMetrics(req.Name)
		}
		return ctrl.Result{}, err
	}
	if !store.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, store)
	}
	if _, err := finalizer.Ensure(ctx, r.client, store, StoreFinalizer); err != nil {
		return ctrl.Result{}, err
	}

	next := *store.Status.DeepCopy()
	next.ObservedGeneration = store.Generation
	if err := validateSelectors(store); err != nil {
		// Nothing a store check could change: no request is sent.
		conditions.Summarize(&next.Conditions, store.Generation, conditions.Summary{Progress: conditions.Blocked, Reason: ReasonInvalidSelector,
			Message: fmt.Sprintf("%v; no namespace may use the store until it is fixed", err)})
		_, err := r.status.Patch(ctx, store, next)
		return ctrl.Result{}, err
	}
	c, checkErr := r.stores.Refresh(ctx, store)
	if checkErr == nil {
		checkErr = c.Ping(ctx)
	}
	summary := conditions.Summary{Progress: conditions.Done, Reason: ReasonReachable, Message: "the store answers and accepts the credentials"}
	if checkErr != nil {
		reason, msg := classifyStoreError(checkErr)
		summary = conditions.Summary{Progress: conditions.Working, Reason: string(reason), Message: msg}
		if needsPerson(reason) {
			summary.Progress = conditions.Blocked
		}
		log.FromContext(ctx).Info("object store check failed", "reason", reason)
	}
	conditions.Summarize(&next.Conditions, store.Generation, summary)
	storeUp.WithLabelValues(store.Name).Set(boolGauge(checkErr == nil))
	if _, err := r.status.Patch(ctx, store, next); err != nil {
		return ctrl.Result{}, err
	}
	if checkErr != nil {
		return ctrl.Result{RequeueAfter: storeRetry(store, r.now())}, nil
	}
	return setup.RequeueAfter(storeCheckInterval), nil
}

// finalize lets a store go only when no StorageBucket uses it any more, and
// no BucketAccess still has an account in it to revoke.
func (r *ObjectStoreReconciler) finalize(ctx context.Context, store *storagev1.ObjectStore) (ctrl.Result, error) {
	list := &storagev1.StorageBucketList{}
	if err := r.client.List(ctx, list, client.MatchingFields{bucketStoreIndex: store.Name}); err != nil {
		return ctrl.Result{}, err
	}
	accesses := &storagev1.BucketAccessList{}
	if err := r.client.List(ctx, accesses, client.MatchingFields{accessStoreIndex: store.Name}); err != nil {
		return ctrl.Result{}, err
	}
	var msg string
	switch {
	case len(list.Items) > 0:
		msg = fmt.Sprintf("deletion waits: %d StorageBuckets still use this store (e.g. %s/%s)", len(list.Items), list.Items[0].Namespace, list.Items[0].Name)
	case len(accesses.Items) > 0:
		msg = fmt.Sprintf("deletion waits: %d BucketAccesses still have accounts in this store to revoke (e.g. %s/%s)", len(accesses.Items), accesses.Items[0].Namespace, accesses.Items[0].Name)
	}
	if msg != "" {
		next := *store.Status.DeepCopy()
		conditions.Summarize(&next.Conditions, store.Generation, conditions.Summary{Progress: conditions.Blocked, Reason: ReasonInUse, Message: msg})
		_, err := r.status.Patch(ctx, store, next)
		return ctrl.Result{}, err
	}
	if err := finalizer.Remove(ctx, r.client, store, StoreFinalizer); err != nil {
		return ctrl.Result{}, err
	}
	r.stores.Forget(store.Name)
	return ctrl.Result{}, nil
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
