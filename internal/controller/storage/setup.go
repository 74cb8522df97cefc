// Package storage reconciles ObjectStores (S3-compatible stores outside the
// cluster) and StorageBuckets (buckets in them, created and health-checked on
// external events). The two controllers share what the manager knows of each
// store, so they are enabled together as "storage".
package storage

import (
	"context"
	"fmt"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/s3"
)

// ControllerName names the pair in --controllers and --max-concurrent-reconciles.
const ControllerName = "storage"

// bucketNameOnlyIndex finds StorageBuckets by bucket name, for bucket events.
const bucketNameOnlyIndex = "storage.bucketName"

// tick is how often the schedule is scanned for due checks.
const tick = time.Second

// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Controller registers the ObjectStore and StorageBucket controllers.
var Controller = setup.Controller{
	Name:  ControllerName,
	Setup: Setup,
}

// Setup registers both controllers, their indexes, the ticker and, when
// configured, the bucket-events receiver.
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
	if err := idx.IndexField(ctx, &storagev1.StorageBucket{}, bucketNameIndex, func(o client.Object) []string {
		b := o.(*storagev1.StorageBucket)
		return []string{b.Spec.StoreRef.Name + "/" + bucketName(b)}
	}); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &storagev1.StorageBucket{}, bucketNameOnlyIndex, func(o client.Object) []string {
		return []string{bucketName(o.(*storagev1.StorageBucket))}
	}); err != nil {
		return err
	}

	stores, schedule := NewStores(), NewSchedule()
	storeEvents := make(chan event.TypedGenericEvent[*storagev1.ObjectStore])
	bucketEvents := make(chan event.TypedGenericEvent[*storagev1.StorageBucket])
	ticks := make(chan event.GenericEvent)

	storeReconciler := &ObjectStoreReconciler{
		Client: mgr.GetClient(), APIReader: secretReader{mgr.GetAPIReader(), opts.Namespace},
		Recorder: mgr.GetEventRecorder("objectstore"), Stores: stores, NewClient: newClient,
		StoreEvents: storeEvents, BucketEvents: bucketEvents, Schedule: schedule,
	}
	if err := storeReconciler.SetupWithManager(mgr, opts); err != nil {
		return err
	}
	bucketReconciler := &BucketReconciler{
		Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("storagebucket"), Stores: stores, Schedule: schedule,
		StoreEvents: storeEvents, BucketEvents: bucketEvents, Ticks: ticks,
	}
	if err := bucketReconciler.SetupWithManager(mgr, opts); err != nil {
		return err
	}
	if err := mgr.Add(&Ticker{Tick: tick, Events: ticks}); err != nil {
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

// secretReader reads Secrets only from the manager's own namespace: store
// credentials live there, so the manager needs no cluster-wide Secret access
// and a tenant cannot point Trellis at someone else's Secret.
type secretReader struct {
	client.Reader
	namespace string
}

func (s secretReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if key.Namespace != s.namespace {
		return fmt.Errorf("%w: credentials must be in the manager's namespace %s, not %s",
			s3.ErrNoCredentials, s.namespace, strings.TrimSpace(key.Namespace))
	}
	return s.Reader.Get(ctx, key, obj, opts...)
}
