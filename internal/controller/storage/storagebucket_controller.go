package storage

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/controller/statusmemo"
	"github.com/trellis-dev/trellis/internal/s3"
)

// BucketFinalizer holds a StorageBucket until its deletion policy is applied.
const BucketFinalizer = "storage.trellis.dev/bucket"

// Field indexes over StorageBuckets.
const (
	bucketStoreIndex = "spec.storeRef.name"
	// bucketNameIndex is "<store>/<bucket name>", to find who else claims a bucket.
	bucketNameIndex = "storage.bucketKey"
)

// deleteCountLimit bounds how many objects are counted to report a blocked deletion.
const deleteCountLimit = 1000

// BucketReconciler reconciles StorageBuckets.
type BucketReconciler struct {
	Client   client.Client
	Recorder recorder.EventRecorder
	Stores   *Stores
	Schedule *Schedule
	// StoreEvents asks the ObjectStore controller to check a store a bucket found down.
	StoreEvents chan event.TypedGenericEvent[*storagev1.ObjectStore]
	// BucketEvents carries requests for an immediate check (webhook, store back).
	BucketEvents chan event.TypedGenericEvent[*storagev1.StorageBucket]
	// Ticks feeds the schedule scan (the seed's Runnable ticker).
	Ticks chan event.GenericEvent
	// written avoids re-sending a status the cache has not caught up with yet.
	written statusmemo.Memo
}

// +kubebuilder:rbac:groups=storage.trellis.dev,resources=storagebuckets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=storage.trellis.dev,resources=storagebuckets/status,verbs=get;patch
// +kubebuilder:rbac:groups=storage.trellis.dev,resources=storagebuckets/finalizers,verbs=update

// SetupWithManager wires the seed's external events: ticks from a Runnable
// become requests only for buckets whose check is due; bucket events (the
// webhook receiver, a store that came back) become requests for those buckets.
func (r *BucketReconciler) SetupWithManager(mgr ctrl.Manager, opts setup.Options) error {
	dueBuckets := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		list := &storagev1.StorageBucketList{}
		if err := mgr.GetCache().List(ctx, list); err != nil {
			log.FromContext(ctx).Error(err, "listing StorageBuckets for due checks")
			return nil
		}
		var reqs []reconcile.Request
		for i := range list.Items {
			b := &list.Items[i]
			key := client.ObjectKeyFromObject(b)
			if b.DeletionTimestamp.IsZero() && r.Schedule.Due(key, string(b.UID), interval(b)) {
				reqs = append(reqs, reconcile.Request{NamespacedName: key})
			}
		}
		return reqs
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("storagebucket").
		For(&storagev1.StorageBucket{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, setup.DeletionStarted))).
		Watches(&storagev1.ObjectStore{}, handler.EnqueueRequestsFromMapFunc(r.bucketsOfStore), builder.WithPredicates(storeReadyChanged)).
		WatchesRawSource(source.Channel(r.Ticks, dueBuckets)).
		WatchesRawSource(source.Channel(r.BucketEvents, &handler.TypedEnqueueRequestForObject[*storagev1.StorageBucket]{})).
		WithOptions(opts.ControllerOptions()).
		Complete(r)
}

// storeReadyChanged passes a store's creation and changes of its Ready condition.
var storeReadyChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*storagev1.ObjectStore), e.ObjectNew.(*storagev1.ObjectStore)
		return conditions.IsTrue(o.Status.Conditions, conditions.Ready) != conditions.IsTrue(n.Status.Conditions, conditions.Ready)
	},
}

func (r *BucketReconciler) bucketsOfStore(ctx context.Context, o client.Object) []reconcile.Request {
	list := &storagev1.StorageBucketList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{bucketStoreIndex: o.GetName()}); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

func interval(b *storagev1.StorageBucket) time.Duration {
	if d := b.Spec.HealthCheck.Interval.Duration; d >= 10*time.Second {
		return d
	}
	return 60 * time.Second
}

// bucketName is the bucket's name in the store.
func bucketName(b *storagev1.StorageBucket) string {
	if b.Spec.BucketName != "" {
		return b.Spec.BucketName
	}
	return s3.DeriveBucketName(b.Namespace, b.Name)
}

// Reconcile ensures one bucket exists and is ours, and checks its health
// when a check is due or the spec changed.
func (r *BucketReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	b := &storagev1.StorageBucket{}
	if err := r.Client.Get(ctx, req.NamespacedName, b); err != nil {
		if apierrors.IsNotFound(err) {
			r.Schedule.Forget(req.NamespacedName)
			forgetBucketMetrics(req.NamespacedName)
			r.written.Forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !b.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, b)
	}
	if !controllerutil.ContainsFinalizer(b, BucketFinalizer) {
		patch := client.MergeFrom(b.DeepCopy())
		controllerutil.AddFinalizer(b, BucketFinalizer)
		if err := r.Client.Patch(ctx, b, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding finalizer: %w", err)
		}
	}

	key := req.NamespacedName
	asked := r.Schedule.Take(key, string(b.UID), interval(b))
	settled := b.Status.ObservedGeneration == b.Generation && b.Status.BucketName != "" &&
		conditions.IsTrue(b.Status.Conditions, conditions.Ready)
	if settled && !asked {
		// A healthy bucket seen by a start-up listing, a resync or a store
		// event: nothing is due, and a check now would bunch checks together.
		// The schedule will ask. (Unhealthy buckets are looked at on any
		// event: a store that changed state is what they wait for.)
		return ctrl.Result{}, nil
	}

	obs := r.check(ctx, b)
	r.Schedule.Checked(key, string(b.UID), interval(b))
	return ctrl.Result{}, r.updateStatus(ctx, b, obs)
}

// check finds out, with as few store requests as it can, whether the bucket
// exists, is ours and is healthy. Store errors are states, not reconcile
// errors: retrying them is the schedule's and the store back-off's job.
func (r *BucketReconciler) check(ctx context.Context, b *storagev1.StorageBucket) bucketObservation {
	start := time.Now()
	obs := bucketObservation{bucket: bucketName(b)}
	defer func() {
		result := ReasonHealthy
		if obs.reason != "" {
			result = obs.reason
		}
		recordCheck(client.ObjectKeyFromObject(b), result, obs.reason == "", time.Since(start))
	}()

	if other := r.otherClaimant(ctx, b, obs.bucket); other != "" {
		obs.fail(ReasonConflict, fmt.Sprintf("bucket %s is already claimed by StorageBucket %s", obs.bucket, other))
		return obs
	}
	store := &storagev1.ObjectStore{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: b.Spec.StoreRef.Name}, store); err != nil {
		obs.fail(ReasonStoreNotFound, fmt.Sprintf("ObjectStore %s does not exist", b.Spec.StoreRef.Name))
		return obs
	}
	view := r.Stores.View(store.Name)
	switch {
	case !view.Checked || view.Client == nil:
		obs.fail(ReasonStoreNotReady, fmt.Sprintf("ObjectStore %s has not been checked yet", store.Name))
		return obs
	case !view.Up:
		// One store-level check stands for every bucket of a store that is down.
		obs.fail(string(view.Reason), fmt.Sprintf("ObjectStore %s: %s", store.Name, view.Message))
		return obs
	}
	c := view.Client

	exists, err := c.BucketExists(ctx, obs.bucket)
	if err != nil {
		return r.storeFailed(ctx, store, obs, err)
	}
	owned := b.Status.Claimed && b.Status.BucketName == obs.bucket
	yes, no := true, false
	switch {
	case !exists:
		if err := c.CreateBucket(ctx, obs.bucket); err != nil {
			return r.storeFailed(ctx, store, obs, err)
		}
		if err := c.SetOwner(ctx, obs.bucket, string(b.UID)); err != nil {
			return r.storeFailed(ctx, store, obs, err)
		}
		obs.claimed = &yes
		if owned {
			r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, "BucketRecreated", "Check", "bucket %s had disappeared from the store and was created again (empty)", obs.bucket)
		} else {
			r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, "BucketCreated", "Check", "created bucket %s in %s", obs.bucket, store.Name)
		}
	case !owned:
		// Seen for the first time (or after a conflict): whose is it?
		owner, err := c.Owner(ctx, obs.bucket)
		if err != nil {
			return r.storeFailed(ctx, store, obs, err)
		}
		switch {
		case owner == string(b.UID):
			obs.claimed = &yes
		case b.Spec.AdoptExisting:
			if err := c.SetOwner(ctx, obs.bucket, string(b.UID)); err != nil {
				return r.storeFailed(ctx, store, obs, err)
			}
			obs.claimed = &yes
			r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, "BucketAdopted", "Check", "adopted existing bucket %s (adoptExisting: true)", obs.bucket)
		default:
			obs.claimed = &no
			obs.fail(ReasonConflict, fmt.Sprintf("bucket %s already exists in %s and was not created by this StorageBucket; set adoptExisting: true to take it over", obs.bucket, store.Name))
			return obs
		}
	}
	if b.Spec.HealthCheck.Probe {
		if err := c.Probe(ctx, obs.bucket); err != nil {
			return r.storeFailed(ctx, store, obs, err)
		}
	}
	return obs
}

// storeFailed turns a store error into the bucket's state; a store that stopped
// answering is handed to the store-level check, which backs off.
func (r *BucketReconciler) storeFailed(ctx context.Context, store *storagev1.ObjectStore, obs bucketObservation, err error) bucketObservation {
	reason, msg := s3.Classify(err)
	if reason == s3.ReasonStoreUnreachable {
		msg = fmt.Sprintf("ObjectStore %s: %s", store.Name, msg)
		if r.Stores.MarkDown(store.Name, reason, msg) {
			select {
			case r.StoreEvents <- event.TypedGenericEvent[*storagev1.ObjectStore]{Object: store}:
			case <-ctx.Done():
			}
		}
	}
	obs.fail(string(reason), msg)
	return obs
}

// otherClaimant returns another StorageBucket that holds, or has the first
// claim on, the same bucket in the same store: one that has already claimed it
// wins; otherwise the older one (creation time, then UID, so both sides agree).
func (r *BucketReconciler) otherClaimant(ctx context.Context, b *storagev1.StorageBucket, bucket string) string {
	list := &storagev1.StorageBucketList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{bucketNameIndex: b.Spec.StoreRef.Name + "/" + bucket}); err != nil {
		return ""
	}
	mine := b.Status.Claimed && b.Status.BucketName == bucket
	for i := range list.Items {
		o := &list.Items[i]
		if o.UID == b.UID {
			continue
		}
		theirs := o.Status.Claimed && o.Status.BucketName == bucket
		older := o.CreationTimestamp.Before(&b.CreationTimestamp) ||
			(o.CreationTimestamp.Equal(&b.CreationTimestamp) && o.UID < b.UID)
		if theirs && !mine || theirs == mine && older {
			return o.Namespace + "/" + o.Name
		}
	}
	return ""
}

// finalize applies the deletion policy. Retain: the bucket stays. Delete: an
// empty bucket we own is deleted; a non-empty one, or a store that cannot be
// reached, blocks the deletion with the reason in status.
func (r *BucketReconciler) finalize(ctx context.Context, b *storagev1.StorageBucket) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(b, BucketFinalizer) {
		return ctrl.Result{}, nil
	}
	name := bucketName(b)
	if b.Spec.DeletionPolicy == storagev1.DeletionDelete {
		blocked, retry, err := r.deleteBucket(ctx, b, name)
		if err != nil {
			return ctrl.Result{}, err
		}
		if blocked != "" {
			next := *b.Status.DeepCopy()
			conditions.Set(&next.Conditions, b.Generation, conditions.Ready, false, ReasonDeleteBlocked, blocked)
			if err := r.patchStatus(ctx, b, next); err != nil {
				return ctrl.Result{}, err
			}
			return ctrl.Result{RequeueAfter: retry}, nil
		}
	}
	patch := client.MergeFrom(b.DeepCopy())
	controllerutil.RemoveFinalizer(b, BucketFinalizer)
	if err := r.Client.Patch(ctx, b, patch); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("removing finalizer: %w", err)
	}
	r.Schedule.Forget(client.ObjectKeyFromObject(b))
	forgetBucketMetrics(client.ObjectKeyFromObject(b))
	return ctrl.Result{}, nil
}

// deleteBucket deletes the bucket if it is ours and empty; otherwise it says
// why not, and when to look again.
func (r *BucketReconciler) deleteBucket(ctx context.Context, b *storagev1.StorageBucket, name string) (blocked string, retry time.Duration, err error) {
	view := r.Stores.View(b.Spec.StoreRef.Name)
	if view.Client == nil {
		return fmt.Sprintf("ObjectStore %s is not available, so bucket %s cannot be deleted yet; set deletionPolicy: Retain to let it go", b.Spec.StoreRef.Name, name), time.Minute, nil
	}
	if !view.Up && time.Now().Before(view.NextProbe) {
		return fmt.Sprintf("ObjectStore %s cannot be reached (%s); bucket %s will be deleted once it answers, or set deletionPolicy: Retain", b.Spec.StoreRef.Name, view.Message, name), time.Until(view.NextProbe) + time.Second, nil
	}
	c := view.Client
	exists, err := c.BucketExists(ctx, name)
	if err != nil {
		_, msg := s3.Classify(err)
		return fmt.Sprintf("cannot reach bucket %s to delete it: %s", name, msg), time.Minute, nil
	}
	if !exists {
		return "", 0, nil
	}
	owner, err := c.Owner(ctx, name)
	if err != nil {
		_, msg := s3.Classify(err)
		return fmt.Sprintf("cannot read who owns bucket %s: %s", name, msg), time.Minute, nil
	}
	if owner != string(b.UID) {
		// Not ours (a conflict that never resolved): never delete it.
		return "", 0, nil
	}
	n, err := c.CountObjects(ctx, name, deleteCountLimit)
	if err != nil {
		_, msg := s3.Classify(err)
		return fmt.Sprintf("cannot list bucket %s: %s", name, msg), time.Minute, nil
	}
	if n > 0 {
		count := fmt.Sprintf("%d objects", n)
		if n >= deleteCountLimit {
			count = fmt.Sprintf("at least %d objects", n)
		}
		msg := fmt.Sprintf("bucket %s still holds %s; empty it, or set deletionPolicy: Retain to keep it and let the StorageBucket go", name, count)
		if c := conditions.Get(b.Status.Conditions, conditions.Ready); c == nil || c.Reason != ReasonDeleteBlocked {
			r.Recorder.Eventf(b, nil, corev1.EventTypeWarning, ReasonDeleteBlocked, "Delete", "%s", msg)
		}
		return msg, 2 * time.Minute, nil
	}
	if err := c.DeleteBucket(ctx, name); err != nil {
		_, msg := s3.Classify(err)
		return fmt.Sprintf("deleting bucket %s failed: %s", name, msg), time.Minute, nil
	}
	log.FromContext(ctx).Info("bucket deleted", "bucket", name)
	r.Recorder.Eventf(b, nil, corev1.EventTypeNormal, "BucketDeleted", "Delete", "deleted empty bucket %s (deletionPolicy: Delete)", name)
	return "", 0, nil
}

// updateStatus writes the status only when it changed, with an Event when Ready changes.
func (r *BucketReconciler) updateStatus(ctx context.Context, b *storagev1.StorageBucket, obs bucketObservation) error {
	r.useLatestStatus(b)
	return r.patchStatus(ctx, b, computeBucketStatus(b, obs))
}

// useLatestStatus puts our last written status on b when the cache has not
// seen that write yet, so the next status is built on it.
func (r *BucketReconciler) useLatestStatus(b *storagev1.StorageBucket) {
	if latest, ok := r.written.Latest(client.ObjectKeyFromObject(b), b.ResourceVersion); ok {
		st := latest.(storagev1.StorageBucketStatus)
		b.Status = *st.DeepCopy()
	}
}

func (r *BucketReconciler) patchStatus(ctx context.Context, b *storagev1.StorageBucket, next storagev1.StorageBucketStatus) error {
	if equality.Semantic.DeepEqual(b.Status, next) {
		return nil
	}
	before := conditions.Get(b.Status.Conditions, conditions.Ready)
	rvBefore := b.ResourceVersion
	patch := client.MergeFrom(b.DeepCopy())
	b.Status = next
	if err := r.Client.Status().Patch(ctx, b, patch); err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	r.written.Wrote(client.ObjectKeyFromObject(b), rvBefore, *next.DeepCopy())
	after := conditions.Get(next.Conditions, conditions.Ready)
	if before == nil || before.Status != after.Status || before.Reason != after.Reason {
		typ := corev1.EventTypeNormal
		if after.Status != metav1.ConditionTrue {
			typ = corev1.EventTypeWarning
		}
		if after.Reason != ReasonDeleteBlocked { // that one has its own Event
			r.Recorder.Eventf(b, nil, typ, after.Reason, "Check", "%s", after.Message)
		}
	}
	return nil
}
