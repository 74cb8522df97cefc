// Package storage reconciles ObjectStores (S3-compatible stores outside the
// cluster) and StorageBuckets (buckets in them, created and health-checked on
// a schedule and on external events). The two controllers share the stores'
// clients, so they are enabled together as "storage".
package storage

import (
	"context"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/controller/status"
	"github.com/trellis-dev/trellis/internal/s3"
)

// ControllerName names the pair in --controllers and --max-concurrent-reconciles.
const ControllerName = "storage"

// Field indexes over StorageBuckets.
const (
	// bucketStoreIndex finds the buckets of a store.
	bucketStoreIndex = "spec.storeRef.name"
	// storeBucketIndex is "<store>/<bucket name>": who else claims a bucket.
	storeBucketIndex = "storage.storeAndBucket"
	// bucketNameIndex is the bucket name alone, for bucket events.
	bucketNameIndex = "storage.bucketName"
)

func storeBucketKey(store, bucket string) string { return store + "/" + bucket }

// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Controller registers the ObjectStore and StorageBucket controllers.
var Controller = setup.Controller{
	Name:  ControllerName,
	Setup: Setup,
}

// Setup registers both controllers, their indexes and, when configured, the
// bucket-events receiver.
func Setup(ctx context.Context, mgr ctrl.Manager, opts setup.Options) error {
	return SetupWith(ctx, mgr, opts, func(cfg s3.Config) (s3.Client, error) { return s3.New(cfg) })
}

// SetupWith is Setup with the S3 client constructor given (tests point it at a
// real server with other timeouts).
func SetupWith(ctx context.Context, mgr ctrl.Manager, opts setup.Options, newClient func(s3.Config) (s3.Client, error)) error {
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &storagev1.StorageBucket{}, bucketStoreIndex, func(o client.Object) []string {
		return []string{o.(*storagev1.StorageBucket).Spec.StoreRef.Name}
	}); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &storagev1.StorageBucket{}, storeBucketIndex, func(o client.Object) []string {
		b := o.(*storagev1.StorageBucket)
		return []string{storeBucketKey(b.Spec.StoreRef.Name, bucketName(b))}
	}); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &storagev1.StorageBucket{}, bucketNameIndex, func(o client.Object) []string {
		return []string{bucketName(o.(*storagev1.StorageBucket))}
	}); err != nil {
		return err
	}

	stores := NewStores(mgr.GetAPIReader(), opts.Namespace, newClient)
	schedule := NewSchedule()
	storeEvents := make(chan event.TypedGenericEvent[*storagev1.ObjectStore])
	bucketEvents := make(chan event.TypedGenericEvent[*storagev1.StorageBucket])

	storeReconciler := &ObjectStoreReconciler{
		client: mgr.GetClient(),
		status: status.NewPatcher(mgr.GetClient(), mgr.GetEventRecorder("objectstore"),
			func(s *storagev1.ObjectStore) *storagev1.ObjectStoreStatus { return &s.Status }, storeStatusEvents...),
		stores: stores, storeEvents: storeEvents, now: time.Now,
	}
	if err := storeReconciler.SetupWithManager(mgr, opts); err != nil {
		return err
	}
	rec := mgr.GetEventRecorder("storagebucket")
	bucketReconciler := &BucketReconciler{
		client: mgr.GetClient(), recorder: rec,
		status: status.NewPatcher(mgr.GetClient(), rec,
			func(b *storagev1.StorageBucket) *storagev1.StorageBucketStatus { return &b.Status }, bucketStatusEvents...),
		stores: stores, schedule: schedule, storeEvents: storeEvents, bucketEvents: bucketEvents,
	}
	if err := bucketReconciler.SetupWithManager(mgr, opts); err != nil {
		return err
	}
	if opts.BucketEventsAddr != "" && opts.BucketEventsAddr != "0" {
		if opts.BucketEventsSecret == "" {
			return fmt.Errorf("--bucket-events-bind-address needs --bucket-events-token-secret")
		}
		return mgr.Add(&EventReceiver{
			Addr: opts.BucketEventsAddr, Secret: client.ObjectKey{Namespace: opts.Namespace, Name: opts.BucketEventsSecret},
			APIReader: mgr.GetAPIReader(), Cache: mgr.GetCache(), Schedule: schedule, Events: bucketEvents,
		})
	}
	return nil
}
