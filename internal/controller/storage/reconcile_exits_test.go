package storage

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/apierr"
	"github.com/trellis-dev/trellis/internal/controller/children"
	"github.com/trellis-dev/trellis/internal/controller/status"
	"github.com/trellis-dev/trellis/internal/controller/storage/storagetest"
	"github.com/trellis-dev/trellis/internal/controller/storage/store"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/s3"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// The StorageBucket and BucketAccess reconciles, driven through every
// exit: a fake API server (testenv.Fake: controller-runtime's fake client,
// with the errors of a row injected) and a fake store (storagetest.FakeS3,
// storagetest.FakeAccounts). Each row
// names the exit, and checks the result, the error, the status written
// (Ready's reason, and how many status writes) and the Events.

const (
	rtStore       = storagetest.Store
	rtStoreUID    = storagetest.StoreUID
	testManagerNS = storagetest.ManagerNS
	openTo        = storagetest.OpenTo
	rtAccess      = "app"
	rtSecret      = "app-s3"
)

var (
	// Errors the fake API server answers with.
	errQuota   = apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, rtSecret, errors.New("exceeded quota: count/secrets"))
	errInvalid = apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, rtSecret, field.ErrorList{field.Invalid(field.NewPath("metadata", "labels"), "x", "refused by policy")})
)

// fixture is a fake API server (testenv.Fake) and a fake store.
type fixture struct {
	api *testenv.Fake
	// c is the manager's client of the fake API server (cache reads).
	c        client.WithWatch
	s3       *storagetest.FakeS3
	accounts *storagetest.FakeAccounts
	rec      *events.FakeRecorder
	clock    *testClock
	schedule *Schedule
	guards   *publicAccessGuards
	// accessStatus is the status patcher of the last accessReconciler.
	accessStatus *status.Patcher[*storagev1.BucketAccess, storagev1.BucketAccessStatus]
	// conflicts is how many conflicts the last reconcile counted (at least:
	// the manager of the envtest suite counts under the same names).
	conflicts float64
	// storeChecks and accessEvents receive what the reconciles send to
	// the ObjectStore and BucketAccess controllers.
	storeChecks  chan event.TypedGenericEvent[*storagev1.ObjectStore]
	accessEvents chan event.TypedGenericEvent[*storagev1.BucketAccess]
}

func newFixture(objs ...client.Object) *fixture {
	f := &fixture{
		s3: &storagetest.FakeS3{}, accounts: &storagetest.FakeAccounts{}, rec: events.NewFakeRecorder(50), clock: newTestClock(),
		storeChecks:  make(chan event.TypedGenericEvent[*storagev1.ObjectStore], 10),
		accessEvents: make(chan event.TypedGenericEvent[*storagev1.BucketAccess], 10),
	}
	f.schedule = newTestSchedule(f.clock)
	f.guards = newPublicAccessGuards()
	f.api = storagetest.NewFake(objs...)
	f.c = f.api.Client
	return f
}

// stores reads the stores' Secrets as the manager does, past the cache.
func (f *fixture) stores() *stores.Clients {
	return stores.NewClients(f.api.APIReader, testManagerNS, stores.Backends{
		S3:       func(s3.Config) (s3.Client, error) { return f.s3, nil },
		Accounts: func(s3.Config, string) (s3.Accounts, error) { return f.accounts, nil },
	})
}

func (f *fixture) bucketReconciler() *BucketReconciler {
	return &BucketReconciler{
		client: f.c, recorder: f.rec, stores: f.stores(), schedule: f.schedule, namespaces: stores.NewNamespaceLabels(f.api.APIReader), guards: f.guards,
		storeChecks: f.storeChecks, accessEvents: f.accessEvents,
		status: status.NewPatcher(f.c, f.rec, func(b *storagev1.StorageBucket) *storagev1.StorageBucketStatus { return &b.Status }, bucketStatusEvents...),
	}
}

func (f *fixture) accessReconciler() *AccessReconciler {
	f.accessStatus = status.NewPatcher(f.c, f.rec, func(a *storagev1.BucketAccess) *storagev1.BucketAccessStatus { return &a.Status }, accessStatusEvents...)
	return &AccessReconciler{
		client: f.c, recorder: f.rec, children: children.Clients{Cached: f.c, Uncached: f.api.APIReader}, stores: f.stores(),
		namespaces: stores.NewNamespaceLabels(f.api.APIReader), storeChecks: f.storeChecks, now: f.clock.now,
		status: f.accessStatus,
	}
}

// events returns "<type> <reason>" of each Event raised, in order.
func (f *fixture) events() []string { return testenv.EventReasons(f.rec) }

// storeChecked reports whether a check of the store was asked for.
func (f *fixture) storeChecked() bool {
	select {
	case <-f.storeChecks:
		return true
	default:
		return false
	}
}

// read reads obj back from the fake API server (no failure injected);
// false when it is gone.
func (f *fixture) read(g Gomega, obj client.Object) bool { return storagetest.Read(g, f.api, obj) }

// checkWait is the wait for a bucket's next check: on its phase, at least
// half an interval after a check.
var checkWait = storagetest.Requeue{UpTo: 2 * defaultInterval}

// The world of the rows.

func openNamespace() *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNS, Labels: map[string]string{openTo: rtStore}}}
}

// rtBucket is StorageBucket team/assets (bucket team-assets), with its finalizer.
func rtBucket() *storagev1.StorageBucket {
	return &storagev1.StorageBucket{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "assets", UID: testUID, Generation: 1, Finalizers: []string{stores.BucketFinalizer}},
		Spec:       storagev1.StorageBucketSpec{StoreRef: storagev1.StoreReference{Name: rtStore}},
	}
}

// claimedBucket is rtBucket once its bucket is created, tagged and healthy.
func claimedBucket() *storagev1.StorageBucket {
	b := rtBucket()
	b.Status = storagev1.StorageBucketStatus{ObservedGeneration: 1, BucketName: testBucket, Claim: storagev1.BucketClaimed}
	conditions.Summarize(&b.Status.Conditions, 1, healthy(testBucket, rtStore))
	return b
}

func rtAccessObj() *storagev1.BucketAccess {
	return &storagev1.BucketAccess{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: rtAccess, UID: "uid-access", Generation: 1, Finalizers: []string{stores.AccessFinalizer}},
		Spec: storagev1.BucketAccessSpec{BucketRef: storagev1.BucketReference{Name: "assets"}, Mode: storagev1.AccessReadWrite,
			SecretName: rtSecret, KeyVersion: 1},
	}
}

// grantedAccess is rtAccessObj with its key issued (as recorded in status).
func grantedAccess() *storagev1.BucketAccess {
	a := rtAccessObj()
	a.Status = storagev1.BucketAccessStatus{ObservedGeneration: 1, StoreName: rtStore, BucketName: testBucket,
		AccessKeyID: stores.AccessKeyID(rtStoreUID, a.UID, 1), KeyVersion: 1}
	conditions.Summarize(&a.Status.Conditions, 1, conditions.Summary{Progress: conditions.Done, Reason: ReasonGranted, Message: "granted"})
	return a
}

// accessSecret is the Secret of rtAccessObj, controlled by it.
func accessSecret() *corev1.Secret {
	a := rtAccessObj()
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: rtSecret, UID: "uid-secret",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: storagev1.GroupVersion.String(), Kind: "BucketAccess", Name: a.Name, UID: a.UID, Controller: ptr.To(true)}}}}
}

func TestStorageBucketReconcileExits(t *testing.T) {
	policy := `{"Version":"2012-10-17","Statement":[{"Sid":"Public","Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::team-assets/*"}]}`
	withPolicy := func(b *storagev1.StorageBucket) *storagev1.StorageBucket { b.Spec.Policy = policy; return b }
	granting := func(principals string) func(*storagev1.StorageBucket) *storagev1.StorageBucket {
		return func(b *storagev1.StorageBucket) *storagev1.StorageBucket {
			b.Spec.Policy = `{"Statement":[{"Effect":"Allow","Principal":{"AWS":` + principals + `},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-assets/*"}]}`
			return b
		}
	}
	// publicStore lets the namespace grant to anyone.
	publicStore := func() *storagev1.ObjectStore {
		s := storagetest.ReadyStore(true)
		s.Spec.PublicAccess = storagev1.PublicAccessAllowed
		s.Spec.PublicAccessNamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{openTo: rtStore}}
		return s
	}
	// theirAccess is a BucketAccess of another namespace, granted in the same store.
	theirAccess := func() *storagev1.BucketAccess {
		a := grantedAccess()
		a.Namespace, a.UID = otherNS, "uid-their-access"
		a.Status.AccessKeyID = stores.AccessKeyID(rtStoreUID, a.UID, 1)
		return a
	}
	refusedUntouched := func(want string) func(Gomega, *fixture, *storagev1.StorageBucket) {
		return func(g Gomega, f *fixture, b *storagev1.StorageBucket) {
			g.Expect(f.s3.Calls).To(Equal([]string{"BucketExists", "Policy"}), "the policy in the store is read, and with nothing to take out, not written")
			applied := conditions.Get(b.Status.Conditions, conditions.SettingsApplied)
			g.Expect(applied.Reason).To(Equal(ReasonPolicyRefused))
			g.Expect(applied.Message).To(ContainSubstring(want))
			g.Expect(b.Status.Claim).To(Equal(storagev1.BucketClaimed), "the bucket itself is fine")
		}
	}
	deletePolicy := func(b *storagev1.StorageBucket) *storagev1.StorageBucket {
		b.Spec.DeletionPolicy = storagev1.DeletionDelete
		return b
	}
	checkNow := func(f *fixture) { f.schedule.CheckNow(types.NamespacedName{Namespace: testNS, Name: "assets"}) }
	cases := map[string]struct {
		bucket *storagev1.StorageBucket // nil: none
		world  []client.Object          // beside the namespace and the credentials
		closed bool                     // the store is not open to the namespace
		setup  func(*fixture)
		want   storagetest.Exit
		check  func(Gomega, *fixture, *storagev1.StorageBucket)
	}{
		"not found: nothing to do, its metrics, schedule and guard forgotten": {
			setup: func(f *fixture) { knownBucket(f, claimedBucket()) },
			want:  storagetest.Exit{Gone: true},
			check: func(g Gomega, f *fixture, b *storagev1.StorageBucket) {
				g.Expect(bucketKnown(f, b)).To(Equal([]bool{false, false, false}), "metrics, schedule, guard")
			},
		},
		"reading the StorageBucket fails: returned, nothing written, its metrics, schedule and guard kept": {
			bucket: claimedBucket(), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) {
				knownBucket(f, claimedBucket())
				f.api.Fail(testenv.Get, "StorageBucket", storagetest.ErrUnavailable)
			},
			want: storagetest.Exit{Err: apierr.Transient, Ready: ReasonHealthy},
			check: func(g Gomega, f *fixture, b *storagev1.StorageBucket) {
				g.Expect(f.api.Writes()).To(BeEmpty())
				g.Expect(bucketKnown(f, b)).To(Equal([]bool{true, true, true}), "a read that failed is no deletion: metrics, schedule, guard")
			},
		},
		// Admitted with its finalizer (config/admission): two status writes,
		// the intent and Healthy, and one Event, not "Healthy" besides.
		"new: the intent, then created, tagged and Healthy": {
			bucket: rtBucket(), world: []client.Object{storagetest.ReadyStore(true)},
			want: storagetest.Exit{Requeue: checkWait, Ready: ReasonHealthy, StatusWrites: 2,
				Events: []string{"Normal BucketCreated"}},
			check: func(g Gomega, f *fixture, b *storagev1.StorageBucket) {
				g.Expect(f.s3.Calls).To(Equal([]string{"BucketExists", "CreateBucket", "SetOwner"}))
				g.Expect(b.Status.Claim).To(Equal(storagev1.BucketClaimed))
				g.Expect(b.Status.BucketName).To(Equal(testBucket))
				g.Expect(f.api.Writes()).To(Equal([]string{"status StorageBucket", "status StorageBucket"}), "no finalizer patch")
			},
		},
		"new, without its finalizer (no admission policy): the finalizer first": {
			bucket: func() *storagev1.StorageBucket { b := rtBucket(); b.Finalizers = nil; return b }(), world: []client.Object{storagetest.ReadyStore(true)},
			want: storagetest.Exit{Requeue: checkWait, Ready: ReasonHealthy, StatusWrites: 2,
				Events: []string{"Normal BucketCreated"}},
			check: func(g Gomega, f *fixture, b *storagev1.StorageBucket) {
				g.Expect(f.api.Writes()).To(Equal([]string{"patch StorageBucket", "status StorageBucket", "status StorageBucket"}))
				g.Expect(b.Finalizers).To(ConsistOf(stores.BucketFinalizer))
			},
		},
		"settled, no check due: nothing sent, nothing written": {
			bucket: claimedBucket(), world: []client.Object{storagetest.ReadyStore(true)},
			want: storagetest.Exit{Requeue: checkWait, Ready: ReasonHealthy},
			check: func(g Gomega, f *fixture, _ *storagev1.StorageBucket) {
				g.Expect(f.s3.Calls).To(BeEmpty())
				g.Expect(f.api.Writes()).To(BeEmpty())
			},
		},
		"settled, check due: one HeadBucket, nothing written": {
			bucket: claimedBucket(), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) {
				checkNow(f)
				f.s3.Exists = true
				f.guards.checked(types.NamespacedName{Namespace: testNS, Name: "assets"}, keyOf(claimedBucket(), storagetest.ReadyStore(true), false))
			},
			want: storagetest.Exit{Requeue: checkWait, Ready: ReasonHealthy},
			check: func(g Gomega, f *fixture, _ *storagev1.StorageBucket) {
				g.Expect(f.s3.Calls).To(Equal([]string{"BucketExists"}))
				g.Expect(f.api.Writes()).To(BeEmpty())
			},
		},
		"settled, first check since the start, where the store blocks public access: the policy read once": {
			bucket: claimedBucket(), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) { checkNow(f); f.s3.Exists = true },
			want:  storagetest.Exit{Requeue: checkWait, Ready: ReasonHealthy},
			check: func(g Gomega, f *fixture, b *storagev1.StorageBucket) {
				g.Expect(f.s3.Calls).To(Equal([]string{"BucketExists", "Policy"}))
				g.Expect(f.api.Writes()).To(BeEmpty())
				g.Expect(f.guards.due(client.ObjectKeyFromObject(b), keyOf(b, storagetest.ReadyStore(true), false))).To(BeFalse(), "not read again")
			},
		},
		"settled, no spec.policy, a public statement in the store's policy: taken out, the grants kept": {
			bucket: claimedBucket(), world: []client.Object{storagetest.ReadyStore(true), grantedAccess()},
			setup: func(f *fixture) {
				checkNow(f)
				f.s3.Exists = true
				a := grantedAccess()
				grant := grantOf(a.UID, string(a.Spec.Mode), a.Status.AccessKeyID)
				var err error
				if f.s3.PolicyDoc, err = s3.WithGrant(policy, testBucket, grant); err != nil {
					panic(err)
				}
			},
			want: storagetest.Exit{Requeue: checkWait, Ready: ReasonHealthy, Events: []string{"Warning PublicAccessRemoved"}},
			check: func(g Gomega, f *fixture, _ *storagev1.StorageBucket) {
				g.Expect(f.s3.Calls).To(Equal([]string{"BucketExists", "Policy", "SetPolicy"}))
				g.Expect(f.s3.PolicyDoc).NotTo(ContainSubstring(`"Public"`))
				g.Expect(f.s3.PolicyDoc).To(ContainSubstring(s3.GrantSidPrefix + stores.GrantID(grantedAccess().UID)))
			},
		},
		"settled, no spec.policy, the store allows the namespace anything: the policy not read": {
			bucket: claimedBucket(), world: []client.Object{publicStore()},
			setup: func(f *fixture) { checkNow(f); f.s3.Exists = true; f.s3.PolicyDoc = policy },
			want:  storagetest.Exit{Requeue: checkWait, Ready: ReasonHealthy},
			check: func(g Gomega, f *fixture, _ *storagev1.StorageBucket) {
				g.Expect(f.s3.Calls).To(Equal([]string{"BucketExists"}))
			},
		},
		"settled, no check due, the store's public access changed since the last check: checked now": {
			bucket: claimedBucket(), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) {
				f.s3.Exists = true
				f.guards.checked(types.NamespacedName{Namespace: testNS, Name: "assets"}, keyOf(claimedBucket(), publicStore(), true))
			},
			want: storagetest.Exit{Requeue: checkWait, Ready: ReasonHealthy},
			check: func(g Gomega, f *fixture, _ *storagev1.StorageBucket) {
				g.Expect(f.s3.Calls).To(Equal([]string{"BucketExists", "Policy"}))
			},
		},
		"a public policy refused where the store blocks it, the store's policy already public: taken out": {
			bucket: withPolicy(claimedBucket()), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) { checkNow(f); f.s3.Exists = true; f.s3.PolicyDoc = policy },
			want: storagetest.Exit{Requeue: checkWait, Ready: ReasonPolicyRefused, Also: conditions.Stalled, StatusWrites: 1,
				Events: []string{"Warning PolicyRefused", "Warning PublicAccessRemoved"}},
			check: func(g Gomega, f *fixture, b *storagev1.StorageBucket) {
				g.Expect(f.s3.Calls).To(Equal([]string{"BucketExists", "Policy", "SetPolicy"}))
				g.Expect(f.s3.PolicyDoc).To(BeEmpty())
				g.Expect(conditions.Get(b.Status.Conditions, conditions.Ready).Message).To(ContainSubstring("that grant beyond that are taken out"))
			},
		},
		"the finalizer patch conflicts: retried at once, no status": {
			bucket: func() *storagev1.StorageBucket { b := rtBucket(); b.Finalizers = nil; return b }(), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) { f.api.Fail(testenv.Patch, "StorageBucket", storagetest.ErrConflict) },
			want:  storagetest.Exit{Err: apierr.Conflict},
		},
		"the finalizer patch fails: ReconcileError": {
			bucket: func() *storagev1.StorageBucket { b := rtBucket(); b.Finalizers = nil; return b }(), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) { f.api.Fail(testenv.Patch, "StorageBucket", storagetest.ErrUnavailable) },
			want: storagetest.Exit{Err: apierr.Transient, Ready: conditions.ReasonReconcileError, Also: conditions.Reconciling, StatusWrites: 1,
				Events: []string{"Warning ReconcileError"}},
		},
		"listing the other claimants fails: ReconcileError, the claim kept": {
			bucket: claimedBucket(), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) { checkNow(f); f.api.Fail(testenv.List, "StorageBucket", storagetest.ErrUnavailable) },
			want: storagetest.Exit{Err: apierr.Transient, Ready: conditions.ReasonReconcileError, Also: conditions.Reconciling, StatusWrites: 1,
				Events: []string{"Warning ReconcileError"}},
			check: func(g Gomega, _ *fixture, b *storagev1.StorageBucket) {
				g.Expect(b.Status.Claim).To(Equal(storagev1.BucketClaimed))
			},
		},
		"another StorageBucket holds the bucket: Conflict, nothing sent": {
			bucket: rtBucket(),
			world: []client.Object{storagetest.ReadyStore(true), &storagev1.StorageBucket{
				ObjectMeta: metav1.ObjectMeta{Namespace: otherNS, Name: "first", UID: otherUID},
				Spec:       storagev1.StorageBucketSpec{StoreRef: storagev1.StoreReference{Name: rtStore}, BucketName: testBucket},
				Status:     storagev1.StorageBucketStatus{BucketName: testBucket, Claim: storagev1.BucketClaimed},
			}},
			want: storagetest.Exit{Requeue: checkWait, Ready: ReasonConflict, Also: conditions.Stalled, StatusWrites: 1,
				Events: []string{"Warning Conflict"}},
			check: func(g Gomega, f *fixture, b *storagev1.StorageBucket) {
				g.Expect(f.s3.Calls).To(BeEmpty())
				g.Expect(conditions.Get(b.Status.Conditions, conditions.Ready).Message).To(Equal("bucket team-assets is claimed by StorageBucket team-b/first"))
			},
		},
		"another StorageBucket holds the bucket and is being deleted: Conflict, saying what follows": {
			bucket: rtBucket(),
			world: []client.Object{storagetest.ReadyStore(true), &storagev1.StorageBucket{
				ObjectMeta: metav1.ObjectMeta{Namespace: otherNS, Name: "first", UID: otherUID,
					DeletionTimestamp: &metav1.Time{Time: time.Now()}, Finalizers: []string{stores.BucketFinalizer}},
				Spec:   storagev1.StorageBucketSpec{StoreRef: storagev1.StoreReference{Name: rtStore}, BucketName: testBucket},
				Status: storagev1.StorageBucketStatus{BucketName: testBucket, Claim: storagev1.BucketClaimed},
			}},
			want: storagetest.Exit{Requeue: checkWait, Ready: ReasonConflict, Also: conditions.Stalled, StatusWrites: 1,
				Events: []string{"Warning Conflict"}},
			check: func(g Gomega, f *fixture, b *storagev1.StorageBucket) {
				g.Expect(f.s3.Calls).To(BeEmpty())
				g.Expect(conditions.Get(b.Status.Conditions, conditions.Ready).Message).To(ContainSubstring("being deleted with deletionPolicy: Retain: the bucket stays, kept for namespace team-b"))
			},
		},
		"no such store: Stalled": {
			bucket: rtBucket(),
			want: storagetest.Exit{Requeue: checkWait, Ready: stores.ReasonStoreNotFound, Also: conditions.Stalled, StatusWrites: 1,
				Events: []string{"Warning StoreNotFound"}},
		},
		"the store is down: its state, no request": {
			bucket: rtBucket(), world: []client.Object{storagetest.ReadyStore(false)},
			want: storagetest.Exit{Requeue: checkWait, Ready: string(s3.ReasonStoreUnreachable), Also: conditions.Reconciling,
				StatusWrites: 1, Events: []string{"Warning StoreUnreachable"}},
			check: func(g Gomega, f *fixture, _ *storagev1.StorageBucket) { g.Expect(f.s3.Calls).To(BeEmpty()) },
		},
		"the store is not open to the namespace: Stalled, no request": {
			bucket: rtBucket(), world: []client.Object{storagetest.ReadyStore(true)}, closed: true,
			want: storagetest.Exit{Requeue: checkWait, Ready: stores.ReasonNamespaceNotAllowed, Also: conditions.Stalled, StatusWrites: 1,
				Events: []string{"Warning NamespaceNotAllowed"}},
			check: func(g Gomega, f *fixture, _ *storagev1.StorageBucket) { g.Expect(f.s3.Calls).To(BeEmpty()) },
		},
		"the store stops answering: Reconciling, and its controller is asked to check it": {
			bucket: claimedBucket(), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) { checkNow(f); f.s3.ExistsErr = storagetest.ErrDown },
			want: storagetest.Exit{Requeue: checkWait, Ready: string(s3.ReasonStoreUnreachable), Also: conditions.Reconciling,
				StatusWrites: 1, Events: []string{"Warning StoreUnreachable"}},
			check: func(g Gomega, f *fixture, _ *storagev1.StorageBucket) { g.Expect(f.storeChecked()).To(BeTrue()) },
		},
		"the intent cannot be written: nothing created": {
			bucket: rtBucket(), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) { f.api.Fail(testenv.Status, "StorageBucket", storagetest.ErrUnavailable) },
			want:  storagetest.Exit{Err: apierr.Transient},
			check: func(g Gomega, f *fixture, _ *storagev1.StorageBucket) {
				g.Expect(f.s3.Calls).To(Equal([]string{"BucketExists"}), "no CreateBucket")
			},
		},
		"policy written, then listing the accesses to tell fails: the check is recorded, ReconcileError": {
			bucket: withPolicy(claimedBucket()), world: []client.Object{publicStore()},
			setup: func(f *fixture) {
				checkNow(f)
				f.s3.Exists = true
				f.s3.OnSetPolicy = func() { f.api.Fail(testenv.List, "BucketAccess", storagetest.ErrUnavailable) }
			},
			want: storagetest.Exit{Err: apierr.Transient, Ready: conditions.ReasonReconcileError, Also: conditions.Reconciling, StatusWrites: 1,
				Events: []string{"Warning ReconcileError", "Normal BucketSettingsApplied"}},
			check: func(g Gomega, f *fixture, b *storagev1.StorageBucket) {
				g.Expect(f.s3.PolicyDoc).To(ContainSubstring("Public"))
				g.Expect(conditions.Get(b.Status.Conditions, conditions.SettingsApplied).Reason).To(Equal(ReasonApplied))
				g.Expect(b.Status.Claim).To(Equal(storagev1.BucketClaimed))
			},
		},
		"a public policy where the store blocks it: PolicyRefused, Stalled, nothing sent": {
			bucket: withPolicy(claimedBucket()), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) { checkNow(f); f.s3.Exists = true },
			want: storagetest.Exit{Requeue: checkWait, Ready: ReasonPolicyRefused, Also: conditions.Stalled, StatusWrites: 1,
				Events: []string{"Warning PolicyRefused"}},
			check: refusedUntouched(`Principal "*" is everyone`),
		},
		"a public policy where the store allows it, but not for this namespace: PolicyRefused": {
			bucket: withPolicy(claimedBucket()), world: []client.Object{func() client.Object {
				s := publicStore()
				s.Spec.PublicAccessNamespaceSelector.MatchLabels = map[string]string{"public": "yes"}
				return s
			}()},
			setup: func(f *fixture) { checkNow(f); f.s3.Exists = true },
			want: storagetest.Exit{Requeue: checkWait, Ready: ReasonPolicyRefused, Also: conditions.Stalled, StatusWrites: 1,
				Events: []string{"Warning PolicyRefused"}},
			check: refusedUntouched("its publicAccessNamespaceSelector selects, not " + testNS),
		},
		"a policy naming another namespace's key: PolicyRefused": {
			bucket: granting(`"` + stores.AccessKeyID(rtStoreUID, "uid-their-access", 1) + `"`)(claimedBucket()), world: []client.Object{storagetest.ReadyStore(true), theirAccess()},
			setup: func(f *fixture) { checkNow(f); f.s3.Exists = true },
			want: storagetest.Exit{Requeue: checkWait, Ready: ReasonPolicyRefused, Also: conditions.Stalled, StatusWrites: 1,
				Events: []string{"Warning PolicyRefused"}},
			check: refusedUntouched("is not a key of this namespace's BucketAccesses"),
		},
		"a policy naming the namespace's own keys: applied": {
			bucket: granting(`["` + stores.AccessKeyID(rtStoreUID, "uid-access", 1) + `"]`)(claimedBucket()), world: []client.Object{storagetest.ReadyStore(true), grantedAccess()},
			setup: func(f *fixture) { checkNow(f); f.s3.Exists = true },
			want:  storagetest.Exit{Requeue: checkWait, Ready: ReasonHealthy, StatusWrites: 1, Events: []string{"Normal BucketSettingsApplied"}},
			check: func(g Gomega, f *fixture, _ *storagev1.StorageBucket) {
				g.Expect(f.s3.Calls).To(ContainElement("SetPolicy"))
			},
		},
		"listing the keys before the policy fails: ReconcileError, nothing sent": {
			bucket: withPolicy(claimedBucket()), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) {
				checkNow(f)
				f.s3.Exists = true
				f.api.Fail(testenv.List, "BucketAccess", storagetest.ErrUnavailable)
			},
			want: storagetest.Exit{Err: apierr.Transient, Ready: conditions.ReasonReconcileError, Also: conditions.Reconciling, StatusWrites: 1,
				Events: []string{"Warning ReconcileError"}},
			check: func(g Gomega, f *fixture, b *storagev1.StorageBucket) {
				g.Expect(f.s3.Calls).To(BeEmpty(), "nothing asked of the store")
				g.Expect(b.Status.Claim).To(Equal(storagev1.BucketClaimed))
			},
		},
		"the live grants cannot be listed: the policy is not written, ReconcileError": {
			// Without them, every grant would look forged.
			bucket: withPolicy(claimedBucket()), world: []client.Object{publicStore()},
			setup: func(f *fixture) {
				checkNow(f)
				f.s3.Exists = true
				f.api.Fail(testenv.List, "BucketAccess", storagetest.ErrUnavailable)
			},
			want: storagetest.Exit{Requeue: checkWait, Ready: conditions.ReasonReconcileError, Also: conditions.Reconciling, StatusWrites: 1,
				Events: []string{"Warning ReconcileError"}},
			check: func(g Gomega, f *fixture, b *storagev1.StorageBucket) {
				g.Expect(f.s3.Calls).NotTo(ContainElement("SetPolicy"))
				g.Expect(f.s3.Calls).NotTo(ContainElement("Policy"), "not even read")
				g.Expect(conditions.Get(b.Status.Conditions, conditions.SettingsApplied).Reason).To(Equal(conditions.ReasonReconcileError))
			},
		},
		"policy written: its accesses are told": {
			bucket: withPolicy(claimedBucket()), world: []client.Object{publicStore(), grantedAccess()},
			setup: func(f *fixture) { checkNow(f); f.s3.Exists = true },
			want: storagetest.Exit{Requeue: checkWait, Ready: ReasonHealthy, StatusWrites: 1,
				Events: []string{"Normal BucketSettingsApplied"}},
			check: func(g Gomega, f *fixture, _ *storagev1.StorageBucket) { g.Expect(f.accessEvents).To(HaveLen(1)) },
		},
		"deleted while accesses use it: InUse, Stalled": {
			bucket: storagetest.Deleting(claimedBucket()).(*storagev1.StorageBucket), world: []client.Object{storagetest.ReadyStore(true), grantedAccess()},
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: 2 * time.Minute}, Ready: stores.ReasonInUse, Also: conditions.Stalled, StatusWrites: 1,
				Events: []string{"Warning InUse"}},
		},
		"deleted (Delete) holding objects: DeleteBlocked": {
			bucket: storagetest.Deleting(deletePolicy(claimedBucket())).(*storagev1.StorageBucket), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) { f.s3.Exists, f.s3.OwnerTag, f.s3.Objects = true, mine, 3 },
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: 2 * time.Minute}, Ready: ReasonDeleteBlocked, Also: conditions.Stalled, StatusWrites: 1,
				Events: []string{"Warning DeleteBlocked"}},
			check: func(g Gomega, f *fixture, _ *storagev1.StorageBucket) {
				g.Expect(f.s3.Calls).NotTo(ContainElement("DeleteBucket"))
			},
		},
		"deleted (Delete), empty: deleted, the finalizer goes, no status": {
			bucket: storagetest.Deleting(deletePolicy(claimedBucket())).(*storagev1.StorageBucket), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) { f.s3.Exists, f.s3.OwnerTag = true, mine },
			want:  storagetest.Exit{Gone: true, Events: []string{"Normal BucketDeleted"}},
			check: func(g Gomega, f *fixture, _ *storagev1.StorageBucket) {
				g.Expect(f.s3.Calls).To(ContainElement("DeleteBucket"))
				g.Expect(f.api.Writes()).To(Equal([]string{"patch StorageBucket"}))
			},
		},
		"deleted (Retain), the store is down: kept, with a Warning": {
			bucket: storagetest.Deleting(claimedBucket()).(*storagev1.StorageBucket), world: []client.Object{storagetest.ReadyStore(false)},
			want: storagetest.Exit{Gone: true, Events: []string{"Warning RetainedUntagged"}},
		},
		"deleted (Retain), reading the store fails: ReconcileError, the finalizer stays": {
			bucket: storagetest.Deleting(claimedBucket()).(*storagev1.StorageBucket), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) { f.api.Fail(testenv.Get, "ObjectStore", storagetest.ErrUnavailable) },
			want: storagetest.Exit{Err: apierr.Transient, Ready: conditions.ReasonReconcileError, Also: conditions.Reconciling, StatusWrites: 1,
				Events: []string{"Warning ReconcileError"}},
			check: func(g Gomega, _ *fixture, b *storagev1.StorageBucket) {
				g.Expect(b.Finalizers).To(ConsistOf(stores.BucketFinalizer))
			},
		},
		"deleted, the finalizer removal conflicts: retried at once, no status": {
			bucket: storagetest.Deleting(rtBucket()).(*storagev1.StorageBucket), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) { f.api.Fail(testenv.Patch, "StorageBucket", storagetest.ErrConflict) },
			want:  storagetest.Exit{Err: apierr.Conflict},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ns := openNamespace()
			if tc.closed {
				ns.Labels = nil
			}
			world := append([]client.Object{ns, storagetest.StoreCredentials()}, tc.world...)
			obj := rtBucket()
			if tc.bucket != nil {
				world = append(world, tc.bucket)
				obj = tc.bucket.DeepCopy()
			}
			f := newFixture(world...)
			if tc.setup != nil {
				tc.setup(f)
			}
			before := storagetest.Conflicts(g, bucketController)
			res, err := f.bucketReconciler().Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
			f.conflicts = storagetest.Conflicts(g, bucketController) - before
			tc.want.Check(g, storagetest.Got{Result: res, Err: err, API: f.api, Events: f.events(), Conflicts: f.conflicts}, obj, func() []metav1.Condition { return obj.Status.Conditions })
			if tc.check != nil {
				tc.check(g, f, obj)
			}
		})
	}
}

// knownBucket gives b what a checked bucket has in the manager: its metrics
// series, its next check on the schedule, and its public-access guard.
func knownBucket(f *fixture, b *storagev1.StorageBucket) {
	key := client.ObjectKeyFromObject(b)
	healthyGauge.WithLabelValues(key.Namespace, key.Name).Set(1)
	f.schedule.Checked(key, string(b.UID), defaultInterval)
	f.guards.checked(key, keyOf(b, storagetest.ReadyStore(true), false))
}

// bucketKnown says which of what knownBucket gave b is still there (metrics,
// schedule, guard), and drops its metrics series.
func bucketKnown(f *fixture, b *storagev1.StorageBucket) []bool {
	key := client.ObjectKeyFromObject(b)
	f.schedule.mu.Lock()
	_, scheduled := f.schedule.next[key]
	f.schedule.mu.Unlock()
	f.guards.mu.Lock()
	_, guarded := f.guards.last[key]
	f.guards.mu.Unlock()
	return []bool{healthyGauge.DeleteLabelValues(key.Namespace, key.Name), scheduled, guarded}
}

func TestBucketAccessReconcileExits(t *testing.T) {
	ownKey := func(a *storagev1.BucketAccess) string { return stores.AccessKeyID(rtStoreUID, a.UID, 1) }
	s3Store := func() *storagev1.ObjectStore {
		s := storagetest.ReadyStore(true)
		s.Spec.Type = storagev1.StoreTypeS3
		return s
	}
	noKey := func(g Gomega, _ *fixture, a *storagev1.BucketAccess) {
		g.Expect(a.Status.AccessKeyID).To(BeEmpty(), "no key on record the Secret does not hold")
		g.Expect(a.Status.StoreName).To(Equal(rtStore), "the target was put on record first")
	}
	cases := map[string]struct {
		access *storagev1.BucketAccess // nil: none
		world  []client.Object         // beside the namespace and the credentials
		// granted: reconciled once before, to Granted; its last status
		// write is remembered until the cache shows it.
		granted bool
		setup   func(*fixture)
		want    storagetest.Exit
		check   func(Gomega, *fixture, *storagev1.BucketAccess)
	}{
		"not found: nothing to do": {
			want: storagetest.Exit{Gone: true},
		},
		"reading the BucketAccess fails: returned, nothing written, its last status write remembered": {
			access: rtAccessObj(), world: []client.Object{storagetest.ReadyStore(true), claimedBucket()}, granted: true,
			setup: func(f *fixture) { f.api.Fail(testenv.Get, "BucketAccess", storagetest.ErrUnavailable) },
			want:  storagetest.Exit{Err: apierr.Transient, Ready: ReasonGranted},
			check: func(g Gomega, f *fixture, _ *storagev1.BucketAccess) {
				g.Expect(f.api.Writes()).To(BeEmpty())
				g.Expect(f.accessStatus.Remembered()).To(Equal(1), "a read that failed is no deletion")
			},
		},
		"new: the target, then a key issued, granted and in its Secret": {
			access: rtAccessObj(), world: []client.Object{storagetest.ReadyStore(true), claimedBucket()},
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: accessVerifyInterval}, Ready: ReasonGranted, StatusWrites: 2,
				Events: []string{"Normal Granted", "Normal KeyIssued"}},
			check: func(g Gomega, f *fixture, a *storagev1.BucketAccess) {
				g.Expect(a.Status.AccessKeyID).To(Equal(ownKey(a)))
				g.Expect(f.accounts.Accounts).To(HaveKey(ownKey(a)))
				secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: rtSecret}}
				g.Expect(f.read(g, secret)).To(BeTrue())
				g.Expect(string(secret.Data[envAccessKeyID])).To(Equal(ownKey(a)))
				g.Expect(f.api.Writes()).To(Equal([]string{"status BucketAccess", "apply Secret", "status BucketAccess"}))
			},
		},
		// Where the admission policy is not installed (Kubernetes below 1.36).
		"new, without its finalizer (no admission policy): the finalizer first, then the key": {
			access: func() *storagev1.BucketAccess { a := rtAccessObj(); a.Finalizers = nil; return a }(),
			world:  []client.Object{storagetest.ReadyStore(true), claimedBucket()},
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: accessVerifyInterval}, Ready: ReasonGranted, StatusWrites: 2,
				Events: []string{"Normal Granted", "Normal KeyIssued"}},
			check: func(g Gomega, f *fixture, a *storagev1.BucketAccess) {
				g.Expect(f.api.Writes()).To(Equal([]string{"patch BucketAccess", "status BucketAccess", "apply Secret", "status BucketAccess"}))
				g.Expect(a.Finalizers).To(ConsistOf(stores.AccessFinalizer))
				g.Expect(f.accounts.Accounts).To(HaveKey(ownKey(a)))
			},
		},
		"a forged grant in the bucket's policy: taken out with the grant, a Warning on the StorageBucket": {
			access: rtAccessObj(), world: []client.Object{storagetest.ReadyStore(true), claimedBucket()},
			setup: func(f *fixture) {
				f.s3.PolicyDoc, _ = s3.WithGrant("", testBucket, s3.Grant{ID: "forged", Principals: []string{"FORGEDKEY0000001"}, Mode: s3.ReadWrite})
			},
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: accessVerifyInterval}, Ready: ReasonGranted, StatusWrites: 2,
				Events: []string{"Warning GrantRemoved", "Normal Granted", "Normal KeyIssued"}},
			check: func(g Gomega, f *fixture, a *storagev1.BucketAccess) {
				g.Expect(f.s3.PolicyDoc).NotTo(ContainSubstring("FORGEDKEY"))
				g.Expect(f.s3.PolicyDoc).To(ContainSubstring(ownKey(a)))
			},
		},
		"no such StorageBucket: Stalled": {
			access: rtAccessObj(), world: []client.Object{storagetest.ReadyStore(true)},
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: time.Minute}, Ready: ReasonBucketNotFound, Also: conditions.Stalled, StatusWrites: 1,
				Events: []string{"Warning BucketNotFound"}},
		},
		"the bucket is not claimed yet: waiting": {
			access: rtAccessObj(), world: []client.Object{storagetest.ReadyStore(true), rtBucket()},
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: time.Minute}, Ready: ReasonBucketNotReady, Also: conditions.Reconciling, StatusWrites: 1},
		},
		"a store without accounts: Stalled": {
			access: rtAccessObj(), world: []client.Object{s3Store(), claimedBucket()},
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: time.Minute}, Ready: ReasonAccessNotSupported, Also: conditions.Stalled, StatusWrites: 1,
				Events: []string{"Warning AccessNotSupported"}},
		},
		"the Secret is someone else's: SecretConflict, nothing made in the store": {
			access: rtAccessObj(), world: []client.Object{storagetest.ReadyStore(true), claimedBucket(),
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: rtSecret}}},
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: 2 * time.Minute}, Ready: ReasonSecretConflict, Also: conditions.Stalled, StatusWrites: 1,
				Events: []string{"Warning SecretConflict"}},
			check: func(g Gomega, f *fixture, _ *storagev1.BucketAccess) { g.Expect(f.accounts.Calls).To(BeEmpty()) },
		},
		"the Secret is forbidden by a quota: SecretRejected, no key on record": {
			access: rtAccessObj(), world: []client.Object{storagetest.ReadyStore(true), claimedBucket()},
			setup: func(f *fixture) { f.api.Fail(testenv.Apply, "Secret", errQuota) },
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: 2 * time.Minute}, Ready: ReasonSecretRejected, Also: conditions.Stalled, StatusWrites: 2,
				Events: []string{"Warning SecretRejected"}},
			check: func(g Gomega, f *fixture, a *storagev1.BucketAccess) {
				noKey(g, f, a)
				g.Expect(conditions.Get(a.Status.Conditions, conditions.Ready).Message).To(ContainSubstring("exceeded quota"))
			},
		},
		"the Secret is invalid: SecretRejected": {
			access: rtAccessObj(), world: []client.Object{storagetest.ReadyStore(true), claimedBucket()},
			setup: func(f *fixture) { f.api.Fail(testenv.Apply, "Secret", errInvalid) },
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: 2 * time.Minute}, Ready: ReasonSecretRejected, Also: conditions.Stalled, StatusWrites: 2,
				Events: []string{"Warning SecretRejected"}},
			check: noKey,
		},
		"the Secret write conflicts: retried at once, no status about it": {
			access: rtAccessObj(), world: []client.Object{storagetest.ReadyStore(true), claimedBucket()},
			setup: func(f *fixture) { f.api.Fail(testenv.Apply, "Secret", storagetest.ErrConflict) },
			want:  storagetest.Exit{Err: apierr.Conflict, Ready: ReasonIssuing, Also: conditions.Reconciling, StatusWrites: 1},
			check: noKey,
		},
		"the Secret write fails: ReconcileError, no key on record": {
			access: rtAccessObj(), world: []client.Object{storagetest.ReadyStore(true), claimedBucket()},
			setup: func(f *fixture) { f.api.Fail(testenv.Apply, "Secret", storagetest.ErrUnavailable) },
			want: storagetest.Exit{Err: apierr.Transient, Ready: conditions.ReasonReconcileError, Also: conditions.Reconciling, StatusWrites: 2,
				Events: []string{"Warning ReconcileError"}},
			check: noKey,
		},
		"the store stops answering at the grant: Reconciling, soon again, its controller asked to check it": {
			access: rtAccessObj(), world: []client.Object{storagetest.ReadyStore(true), claimedBucket()},
			setup: func(f *fixture) { f.s3.PolicyErr = storagetest.ErrDown },
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: accessStoreRetry}, Ready: string(s3.ReasonStoreUnreachable), Also: conditions.Reconciling,
				StatusWrites: 2, Events: []string{"Warning StoreUnreachable"}},
			check: func(g Gomega, f *fixture, a *storagev1.BucketAccess) {
				noKey(g, f, a)
				g.Expect(f.storeChecked()).To(BeTrue())
			},
		},
		"the finalizer patch fails: ReconcileError": {
			access: func() *storagev1.BucketAccess { a := rtAccessObj(); a.Finalizers = nil; return a }(),
			world:  []client.Object{storagetest.ReadyStore(true), claimedBucket()},
			setup:  func(f *fixture) { f.api.Fail(testenv.Patch, "BucketAccess", storagetest.ErrUnavailable) },
			want: storagetest.Exit{Err: apierr.Transient, Ready: conditions.ReasonReconcileError, Also: conditions.Reconciling, StatusWrites: 1,
				Events: []string{"Warning ReconcileError"}},
		},
		"the status cannot be written: the error is returned, nothing made": {
			access: rtAccessObj(), world: []client.Object{storagetest.ReadyStore(true), claimedBucket()},
			setup: func(f *fixture) { f.api.Fail(testenv.Status, "BucketAccess", storagetest.ErrUnavailable) },
			want:  storagetest.Exit{Err: apierr.Transient},
			check: func(g Gomega, f *fixture, _ *storagev1.BucketAccess) { g.Expect(f.accounts.Calls).To(BeEmpty()) },
		},
		"deleted: key revoked, Secret deleted, the finalizer goes": {
			access: storagetest.Deleting(grantedAccess()).(*storagev1.BucketAccess), world: []client.Object{storagetest.ReadyStore(true), claimedBucket(), accessSecret()},
			setup: func(f *fixture) {
				f.accounts.Accounts = map[string]string{stores.AccessKeyID(rtStoreUID, "uid-access", 1): "s", "SOMEONEELSE": "s"}
			},
			want: storagetest.Exit{Gone: true, Events: []string{"Normal KeyRevoked"}},
			check: func(g Gomega, f *fixture, _ *storagev1.BucketAccess) {
				g.Expect(f.accounts.Accounts).To(Equal(map[string]string{"SOMEONEELSE": "s"}))
				g.Expect(f.read(g, accessSecret())).To(BeFalse(), "the Secret is deleted")
			},
		},
		"deleted, the store does not answer: Revoking, the finalizer stays": {
			access: storagetest.Deleting(grantedAccess()).(*storagev1.BucketAccess), world: []client.Object{storagetest.ReadyStore(false), claimedBucket()},
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: time.Minute}, Ready: ReasonRevoking, Also: conditions.Reconciling, StatusWrites: 1},
		},
		"deleted, the store is gone: a Warning, let go": {
			access: storagetest.Deleting(grantedAccess()).(*storagev1.BucketAccess),
			want:   storagetest.Exit{Gone: true, Events: []string{"Warning StoreGone"}},
		},
		"deleted, the Secret may not be deleted: SecretRejected": {
			access: storagetest.Deleting(grantedAccess()).(*storagev1.BucketAccess), world: []client.Object{storagetest.ReadyStore(true), claimedBucket(), accessSecret()},
			setup: func(f *fixture) { f.api.Fail(testenv.Delete, "Secret", errQuota) },
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: 2 * time.Minute}, Ready: ReasonSecretRejected, Also: conditions.Stalled, StatusWrites: 1,
				Events: []string{"Warning SecretRejected"}},
		},
		"deleted, reading the store fails: ReconcileError": {
			access: storagetest.Deleting(grantedAccess()).(*storagev1.BucketAccess), world: []client.Object{storagetest.ReadyStore(true), claimedBucket()},
			setup: func(f *fixture) { f.api.Fail(testenv.Get, "ObjectStore", storagetest.ErrUnavailable) },
			want: storagetest.Exit{Err: apierr.Transient, Ready: conditions.ReasonReconcileError, Also: conditions.Reconciling, StatusWrites: 1,
				Events: []string{"Warning ReconcileError"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			world := append([]client.Object{openNamespace(), storagetest.StoreCredentials()}, tc.world...)
			obj := rtAccessObj()
			if tc.access != nil {
				world = append(world, tc.access)
				obj = tc.access.DeepCopy()
			}
			f := newFixture(world...)
			r := f.accessReconciler()
			req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(obj)}
			if tc.granted {
				_, err := r.Reconcile(context.Background(), req)
				g.Expect(err).NotTo(HaveOccurred())
				f.api.ForgetWrites()
				f.events()
			}
			if tc.setup != nil {
				tc.setup(f)
			}
			before := storagetest.Conflicts(g, accessController)
			res, err := r.Reconcile(context.Background(), req)
			f.conflicts = storagetest.Conflicts(g, accessController) - before
			tc.want.Check(g, storagetest.Got{Result: res, Err: err, API: f.api, Events: f.events(), Conflicts: f.conflicts}, obj, func() []metav1.Condition { return obj.Status.Conditions })
			if tc.check != nil {
				tc.check(g, f, obj)
			}
		})
	}
}

// TestReconcilingAgainWritesNothing: once an object is where its spec
// wants it, reconciling it again (a check due, a resync) sends the API
// server no write at all.
func TestReconcilingAgainWritesNothing(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	newStore := storagetest.ReadyStore(true)
	newStore.Finalizers, newStore.Status = nil, storagev1.ObjectStoreStatus{}
	f := newFixture(openNamespace(), storagetest.StoreCredentials(), newStore, rtBucket(), rtAccessObj())
	objectStores, buckets, accesses := store.New(f.c, f.rec, f.stores(), nil, false), f.bucketReconciler(), f.accessReconciler()
	storeKey := types.NamespacedName{Name: rtStore}
	bucketKey := types.NamespacedName{Namespace: testNS, Name: "assets"}
	accessKey := types.NamespacedName{Namespace: testNS, Name: rtAccess}
	reconcileAll := func() {
		_, err := objectStores.Reconcile(ctx, ctrl.Request{NamespacedName: storeKey})
		g.Expect(err).NotTo(HaveOccurred())
		f.schedule.CheckNow(bucketKey)
		_, err = buckets.Reconcile(ctx, ctrl.Request{NamespacedName: bucketKey})
		g.Expect(err).NotTo(HaveOccurred())
		_, err = accesses.Reconcile(ctx, ctrl.Request{NamespacedName: accessKey})
		g.Expect(err).NotTo(HaveOccurred())
	}
	f.s3.OwnerTag = mine // the bucket, once created, is tagged as this StorageBucket's

	reconcileAll()
	a := &storagev1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: rtAccess}}
	g.Expect(f.read(g, a)).To(BeTrue())
	g.Expect(conditions.Get(a.Status.Conditions, conditions.Ready).Reason).To(Equal(ReasonGranted), "all three in place: %v", f.api.Writes())
	f.api.ForgetWrites()
	f.s3.Exists = true

	reconcileAll()
	g.Expect(f.api.Writes()).To(BeEmpty())
	g.Expect(f.s3.Calls[len(f.s3.Calls)-3:]).To(Equal([]string{"Ping", "BucketExists", "Policy"}),
		"one request per check: the store's, the bucket's, the grant's")
}
