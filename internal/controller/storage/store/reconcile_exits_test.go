package store

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/apierr"
	"github.com/trellis-dev/trellis/internal/controller/storage/storagetest"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/s3"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// The ObjectStore reconcile, driven through every exit: a fake API server
// (testenv.Fake) and a fake store. Each row names the exit,
// and checks the result, the error, the status written (Ready's reason,
// and how many status writes) and the Events.

// fixture is a fake API server and a fake store.
type fixture struct {
	api *testenv.Fake
	s3  *storagetest.FakeS3
	rec *events.FakeRecorder
	// clients are the stores' clients, kept across the row's reconciles
	// as the manager keeps them.
	clients *stores.Clients
	// conflicts is how many conflicts the last reconcile counted.
	conflicts float64
}

func newFixture(objs ...client.Object) *fixture {
	f := &fixture{api: storagetest.NewFake(objs...), s3: &storagetest.FakeS3{}, rec: events.NewFakeRecorder(50)}
	// The stores' Secrets are read as the manager reads them, past the cache.
	f.clients = stores.NewClients(f.api.APIReader, storagetest.ManagerNS, stores.Backends{
		S3:       func(s3.Config) (s3.Client, error) { return f.s3, nil },
		Accounts: func(s3.Config, *storagev1.ObjectStore) (s3.Accounts, error) { return &storagetest.FakeAccounts{}, nil },
	})
	return f
}

// reconciler is the ObjectStore reconciler on the fixture.
func (f *fixture) reconciler() *ObjectStoreReconciler {
	return New(f.api.Client, f.rec, f.clients, nil, nil, false)
}

// connect makes the store's client, as an earlier reconcile would have.
func (f *fixture) connect(g Gomega, store *storagev1.ObjectStore) {
	_, err := f.clients.Client(context.Background(), store)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(f.clients.Holds(store.Name)).To(BeTrue())
}

// events returns "<type> <reason>" of each Event raised, in order.
func (f *fixture) events() []string { return testenv.EventReasons(f.rec) }

// bucketIn is a StorageBucket in store.
func bucketIn(store string) *storagev1.StorageBucket {
	return &storagev1.StorageBucket{
		ObjectMeta: metav1.ObjectMeta{Namespace: storagetest.NS, Name: "assets", UID: "uid-bucket", Generation: 1},
		Spec:       storagev1.StorageBucketSpec{StoreRef: storagev1.StoreReference{Name: store}},
	}
}

// accessIn is a BucketAccess with accounts in store.
func accessIn(store string) *storagev1.BucketAccess {
	return &storagev1.BucketAccess{
		ObjectMeta: metav1.ObjectMeta{Namespace: storagetest.NS, Name: "app", UID: "uid-access", Generation: 1},
		Spec:       storagev1.BucketAccessSpec{BucketRef: storagev1.BucketReference{Name: "assets"}},
		Status:     storagev1.BucketAccessStatus{StoreName: store},
	}
}

func TestObjectStoreReconcileExits(t *testing.T) {
	cases := map[string]struct {
		store *storagev1.ObjectStore // nil: none
		world []client.Object
		setup func(*fixture)
		want  storagetest.Exit
		check func(Gomega, *fixture, *storagev1.ObjectStore)
	}{
		"not found: nothing to do, its metrics and client forgotten": {
			world: []client.Object{storagetest.StoreCredentials()},
			setup: func(f *fixture) {
				stores.Up.WithLabelValues(storagetest.Store).Set(1)
				f.connect(NewWithT(t), storagetest.ReadyStore(true))
			},
			want: storagetest.Exit{Gone: true},
			check: func(g Gomega, f *fixture, _ *storagev1.ObjectStore) {
				g.Expect(stores.Up.DeleteLabelValues(storagetest.Store)).To(BeFalse(), "the series was dropped")
				g.Expect(f.clients.Holds(storagetest.Store)).To(BeFalse(), "the client was dropped")
			},
		},
		"reading the ObjectStore fails: returned, nothing written, its metrics and client kept": {
			store: storagetest.ReadyStore(true), world: []client.Object{storagetest.StoreCredentials()},
			setup: func(f *fixture) {
				stores.Up.WithLabelValues(storagetest.Store).Set(1)
				f.connect(NewWithT(t), storagetest.ReadyStore(true))
				f.api.Fail(testenv.Get, "ObjectStore", storagetest.ErrUnavailable)
			},
			want: storagetest.Exit{Err: apierr.Transient, Ready: ReasonReachable},
			check: func(g Gomega, f *fixture, _ *storagev1.ObjectStore) {
				g.Expect(f.api.Writes()).To(BeEmpty())
				g.Expect(stores.Up.DeleteLabelValues(storagetest.Store)).To(BeTrue(), "a read that failed is no deletion")
				g.Expect(f.clients.Holds(storagetest.Store)).To(BeTrue(), "a read that failed is no deletion")
			},
		},
		"new: finalizer, then checked and Reachable": {
			store: func() *storagev1.ObjectStore {
				s := storagetest.NewStore(storagetest.Store)
				s.Spec.Type = storagev1.StoreTypeVersitygw
				return s
			}(),
			world: []client.Object{storagetest.StoreCredentials()},
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: storeCheckInterval}, Ready: ReasonReachable, StatusWrites: 1,
				Events: []string{"Normal Reachable"}},
			check: func(g Gomega, f *fixture, s *storagev1.ObjectStore) {
				g.Expect(s.Finalizers).To(ConsistOf(stores.StoreFinalizer))
				g.Expect(f.s3.Calls).To(Equal([]string{"Ping"}))
			},
		},
		"checked again, nothing changed: nothing written": {
			store: storagetest.ReadyStore(true), world: []client.Object{storagetest.StoreCredentials()},
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: storeCheckInterval}, Ready: ReasonReachable},
		},
		"a selector that cannot be used: Stalled, nothing sent": {
			store: func() *storagev1.ObjectStore {
				s := storagetest.ReadyStore(true)
				s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Near"}}}
				return s
			}(),
			world: []client.Object{storagetest.StoreCredentials()},
			want: storagetest.Exit{Ready: ReasonInvalidSelector, Also: conditions.Stalled, StatusWrites: 1,
				Events: []string{"Warning InvalidSelector"}},
			check: func(g Gomega, f *fixture, _ *storagev1.ObjectStore) { g.Expect(f.s3.Calls).To(BeEmpty()) },
		},
		"the store does not answer: Reconciling, checked again on a back-off": {
			store: storagetest.ReadyStore(true), world: []client.Object{storagetest.StoreCredentials()},
			setup: func(f *fixture) { f.s3.PingErr = storagetest.ErrDown },
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: storeBackoffBase}, Ready: string(s3.ReasonStoreUnreachable), Also: conditions.Reconciling,
				StatusWrites: 1, Events: []string{"Warning StoreUnreachable"}},
		},
		"the status write conflicts: again at once, no error, nothing written": {
			store: storagetest.ReadyStore(true), world: []client.Object{storagetest.StoreCredentials()},
			setup: func(f *fixture) {
				f.s3.PingErr = storagetest.ErrDown
				f.api.Fail(testenv.Status, "ObjectStore", storagetest.ErrConflict)
			},
			want: storagetest.Exit{Err: apierr.Conflict, Ready: ReasonReachable},
		},
		"the store refuses the keys: Stalled": {
			store: storagetest.ReadyStore(true), world: []client.Object{storagetest.StoreCredentials()},
			setup: func(f *fixture) { f.s3.PingErr = storagetest.ErrDenied },
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: storeBackoffBase}, Ready: string(s3.ReasonAccessDenied), Also: conditions.Stalled,
				StatusWrites: 1, Events: []string{"Warning AccessDenied"}},
		},
		"no credentials Secret: Stalled, nothing sent": {
			store: storagetest.ReadyStore(true),
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: storeBackoffBase}, Ready: string(s3.ReasonCredentialsMissing), Also: conditions.Stalled,
				StatusWrites: 1, Events: []string{"Warning CredentialsMissing"}},
			check: func(g Gomega, f *fixture, _ *storagev1.ObjectStore) { g.Expect(f.s3.Calls).To(BeEmpty()) },
		},
		"the finalizer patch conflicts: retried at once, no status": {
			store: storagetest.NewStore(storagetest.Store), world: []client.Object{storagetest.StoreCredentials()},
			setup: func(f *fixture) { f.api.Fail(testenv.Patch, "ObjectStore", storagetest.ErrConflict) },
			want:  storagetest.Exit{Err: apierr.Conflict},
		},
		"the finalizer patch fails: ReconcileError": {
			store: storagetest.NewStore(storagetest.Store), world: []client.Object{storagetest.StoreCredentials()},
			setup: func(f *fixture) { f.api.Fail(testenv.Patch, "ObjectStore", storagetest.ErrUnavailable) },
			want: storagetest.Exit{Err: apierr.Transient, Ready: conditions.ReasonReconcileError, Also: conditions.Reconciling, StatusWrites: 1,
				Events: []string{"Warning ReconcileError"}},
		},
		"the status write fails: the error is returned": {
			store: storagetest.NewStore(storagetest.Store), world: []client.Object{storagetest.StoreCredentials()},
			setup: func(f *fixture) { f.api.Fail(testenv.Status, "ObjectStore", storagetest.ErrUnavailable) },
			want:  storagetest.Exit{Err: apierr.Transient},
		},
		"deleted while a bucket uses it: InUse, the finalizer stays": {
			store: storagetest.Deleting(storagetest.ReadyStore(true)).(*storagev1.ObjectStore), world: []client.Object{bucketIn(storagetest.Store)},
			want: storagetest.Exit{Ready: stores.ReasonInUse, Also: conditions.Stalled, StatusWrites: 1, Events: []string{"Warning InUse"}},
			check: func(g Gomega, _ *fixture, s *storagev1.ObjectStore) {
				g.Expect(s.Finalizers).To(ConsistOf(stores.StoreFinalizer))
				g.Expect(conditions.Get(s.Status.Conditions, conditions.Ready).Message).To(ContainSubstring("team/assets"))
			},
		},
		"deleted while an access has accounts in it: InUse": {
			store: storagetest.Deleting(storagetest.ReadyStore(true)).(*storagev1.ObjectStore), world: []client.Object{accessIn(storagetest.Store)},
			want: storagetest.Exit{Ready: stores.ReasonInUse, Also: conditions.Stalled, StatusWrites: 1, Events: []string{"Warning InUse"}},
		},
		"deleted, nothing uses it: the finalizer goes, no status": {
			store: storagetest.Deleting(storagetest.ReadyStore(true)).(*storagev1.ObjectStore),
			want:  storagetest.Exit{Gone: true},
			check: func(g Gomega, f *fixture, _ *storagev1.ObjectStore) {
				g.Expect(f.api.Writes()).To(Equal([]string{"patch ObjectStore"}))
			},
		},
		"deleted, listing its buckets fails: ReconcileError": {
			store: storagetest.Deleting(storagetest.ReadyStore(true)).(*storagev1.ObjectStore),
			setup: func(f *fixture) { f.api.Fail(testenv.List, "StorageBucket", storagetest.ErrUnavailable) },
			want: storagetest.Exit{Err: apierr.Transient, Ready: conditions.ReasonReconcileError, Also: conditions.Reconciling, StatusWrites: 1,
				Events: []string{"Warning ReconcileError"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			world := tc.world
			obj := storagetest.NewStore(storagetest.Store)
			if tc.store != nil {
				world = append(world, tc.store)
				obj = tc.store.DeepCopy()
			}
			f := newFixture(world...)
			if tc.setup != nil {
				tc.setup(f)
			}
			before := storagetest.Conflicts(g, storeController)
			res, err := f.reconciler().Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Name: storagetest.Store}})
			f.conflicts = storagetest.Conflicts(g, storeController) - before
			tc.want.Check(g, storagetest.Got{Result: res, Err: err, API: f.api, Events: f.events(), Conflicts: f.conflicts}, obj, func() []metav1.Condition { return obj.Status.Conditions })
			if tc.check != nil {
				tc.check(g, f, obj)
			}
		})
	}
}
