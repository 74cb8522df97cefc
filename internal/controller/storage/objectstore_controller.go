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
	"github.com/trellis-dev/trellis/internal/jitter"
	"github.com/trellis-dev/trellis/internal/s3"
)

// Keys of the credentials Secret.
const (
	AccessKeyIDKey     = "accessKeyID"
	SecretAccessKeyKey = "secretAccessKey"
)

// StoreFinalizer keeps an ObjectStore while StorageBuckets still use it.
const StoreFinalizer = "storage.trellis.dev/in-use"

// Reasons of an ObjectStore's Ready condition besides those of s3.Classify.
const (
	ReasonReachable = "Reachable"
	ReasonInUse     = "InUse"
)

// storeCheckInterval is how often a healthy store is checked (and its
// credentials Secret re-read, which is how rotated keys are picked up).
const storeCheckInterval = time.Minute

// ObjectStoreReconciler checks stores and keeps their clients in Stores.
type ObjectStoreReconciler struct {
	Client    client.Client
	APIReader client.Reader
	Recorder  recorder.EventRecorder
	Stores    *Stores
	NewClient func(s3.Config) (s3.Client, error)
	// StoreEvents re-queues a store whose state a bucket reconcile changed.
	StoreEvents chan event.TypedGenericEvent[*storagev1.ObjectStore]
	// BucketEvents re-queues the buckets of a store that came back.
	BucketEvents chan event.TypedGenericEvent[*storagev1.StorageBucket]
	Schedule     *Schedule
}

// +kubebuilder:rbac:groups=storage.trellis.dev,resources=objectstores,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=storage.trellis.dev,resources=objectstores/status,verbs=get;patch
// +kubebuilder:rbac:groups=storage.trellis.dev,resources=objectstores/finalizers,verbs=update
// +kubebuilder:rbac:groups="",namespace=system,resources=secrets,verbs=get

// SetupWithManager watches ObjectStores (spec changes), the StorageBuckets
// that use them (for in-use protection), and store events from bucket checks.
func (r *ObjectStoreReconciler) SetupWithManager(mgr ctrl.Manager, opts setup.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("objectstore").
		For(&storagev1.ObjectStore{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, setup.DeletionStarted))).
		Watches(&storagev1.StorageBucket{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: o.(*storagev1.StorageBucket).Spec.StoreRef.Name}}}
		}), builder.WithPredicates(bucketGoneOrCreated)).
		WatchesRawSource(source.Channel(r.StoreEvents, &handler.TypedEnqueueRequestForObject[*storagev1.ObjectStore]{})).
		WithOptions(opts.ControllerOptions()).
		Complete(r)
}

// bucketGoneOrCreated: a store only cares how many buckets use it.
var bucketGoneOrCreated = predicate.Funcs{
	UpdateFunc: func(event.UpdateEvent) bool { return false },
}

// Reconcile checks one store and records the result for its buckets.
func (r *ObjectStoreReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	store := &storagev1.ObjectStore{}
	if err := r.Client.Get(ctx, req.NamespacedName, store); err != nil {
		if apierrors.IsNotFound(err) {
			r.Stores.Forget(req.Name)
			storeUp.DeleteLabelValues(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !store.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, store)
	}
	if !controllerutil.ContainsFinalizer(store, StoreFinalizer) {
		patch := client.MergeFrom(store.DeepCopy())
		controllerutil.AddFinalizer(store, StoreFinalizer)
		if err := r.Client.Patch(ctx, store, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding finalizer: %w", err)
		}
	}

	view := r.Stores.View(store.Name)
	if view.Checked && !view.Up && time.Now().Before(view.NextProbe) {
		// Down and backing off: the status already says so.
		return ctrl.Result{RequeueAfter: time.Until(view.NextProbe)}, r.updateStatus(ctx, store, view)
	}

	c, err := r.storeClient(ctx, store)
	if err != nil {
		reason, msg := s3.Classify(err)
		r.Stores.MarkDown(store.Name, reason, msg)
	} else if err := c.Ping(ctx); err != nil {
		reason, msg := s3.Classify(err)
		r.Stores.MarkDown(store.Name, reason, msg)
		log.FromContext(ctx).Info("object store check failed", "reason", reason)
	} else if r.Stores.MarkUp(store.Name) {
		log.FromContext(ctx).Info("object store is back; re-checking its buckets")
		r.recheckBuckets(ctx, store.Name)
	}

	view = r.Stores.View(store.Name)
	if err := r.updateStatus(ctx, store, view); err != nil {
		return ctrl.Result{}, err
	}
	if !view.Up {
		return ctrl.Result{RequeueAfter: max(time.Until(view.NextProbe), time.Second)}, nil
	}
	return ctrl.Result{RequeueAfter: jitter.Duration(storeCheckInterval, 0.1)}, nil
}

// storeClient reads the credentials Secret (uncached: the manager never holds
// Secrets) and returns the store's client, rebuilt only if anything changed.
func (r *ObjectStoreReconciler) storeClient(ctx context.Context, store *storagev1.ObjectStore) (s3.Client, error) {
	ref := store.Spec.CredentialsSecretRef
	secret := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, secret); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return nil, fmt.Errorf("%w (Secret %s/%s: %s)", s3.ErrNoCredentials, ref.Namespace, ref.Name, apierrors.ReasonForError(err))
		}
		return nil, err
	}
	cfg := s3.Config{
		Endpoint:  store.Spec.Endpoint,
		Region:    store.Spec.Region,
		PathStyle: store.Spec.PathStyle,
		AccessKey: string(secret.Data[AccessKeyIDKey]),
		SecretKey: string(secret.Data[SecretAccessKeyKey]),
	}
	return r.Stores.SetClient(store.Name, cfg, func(cfg s3.Config) (s3.Client, error) {
		c, err := r.NewClient(cfg)
		if err != nil {
			return nil, err
		}
		return counted(store.Name, c), nil
	})
}

// recheckBuckets asks for an immediate check of every bucket of a store that came back.
func (r *ObjectStoreReconciler) recheckBuckets(ctx context.Context, store string) {
	list := &storagev1.StorageBucketList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{bucketStoreIndex: store}); err != nil {
		log.FromContext(ctx).Error(err, "listing buckets of a store that came back")
		return
	}
	for i := range list.Items {
		b := &list.Items[i]
		r.Schedule.MarkPending(client.ObjectKeyFromObject(b))
		select {
		case r.BucketEvents <- event.TypedGenericEvent[*storagev1.StorageBucket]{Object: b}:
		case <-ctx.Done():
			return
		}
	}
}

func (r *ObjectStoreReconciler) updateStatus(ctx context.Context, store *storagev1.ObjectStore, view StoreView) error {
	up := 0.0
	if view.Up {
		up = 1
	}
	storeUp.WithLabelValues(store.Name).Set(up)
	next := *store.Status.DeepCopy()
	next.ObservedGeneration = store.Generation
	if view.Up {
		conditions.Set(&next.Conditions, store.Generation, conditions.Ready, true, ReasonReachable, "the store answers and accepts the credentials")
	} else {
		conditions.Set(&next.Conditions, store.Generation, conditions.Ready, false, string(view.Reason), view.Message)
	}
	return r.patchStatus(ctx, store, next)
}

func (r *ObjectStoreReconciler) patchStatus(ctx context.Context, store *storagev1.ObjectStore, next storagev1.ObjectStoreStatus) error {
	if equality.Semantic.DeepEqual(store.Status, next) {
		return nil
	}
	before := conditions.Get(store.Status.Conditions, conditions.Ready)
	patch := client.MergeFrom(store.DeepCopy())
	store.Status = next
	if err := r.Client.Status().Patch(ctx, store, patch); err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	after := conditions.Get(next.Conditions, conditions.Ready)
	if before == nil || before.Status != after.Status || before.Reason != after.Reason {
		typ := corev1.EventTypeNormal
		if after.Status != metav1.ConditionTrue {
			typ = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(store, nil, typ, after.Reason, "Check", "%s", after.Message)
	}
	return nil
}

// finalize lets a store go only when no StorageBucket uses it any more.
func (r *ObjectStoreReconciler) finalize(ctx context.Context, store *storagev1.ObjectStore) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(store, StoreFinalizer) {
		return ctrl.Result{}, nil
	}
	list := &storagev1.StorageBucketList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{bucketStoreIndex: store.Name}); err != nil {
		return ctrl.Result{}, err
	}
	if n := len(list.Items); n > 0 {
		next := *store.Status.DeepCopy()
		conditions.Set(&next.Conditions, store.Generation, conditions.Ready, false, ReasonInUse,
			fmt.Sprintf("deletion waits: %d StorageBuckets still use this store (e.g. %s/%s)", n, list.Items[0].Namespace, list.Items[0].Name))
		return ctrl.Result{}, r.patchStatus(ctx, store, next)
	}
	patch := client.MergeFrom(store.DeepCopy())
	controllerutil.RemoveFinalizer(store, StoreFinalizer)
	if err := r.Client.Patch(ctx, store, patch); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("removing finalizer: %w", err)
	}
	r.Stores.Forget(store.Name)
	return ctrl.Result{}, nil
}
