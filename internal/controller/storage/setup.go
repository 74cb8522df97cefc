// Package storage reconciles ObjectStores (S3-compatible stores outside the
// cluster), StorageBuckets (buckets in them, created, health-checked on a
// schedule and on external events, and given the settings they declare) and
// BucketAccesses (a key of its own to one bucket, for a workload). The three
// controllers share the stores' clients, so they are enabled together as
// "storage".
package storage

import (
	"context"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/controller/children"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/controller/status"
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
	// accessBucketIndex finds the BucketAccesses of a StorageBucket (by
	// name, within a namespace).
	accessBucketIndex = "spec.bucketRef.name"
	// accessStoreIndex finds the BucketAccesses with accounts in a store.
	accessStoreIndex = "status.storeName"
	// accessTargetIndex is "<store>/<bucket>" as a BucketAccess's status
	// records them: the accesses whose grants a bucket's policy may hold.
	accessTargetIndex = "status.storeAndBucket"
	// bucketClaimIndex is "<store>/<bucket>" of a StorageBucket that claims
	// (or is creating) its bucket, by its status.
	bucketClaimIndex = "status.claimedBucket"
)

func storeBucketKey(store, bucket string) string { return store + "/" + bucket }

// indexes are the field indexes the three controllers read from the cache.
var indexes = []struct {
	obj   client.Object
	field string
	value client.IndexerFunc
}{
	{&storagev1.StorageBucket{}, bucketStoreIndex, func(o client.Object) []string {
		return []string{o.(*storagev1.StorageBucket).Spec.StoreRef.Name}
	}},
	{&storagev1.StorageBucket{}, storeBucketIndex, func(o client.Object) []string {
		b := o.(*storagev1.StorageBucket)
		return []string{storeBucketKey(b.Spec.StoreRef.Name, bucketName(b))}
	}},
	{&storagev1.StorageBucket{}, bucketNameIndex, func(o client.Object) []string {
		return []string{bucketName(o.(*storagev1.StorageBucket))}
	}},
	{&storagev1.BucketAccess{}, accessBucketIndex, func(o client.Object) []string {
		return []string{o.(*storagev1.BucketAccess).Spec.BucketRef.Name}
	}},
	{&storagev1.BucketAccess{}, accessStoreIndex, func(o client.Object) []string {
		if store := o.(*storagev1.BucketAccess).Status.StoreName; store != "" {
			return []string{store}
		}
		return nil
	}},
	{&storagev1.BucketAccess{}, accessTargetIndex, func(o client.Object) []string {
		if st := o.(*storagev1.BucketAccess).Status; st.StoreName != "" && st.BucketName != "" {
			return []string{storeBucketKey(st.StoreName, st.BucketName)}
		}
		return nil
	}},
	{&storagev1.StorageBucket{}, bucketClaimIndex, func(o client.Object) []string {
		if b := o.(*storagev1.StorageBucket); b.Status.Claim != "" && b.Status.BucketName != "" {
			return []string{storeBucketKey(b.Spec.StoreRef.Name, b.Status.BucketName)}
		}
		return nil
	}},
}

// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Controller registers the ObjectStore, StorageBucket and BucketAccess controllers.
var Controller = setup.Controller{
	Name:  ControllerName,
	Setup: Setup,
}

// Setup registers the three controllers, their indexes, the sweep of the
// stores and, when configured, the bucket-events receiver.
func Setup(ctx context.Context, mgr ctrl.Manager, opts setup.Options) error {
	return SetupWith(ctx, mgr, opts, DefaultBackends)
}

// SetupWith is Setup with the store clients given (tests point them at a real
// server with other timeouts).
func SetupWith(ctx context.Context, mgr ctrl.Manager, opts setup.Options, backends Backends) error {
	return setupWith(ctx, mgr, opts, backends, &shared{})
}

// shared is what the three controllers keep in memory across reconciles.
type shared struct {
	stores     *Stores
	namespaces *namespaceLabels
	schedule   *Schedule
	sweeper    *Sweeper
	patchers   []interface {
		FollowCache(ctx context.Context, informers status.Informers) error
		Remembered() int
	}
}

// setupWith is SetupWith; sh receives what the controllers share (for the
// tests, which look at how much it holds).
func setupWith(ctx context.Context, mgr ctrl.Manager, opts setup.Options, backends Backends, sh *shared) error {
	for _, ix := range indexes {
		if err := mgr.GetFieldIndexer().IndexField(ctx, ix.obj, ix.field, ix.value); err != nil {
			return err
		}
	}

	stores := NewStores(mgr.GetAPIReader(), opts.Namespace, backends)
	namespaces := newNamespaceLabels(mgr.GetAPIReader())
	schedule := NewSchedule()
	storeEvents := make(chan event.TypedGenericEvent[*storagev1.ObjectStore])
	bucketEvents := make(chan event.TypedGenericEvent[*storagev1.StorageBucket])
	accessEvents := make(chan event.TypedGenericEvent[*storagev1.BucketAccess])

	storeRec := mgr.GetEventRecorder("objectstore")
	storeReconciler := &ObjectStoreReconciler{
		client: mgr.GetClient(), recorder: storeRec,
		status: status.NewPatcher(mgr.GetClient(), storeRec,
			func(s *storagev1.ObjectStore) *storagev1.ObjectStoreStatus { return &s.Status }, storeStatusEvents...),
		stores: stores, storeEvents: storeEvents, now: time.Now, sweeps: opts.StorageSweepInterval > 0,
	}
	if err := storeReconciler.SetupWithManager(mgr, opts); err != nil {
		return err
	}
	rec := mgr.GetEventRecorder("storagebucket")
	bucketReconciler := &BucketReconciler{
		client: mgr.GetClient(), recorder: rec,
		status: status.NewPatcher(mgr.GetClient(), rec,
			func(b *storagev1.StorageBucket) *storagev1.StorageBucketStatus { return &b.Status }, bucketStatusEvents...),
		stores: stores, schedule: schedule, namespaces: namespaces, guards: newPublicAccessGuards(), storeChecks: storeEvents, bucketEvents: bucketEvents,
		accessEvents: accessEvents,
	}
	if err := bucketReconciler.SetupWithManager(mgr, opts); err != nil {
		return err
	}
	accessRec := mgr.GetEventRecorder("bucketaccess")
	accessReconciler := &AccessReconciler{
		client: mgr.GetClient(), recorder: accessRec,
		children: children.Clients{Cached: mgr.GetClient(), Uncached: mgr.GetAPIReader()},
		status: status.NewPatcher(mgr.GetClient(), accessRec,
			func(a *storagev1.BucketAccess) *storagev1.BucketAccessStatus { return &a.Status }, accessStatusEvents...),
		stores: stores, namespaces: namespaces, storeChecks: storeEvents, accessEvents: accessEvents, now: time.Now,
	}
	if err := accessReconciler.SetupWithManager(mgr, opts); err != nil {
		return err
	}
	sh.stores, sh.namespaces, sh.schedule = stores, namespaces, schedule
	sh.patchers = append(sh.patchers, storeReconciler.status, bucketReconciler.status, accessReconciler.status)
	for _, p := range sh.patchers {
		// Each forgets a status write once the cache shows it.
		if err := p.FollowCache(ctx, mgr.GetCache()); err != nil {
			return err
		}
	}
	if opts.StorageSweepInterval > 0 {
		// Keys and grants of no live BucketAccess, whatever became of its finalizer.
		sh.sweeper = &Sweeper{
			Interval: opts.StorageSweepInterval, client: mgr.GetClient(), cache: mgr.GetCache(),
			stores: stores, recorder: mgr.GetEventRecorder("storage-sweep"), storeChecks: storeEvents,
		}
		if err := mgr.Add(sh.sweeper); err != nil {
			return err
		}
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
