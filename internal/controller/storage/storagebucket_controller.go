package storage

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
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
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/controller/status"
	"github.com/trellis-dev/trellis/internal/s3"
)

// BucketFinalizer holds a StorageBucket until its deletion policy is applied.
const BucketFinalizer = "storage.trellis.dev/bucket"

// defaultInterval is the health-check interval of a bucket that sets none.
const defaultInterval = 60 * time.Second

// bucketStatusEvents: Ready, a person needed, and a store that stopped answering.
// Creating and waiting for a store's first check are routine.
var bucketStatusEvents = []status.EventRule{
	{Condition: conditions.Ready, Status: metav1.ConditionTrue, Type: corev1.EventTypeNormal},
	{Condition: conditions.Stalled, Status: metav1.ConditionTrue, Type: corev1.EventTypeWarning},
	{Condition: conditions.Reconciling, Status: metav1.ConditionTrue, Type: corev1.EventTypeWarning,
		Except: []string{ReasonCreating, ReasonStoreNotReady, ReasonDeleting}},
}

// BucketReconciler reconciles StorageBuckets.
type BucketReconciler struct {
	client   client.Client
	recorder recorder.EventRecorder
	status   *status.Patcher[*storagev1.StorageBucket, storagev1.StorageBucketStatus]
	stores   *Stores
	schedule *Schedule
	// storeEvents asks the ObjectStore controller to check a store a bucket found down.
	storeEvents chan<- event.TypedGenericEvent[*storagev1.ObjectStore]
	// bucketEvents carries requests for an immediate check (the bucket-event receiver).
	bucketEvents <-chan event.TypedGenericEvent[*storagev1.StorageBucket]
}

// +kubebuilder:rbac:groups=storage.trellis.dev,resources=storagebuckets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=storage.trellis.dev,resources=storagebuckets/status,verbs=get;patch
// +kubebuilder:rbac:groups=storage.trellis.dev,resources=storagebuckets/finalizers,verbs=update

// SetupWithManager wires the watches: StorageBuckets (spec changes and the
// start of a deletion), their store's Ready condition (a store that came back
// re-checks its unhealthy buckets), and the bucket-event receiver, an
// external event source. Periodic checks are RequeueAfter results.
func (r *BucketReconciler) SetupWithManager(mgr ctrl.Manager, opts setup.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("storagebucket").
		For(&storagev1.StorageBucket{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&storagev1.ObjectStore{}, handler.EnqueueRequestsFromMapFunc(r.bucketsOfStore), builder.WithPredicates(storeReadyChanged)).
		WatchesRawSource(source.Channel(r.bucketEvents, &handler.TypedEnqueueRequestForObject[*storagev1.StorageBucket]{})).
		WithOptions(opts.ControllerOptions()).
		Complete(r)
}

// storeReadyChanged passes a store's creation, its first check, and changes
// of its Ready status: what buckets waiting on their store wait for.
var storeReadyChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*storagev1.ObjectStore)
		n, ok2 := e.ObjectNew.(*storagev1.ObjectStore)
		if !ok1 || !ok2 {
			return true
		}
		return readyStatus(o) != readyStatus(n)
	},
}

func readyStatus(store *storagev1.ObjectStore) metav1.ConditionStatus {
	if c := conditions.Get(store.Status.Conditions, conditions.Ready); c != nil {
		return c.Status
	}
	return ""
}

func (r *BucketReconciler) bucketsOfStore(ctx context.Context, o client.Object) []reconcile.Request {
	list := &storagev1.StorageBucketList{}
	if err := r.client.List(ctx, list, client.MatchingFields{bucketStoreIndex: o.GetName()}); err != nil {
		// A map function cannot return an error; the buckets' own schedule
		// still checks them.
		log.FromContext(ctx).Error(err, "listing the StorageBuckets of a store whose state changed", "store", o.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

func interval(b *storagev1.StorageBucket) time.Duration {
	if b.Spec.HealthCheck != nil && b.Spec.HealthCheck.IntervalSeconds >= 10 {
		return time.Duration(b.Spec.HealthCheck.IntervalSeconds) * time.Second
	}
	return defaultInterval
}

// bucketName is the bucket's name in the store.
func bucketName(b *storagev1.StorageBucket) string {
	if b.Spec.BucketName != "" {
		return b.Spec.BucketName
	}
	return s3.DeriveBucketName(b.Namespace, b.Name)
}

// Reconcile ensures one bucket exists and is ours, and checks its health
// when a check is due or the bucket is not settled.
func (r *BucketReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	b := &storagev1.StorageBucket{}
	found, err := r.status.Get(ctx, req.NamespacedName, b)
	if err != nil || !found {
		if !found {
			r.schedule.Forget(req.NamespacedName)
			forgetBucketMetrics(req.NamespacedName)
		}
		return ctrl.Result{}, err
	}
	if !b.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, b)
	}
	if _, err := finalizer.Ensure(ctx, r.client, b, BucketFinalizer); err != nil {
		return ctrl.Result{}, err
	}

	key, uid, every := req.NamespacedName, string(b.UID), interval(b)
	settled := b.Status.ObservedGeneration == b.Generation && b.Status.BucketName != "" &&
		conditions.IsTrue(b.Status.Conditions, conditions.Ready)
	if wait := r.schedule.Wait(key, uid, every); settled && wait > 0 {
		// A healthy bucket seen by a start-up listing, a resync or a store
		// event: its check is not due, and one now would bunch checks
		// together. (Buckets that are not Ready are looked at on any event:
		// a store that changed state is what they wait for.)
		return ctrl.Result{RequeueAfter: wait}, nil
	}

	start := time.Now()
	res, err := r.check(ctx, b)
	if err != nil {
		return ctrl.Result{}, err
	}
	r.schedule.Checked(key, uid, every)
	recordCheck(key, res.summary.Reason, res.summary.Progress == conditions.Done, time.Since(start))
	if res.event != nil {
		typ := corev1.EventTypeNormal
		if res.event.warning {
			typ = corev1.EventTypeWarning
		}
		r.recorder.Eventf(b, nil, typ, res.event.reason, "Check", res.event.format, bucketName(b))
	}
	if _, err := r.status.Patch(ctx, b, computeBucketStatus(b, res)); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: r.schedule.Wait(key, uid, every)}, nil
}

// check finds out whether the bucket exists, is ours and is healthy. Store
// errors are states, not reconcile errors: the schedule and the store-level
// check decide when to try again. Errors of the API server are returned.
func (r *BucketReconciler) check(ctx context.Context, b *storagev1.StorageBucket) (checkResult, error) {
	name := bucketName(b)
	other, err := r.otherClaimant(ctx, b, name)
	if err != nil {
		return checkResult{}, err
	}
	if other != "" {
		return blocked(ReasonConflict, fmt.Sprintf("bucket %s is already claimed by StorageBucket %s", name, other)), nil
	}
	store, res, err := r.usableStore(ctx, b.Spec.StoreRef.Name)
	if store == nil || err != nil {
		return res, err
	}
	c, err := r.stores.Client(ctx, store)
	if err != nil {
		reason, msg := classifyStoreError(err)
		return blocked(string(reason), fmt.Sprintf("ObjectStore %s: %s", store.Name, msg)), nil
	}
	claim := b.Status.Claim
	if b.Status.BucketName != name {
		claim = ""
	}
	check := bucketCheck{
		s3: c, store: store.Name, bucket: name, uid: string(b.UID), claim: claim,
		adopt: ptr.Deref(b.Spec.AdoptExisting, false),
		probe: b.Spec.HealthCheck != nil && ptr.Deref(b.Spec.HealthCheck.Probe, false),
		recordIntent: func(ctx context.Context) error {
			return r.recordCreating(ctx, b, name, store.Name)
		},
	}
	res, err = check.run(ctx)
	if err != nil {
		return checkResult{}, err
	}
	if res.storeDown {
		r.storeMayBeDown(ctx, store)
	}
	return res, nil
}

// usableStore reads the bucket's ObjectStore and its state from the cache. It
// returns no store, and the bucket's state, when the store is missing or not
// Ready: one store-level check stands for all of a store's buckets, so they
// send it nothing while it is down.
func (r *BucketReconciler) usableStore(ctx context.Context, name string) (*storagev1.ObjectStore, checkResult, error) {
	store := &storagev1.ObjectStore{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: name}, store); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, blocked(ReasonStoreNotFound, fmt.Sprintf("ObjectStore %s does not exist", name)), nil
		}
		return nil, checkResult{}, fmt.Errorf("reading ObjectStore %s: %w", name, err)
	}
	ready := conditions.Get(store.Status.Conditions, conditions.Ready)
	switch {
	case ready == nil || store.Status.ObservedGeneration != store.Generation:
		return nil, checkResult{summary: conditions.Summary{Progress: conditions.Working, Reason: ReasonStoreNotReady,
			Message: fmt.Sprintf("ObjectStore %s has not been checked yet", name)}}, nil
	case ready.Status != metav1.ConditionTrue:
		progress := conditions.Working
		if conditions.IsTrue(store.Status.Conditions, conditions.Stalled) {
			progress = conditions.Blocked
		}
		return nil, checkResult{summary: conditions.Summary{Progress: progress, Reason: ready.Reason,
			Message: fmt.Sprintf("ObjectStore %s: %s", name, ready.Message)}}, nil
	}
	return store, checkResult{}, nil
}

// storeMayBeDown asks the ObjectStore controller to check a store now: a
// bucket check found it not answering while its status still says Ready.
func (r *BucketReconciler) storeMayBeDown(ctx context.Context, store *storagev1.ObjectStore) {
	select {
	case r.storeEvents <- event.TypedGenericEvent[*storagev1.ObjectStore]{Object: store}:
	case <-ctx.Done():
	}
}

// recordCreating writes, before the bucket is created, that this
// StorageBucket is creating it (status claim Creating).
func (r *BucketReconciler) recordCreating(ctx context.Context, b *storagev1.StorageBucket, bucket, store string) error {
	next := *b.Status.DeepCopy()
	next.ObservedGeneration = b.Generation
	next.BucketName = bucket
	next.Claim = storagev1.BucketCreating
	conditions.Summarize(&next.Conditions, b.Generation, conditions.Summary{Progress: conditions.Working, Reason: ReasonCreating,
		Message: fmt.Sprintf("creating bucket %s in %s", bucket, store)})
	_, err := r.status.Patch(ctx, b, next)
	return err
}

func blocked(reason, message string) checkResult {
	return checkResult{summary: conditions.Summary{Progress: conditions.Blocked, Reason: reason, Message: message}}
}

// otherClaimant returns another StorageBucket that holds, or has the first
// claim on, the same bucket in the same store: one that has already claimed it
// wins; otherwise the older one (creation time, then UID, so both sides agree).
func (r *BucketReconciler) otherClaimant(ctx context.Context, b *storagev1.StorageBucket, bucket string) (string, error) {
	list := &storagev1.StorageBucketList{}
	if err := r.client.List(ctx, list, client.MatchingFields{storeBucketIndex: storeBucketKey(b.Spec.StoreRef.Name, bucket)}); err != nil {
		return "", fmt.Errorf("listing other claimants of bucket %s: %w", bucket, err)
	}
	mine := claims(b, bucket)
	for i := range list.Items {
		o := &list.Items[i]
		if o.UID == b.UID {
			continue
		}
		theirs := claims(o, bucket)
		older := o.CreationTimestamp.Before(&b.CreationTimestamp) ||
			(o.CreationTimestamp.Equal(&b.CreationTimestamp) && o.UID < b.UID)
		if theirs && !mine || theirs == mine && older {
			return o.Namespace + "/" + o.Name, nil
		}
	}
	return "", nil
}

// claims reports whether b's status records a claim (or a creation in
// progress) on the bucket.
func claims(b *storagev1.StorageBucket, bucket string) bool {
	return b.Status.BucketName == bucket && b.Status.Claim != ""
}

// finalize applies the deletion policy. Retain: the bucket stays. Delete: an
// empty bucket we own is deleted; a non-empty one, or a store that cannot be
// reached, holds the deletion with the reason in status.
func (r *BucketReconciler) finalize(ctx context.Context, b *storagev1.StorageBucket) (ctrl.Result, error) {
	if b.Spec.DeletionPolicy == storagev1.DeletionDelete {
		res, err := r.deleteBucket(ctx, b)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !res.done {
			next := *b.Status.DeepCopy()
			conditions.Summarize(&next.Conditions, b.Generation, res.summary)
			if _, err := r.status.Patch(ctx, b, next); err != nil {
				return ctrl.Result{}, err
			}
			return setup.RequeueAfter(res.retry), nil
		}
		if res.deleted {
			log.FromContext(ctx).Info("bucket deleted", "bucket", bucketName(b))
			r.recorder.Eventf(b, nil, corev1.EventTypeNormal, "BucketDeleted", "Delete", "deleted empty bucket %s (deletionPolicy: Delete)", bucketName(b))
		}
	}
	if err := finalizer.Remove(ctx, r.client, b, BucketFinalizer); err != nil {
		return ctrl.Result{}, err
	}
	r.schedule.Forget(client.ObjectKeyFromObject(b))
	forgetBucketMetrics(client.ObjectKeyFromObject(b))
	return ctrl.Result{}, nil
}

// deleteBucket deletes the bucket if it is ours and empty, or says why not.
// A store that is not Ready is not asked: its own check says when it is back,
// and that re-queues its buckets, this one included.
func (r *BucketReconciler) deleteBucket(ctx context.Context, b *storagev1.StorageBucket) (deletionResult, error) {
	name := bucketName(b)
	if b.Status.Claim == "" || b.Status.BucketName != name {
		// Never created nor claimed by this StorageBucket: nothing of ours to delete.
		return deletionResult{done: true}, nil
	}
	store, res, err := r.usableStore(ctx, b.Spec.StoreRef.Name)
	if err != nil {
		return deletionResult{}, err
	}
	if store == nil {
		if res.summary.Reason == ReasonStoreNotFound {
			// The store is gone, and its buckets with it as far as Trellis can tell.
			return deletionResult{done: true}, nil
		}
		res.summary.Message += fmt.Sprintf("; bucket %s will be deleted once the store answers, or set deletionPolicy: Retain to let the StorageBucket go", name)
		return deletionResult{summary: res.summary, retry: time.Minute}, nil
	}
	c, err := r.stores.Client(ctx, store)
	if err != nil {
		reason, msg := classifyStoreError(err)
		return deletionResult{retry: time.Minute, summary: conditions.Summary{Progress: conditions.Blocked, Reason: string(reason),
			Message: fmt.Sprintf("ObjectStore %s: %s; bucket %s cannot be deleted until this is fixed, or set deletionPolicy: Retain", store.Name, msg, name)}}, nil
	}
	return bucketDeletion{s3: c, store: store.Name, bucket: name, uid: string(b.UID), claim: b.Status.Claim}.run(ctx), nil
}
