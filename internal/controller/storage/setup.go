// Package storage registers the three storage controllers: ObjectStores
// (package store), StorageBuckets (package bucket) and BucketAccesses
// (package access), with the sweep (package sweep) and the bucket-event
// receiver (package bucketevents). The three controllers share the stores'
// clients (package stores), so they are enabled together as "storage".
package storage

import (
	"context"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/controller/status"
	"github.com/trellis-dev/trellis/internal/controller/storage/access"
	"github.com/trellis-dev/trellis/internal/controller/storage/bucket"
	"github.com/trellis-dev/trellis/internal/controller/storage/bucketevents"
	"github.com/trellis-dev/trellis/internal/controller/storage/store"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/controller/storage/sweep"
)

// ControllerName names the pair in --controllers and --max-concurrent-reconciles.
const ControllerName = "storage"

// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Controller registers the ObjectStore, StorageBucket and BucketAccess controllers.
var Controller = setup.Controller{
	Name:  ControllerName,
	Setup: Setup,
}

// Setup registers the three controllers, their indexes, the sweep of the
// stores and, when configured, the bucket-events receiver.
func Setup(ctx context.Context, mgr ctrl.Manager, opts setup.Options) error {
	return SetupWith(ctx, mgr, opts, stores.DefaultBackends)
}

// SetupWith is Setup with the store clients given (tests point them at a real
// server with other timeouts).
func SetupWith(ctx context.Context, mgr ctrl.Manager, opts setup.Options, backends stores.Backends) error {
	return setupWith(ctx, mgr, opts, backends, &shared{})
}

// shared is what the three controllers keep in memory across reconciles.
type shared struct {
	stores     *stores.Clients
	namespaces *stores.NamespaceLabels
	schedule   *bucket.Schedule
	sweeper    *sweep.Sweeper
	patchers   []interface {
		FollowCache(ctx context.Context, informers status.Informers) error
		Remembered() int
	}
}

// setupWith is SetupWith; sh receives what the controllers share (for the
// tests, which look at how much it holds).
func setupWith(ctx context.Context, mgr ctrl.Manager, opts setup.Options, backends stores.Backends, sh *shared) error {
	if err := stores.AddIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return err
	}

	clients := stores.NewClients(mgr.GetAPIReader(), opts.Namespace, backends)
	namespaces := stores.NewNamespaceLabels(mgr.GetAPIReader())
	schedule := bucket.NewSchedule()
	storeEvents := make(chan event.TypedGenericEvent[*storagev1.ObjectStore])
	bucketEvents := make(chan event.TypedGenericEvent[*storagev1.StorageBucket])
	accessEvents := make(chan event.TypedGenericEvent[*storagev1.BucketAccess])
	trustChanges := make(chan event.TypedGenericEvent[*storagev1.ObjectStore])

	storeRec := mgr.GetEventRecorder("objectstore")
	storeReconciler := store.New(mgr.GetClient(), storeRec, clients, storeEvents, trustChanges, opts.StorageSweepInterval > 0)
	if err := storeReconciler.SetupWithManager(mgr, opts); err != nil {
		return err
	}
	bucketReconciler := bucket.New(mgr.GetClient(), mgr.GetEventRecorder("storagebucket"), bucket.Config{
		Stores: clients, Namespaces: namespaces, Schedule: schedule, StoreChecks: storeEvents,
		BucketEvents: bucketEvents, AccessEvents: accessEvents,
	})
	if err := bucketReconciler.SetupWithManager(mgr, opts); err != nil {
		return err
	}
	accessReconciler := access.New(mgr.GetClient(), mgr.GetAPIReader(), mgr.GetEventRecorder("bucketaccess"), access.Config{
		Stores: clients, Namespaces: namespaces, StoreChecks: storeEvents, AccessEvents: accessEvents, TrustChanges: trustChanges,
	})
	if err := accessReconciler.SetupWithManager(mgr, opts); err != nil {
		return err
	}
	sh.stores, sh.namespaces, sh.schedule = clients, namespaces, schedule
	sh.patchers = append(sh.patchers, storeReconciler.Status(), bucketReconciler.Status(), accessReconciler.Status())
	for _, p := range sh.patchers {
		// Each forgets a status write once the cache shows it.
		if err := p.FollowCache(ctx, mgr.GetCache()); err != nil {
			return err
		}
	}
	if opts.StorageSweepInterval > 0 {
		// Keys and grants of no live BucketAccess, whatever became of its finalizer.
		sh.sweeper = &sweep.Sweeper{
			Interval: opts.StorageSweepInterval, Cache: mgr.GetClient(), Synced: mgr.GetCache(),
			Clients: clients, Recorder: mgr.GetEventRecorder("storage-sweep"), StoreChecks: storeEvents,
		}
		if err := mgr.Add(sh.sweeper); err != nil {
			return err
		}
	}
	if opts.BucketEventsAddr != "" && opts.BucketEventsAddr != "0" {
		if opts.BucketEventsSecret == "" {
			return fmt.Errorf("--bucket-events-bind-address needs --bucket-events-token-secret")
		}
		return mgr.Add(&bucketevents.Receiver{
			Addr: opts.BucketEventsAddr, Secret: client.ObjectKey{Namespace: opts.Namespace, Name: opts.BucketEventsSecret},
			APIReader: mgr.GetAPIReader(), Cache: mgr.GetCache(), Checks: bucketChecks{schedule: schedule, events: bucketEvents},
		})
	}
	return nil
}

// bucketChecks is how the bucket-event receiver asks the StorageBucket
// controller for a check now: the bucket is made due at once in the
// schedule, and queued.
type bucketChecks struct {
	schedule *bucket.Schedule
	events   chan<- event.TypedGenericEvent[*storagev1.StorageBucket]
}

func (c bucketChecks) CheckNow(ctx context.Context, b *storagev1.StorageBucket) bool {
	c.schedule.CheckNow(client.ObjectKeyFromObject(b))
	select {
	case c.events <- event.TypedGenericEvent[*storagev1.StorageBucket]{Object: b}:
		return true
	case <-ctx.Done():
		return false
	}
}
