// Package store reconciles ObjectStores: S3-compatible stores outside the
// cluster, checked every minute (or on a back-off while down) with their
// credentials, and kept while StorageBuckets or BucketAccesses use them.
// storage.Controller registers it beside the StorageBucket and
// BucketAccess controllers.
package store

import (
	"bytes"
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
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/finalizer"
	"github.com/trellis-dev/trellis/internal/controller/operate"
	"github.com/trellis-dev/trellis/internal/controller/outcome"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/controller/status"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/controller/storage/sweep"
	"github.com/trellis-dev/trellis/internal/jitter"
)

// storeController names the controller: the controller label of
// controller-runtime's metrics and trellis_reconcile_conflicts_total.
const storeController = "objectstore"

// Reasons of an ObjectStore's conditions besides those of s3.Classify.
const (
	ReasonReachable = "Reachable"
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
	client   client.Client
	recorder recorder.EventRecorder
	status   *status.Patcher[*storagev1.ObjectStore, storagev1.ObjectStoreStatus]
	stores   *stores.Clients
	// storeEvents carries requests for an immediate check from bucket checks
	// that found the store not answering.
	storeEvents <-chan event.TypedGenericEvent[*storagev1.ObjectStore]
	// trustChanges tells the BucketAccess controller of a new CA bundle.
	trustChanges stores.TrustChanges
	now          func() time.Time
	// sweeps: the sweep.Sweeper runs, so each store's sweep series start at 0.
	sweeps bool
}

// New is the ObjectStore reconciler. clients are the stores' clients the
// storage kinds share; storeEvents carries the requests of StorageBucket and
// BucketAccess checks (and of the sweep) that found a store not answering;
// trustChanges is told of a store whose check passed with a new CA bundle;
// sweeps says whether the sweep runs.
func New(c client.Client, rec recorder.EventRecorder, clients *stores.Clients,
	storeEvents <-chan event.TypedGenericEvent[*storagev1.ObjectStore], trustChanges stores.TrustChanges, sweeps bool) *ObjectStoreReconciler {
	return &ObjectStoreReconciler{
		client: c, recorder: rec, stores: clients, storeEvents: storeEvents, trustChanges: trustChanges, now: time.Now, sweeps: sweeps,
		status: status.NewPatcher(c, rec, func(s *storagev1.ObjectStore) *storagev1.ObjectStoreStatus { return &s.Status }, storeStatusEvents...),
	}
}

// Status is the reconciler's status patcher, which follows the cache
// (status.Patcher.FollowCache).
func (r *ObjectStoreReconciler) Status() *status.Patcher[*storagev1.ObjectStore, storagev1.ObjectStoreStatus] {
	return r.status
}

// +kubebuilder:rbac:groups=storage.trellis.dev,resources=objectstores,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=storage.trellis.dev,resources=objectstores/status,verbs=get;patch
// +kubebuilder:rbac:groups=storage.trellis.dev,resources=objectstores/finalizers,verbs=update
// Store credentials are read with the get on Secrets the BucketAccess
// controller holds (bucketaccess_controller.go); stores.Clients still refuses
// any namespace but the manager's own.

// SetupWithManager watches ObjectStores (spec changes and the start of a
// deletion), the StorageBuckets that use them and the BucketAccesses with
// accounts in them (for in-use protection), and requests from bucket and
// access checks that found a store not answering.
func (r *ObjectStoreReconciler) SetupWithManager(mgr ctrl.Manager, opts setup.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(storeController).
		For(&storagev1.ObjectStore{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, operate.ReconcileRequested))).
		Watches(&storagev1.StorageBucket{}, handler.EnqueueRequestsFromMapFunc(r.whileDeleting(storeOfBucket)), builder.WithPredicates(bucketCreatedOrGone)).
		Watches(&storagev1.BucketAccess{}, handler.EnqueueRequestsFromMapFunc(r.whileDeleting(storeOfAccess)), builder.WithPredicates(stores.AccessGone)).
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

// storeObservation is what one reconcile of an ObjectStore saw.
type storeObservation struct {
	stores.Observed
	// found is where the store stands: what its check found, why no check
	// was sent (a selector that cannot be used), or why its deletion waits.
	// nil when the reconcile looked at nothing.
	found *conditions.Summary
}

// Reconcile checks one store and records the result for its buckets.
func (r *ObjectStoreReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return r.reconcile(ctx, req).Result(storeController)
}

// reconcile is the shape every kind shares (docs/architecture.md, "One
// reconcile"): the read, the deletion or the finalizer, the check, then one
// deferred status write computed from what it observed and how it ended.
func (r *ObjectStoreReconciler) reconcile(ctx context.Context, req ctrl.Request) (out outcome.Outcome) {
	store := &storagev1.ObjectStore{}
	found, err := r.status.Get(ctx, req.NamespacedName, store)
	if err != nil {
		return outcome.Of(err) // a read that failed is no deletion
	}
	if !found {
		r.stores.Forget(req.Name)
		forgetStoreMetrics(req.Name)
		return outcome.Outcome{}
	}
	if store.DeletionTimestamp.IsZero() && operate.IsSuspended(store.Spec.Suspend) {
		// Deletion does not come here: deleting is exactly what a user
		// asked for, and the deletion policy runs as always.
		next := *store.Status.DeepCopy()
		next.ObservedGeneration = store.Generation
		operate.Suspend(&next.Conditions, store.Generation)
		_, err := r.status.Patch(ctx, store, next)
		return outcome.Of(err)
	}
	obs := &storeObservation{}
	defer func() {
		out = stores.Finish(ctx, r.status, r.recorder, store, &obs.Observed, out,
			func(o outcome.Outcome) storagev1.ObjectStoreStatus { return computeStoreStatus(store, obs, o) })
	}()
	if !store.DeletionTimestamp.IsZero() {
		return outcome.Of(r.finalize(ctx, store, obs))
	}
	if _, err := finalizer.Ensure(ctx, r.client, store, stores.StoreFinalizer); err != nil {
		return outcome.Of(err)
	}
	return r.check(ctx, store, obs)
}

// check sends the store one request (ListBuckets) with its current
// credentials, unless a selector of its spec cannot be used. A store that
// does not answer is checked again on a back-off.
func (r *ObjectStoreReconciler) check(ctx context.Context, store *storagev1.ObjectStore, obs *storeObservation) outcome.Outcome {
	if r.sweeps {
		sweep.StartSeries(store.Name)
	}
	if err := stores.ValidateSelectors(store); err != nil {
		// Nothing a store check could change: no request is sent.
		obs.found = &conditions.Summary{Progress: conditions.Blocked, Reason: ReasonInvalidSelector,
			Message: fmt.Sprintf("%v; no namespace may use the store until it is fixed", err)}
		return outcome.Outcome{}
	}
	trusted, kept := r.stores.KeptCABundle(store.Name)
	c, checkErr := r.stores.Refresh(ctx, store)
	if checkErr == nil {
		checkErr = c.Ping(ctx)
	}
	stores.Up.WithLabelValues(store.Name).Set(boolGauge(checkErr == nil))
	if checkErr == nil {
		if now, _ := r.stores.KeptCABundle(store.Name); kept && !bytes.Equal(now, trusted) {
			// A rotated CA: the store may stay Ready, and its BucketAccess
			// Secrets must not wait for their own check to carry it.
			r.trustChanges.Tell(ctx, store)
		}
		obs.found = &conditions.Summary{Progress: conditions.Done, Reason: ReasonReachable, Message: "the store answers and accepts the credentials"}
		return outcome.RequeueAfter(setup.Jitter(storeCheckInterval))
	}
	reason, msg := stores.ClassifyError(checkErr)
	obs.found = &conditions.Summary{Progress: conditions.Working, Reason: string(reason), Message: msg}
	if stores.NeedsPerson(reason) {
		obs.found.Progress = conditions.Blocked
	}
	log.FromContext(ctx).Info("object store check failed", "reason", reason)
	// storeRetry reads the status before this reconcile writes it: Ready's
	// transition time is the same, unless Ready turns False only now, and
	// then the back-off starts at its base either way.
	return outcome.RequeueAfter(storeRetry(store, r.now()))
}

// computeStoreStatus derives the status from the observation and the
// outcome. It is pure, so "write only on change" is a plain comparison.
func computeStoreStatus(store *storagev1.ObjectStore, obs *storeObservation, out outcome.Outcome) storagev1.ObjectStoreStatus {
	st := *store.Status.DeepCopy()
	summary := stores.Summary(out, obs.found)
	if summary == nil {
		return st
	}
	st.ObservedGeneration = store.Generation
	st.LastHandledReconcileAt = operate.RequestedAt(store)
	operate.Resume(&st.Conditions)
	conditions.Summarize(&st.Conditions, store.Generation, *summary)
	return st
}

// finalize lets a store go only when no StorageBucket uses it any more, and
// no BucketAccess still has an account in it to revoke.
func (r *ObjectStoreReconciler) finalize(ctx context.Context, store *storagev1.ObjectStore, obs *storeObservation) error {
	list := &storagev1.StorageBucketList{}
	if err := r.client.List(ctx, list, client.MatchingFields{stores.BucketStoreIndex: store.Name}); err != nil {
		return err
	}
	accesses := &storagev1.BucketAccessList{}
	if err := r.client.List(ctx, accesses, client.MatchingFields{stores.AccessStoreIndex: store.Name}); err != nil {
		return err
	}
	var msg string
	switch {
	case len(list.Items) > 0:
		msg = fmt.Sprintf("deletion waits: %d StorageBuckets still use this store (e.g. %s/%s)", len(list.Items), list.Items[0].Namespace, list.Items[0].Name)
	case len(accesses.Items) > 0:
		msg = fmt.Sprintf("deletion waits: %d BucketAccesses still have accounts in this store to revoke (e.g. %s/%s)", len(accesses.Items), accesses.Items[0].Namespace, accesses.Items[0].Name)
	}
	if msg != "" {
		// Each of them going is an event (whileDeleting).
		obs.found = &conditions.Summary{Progress: conditions.Blocked, Reason: stores.ReasonInUse, Message: msg}
		return nil
	}
	if err := finalizer.Remove(ctx, r.client, store, stores.StoreFinalizer); err != nil {
		return err
	}
	obs.Released = true
	r.stores.Forget(store.Name)
	return nil
}

// forgetStoreMetrics drops the series of a deleted ObjectStore.
func forgetStoreMetrics(store string) {
	stores.ForgetMetrics(store)
	sweep.ForgetMetrics(store)
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// Back-off of the store-level check while a store is down.
const (
	storeBackoffBase = 5 * time.Second
	storeBackoffMax  = 5 * time.Minute
)

// storeRetry is how long a store that is down waits for its next check: as
// long as it has been down so far (so the waits double), between 5 s and
// 5 min, ±10%. It is derived from the Ready condition's transition time, so a
// new leader continues the same back-off.
func storeRetry(store *storagev1.ObjectStore, now time.Time) time.Duration {
	down := time.Duration(0)
	if c := conditions.Get(store.Status.Conditions, conditions.Ready); c != nil && c.Status == metav1.ConditionFalse {
		down = now.Sub(c.LastTransitionTime.Time)
	}
	return jitter.Duration(min(max(down, storeBackoffBase), storeBackoffMax), 0.1)
}
