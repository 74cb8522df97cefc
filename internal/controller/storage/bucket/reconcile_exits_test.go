package bucket

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/apierr"
	"github.com/trellis-dev/trellis/internal/controller/storage/storagetest"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/s3"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// The StorageBucket reconcile, driven through every exit: a fake API
// server (testenv.Fake: controller-runtime's fake client, with the errors
// of a row injected) and a fake store (storagetest.FakeS3). Each row names
// the exit, and checks the result, the error, the status written (Ready's
// reason, and how many status writes) and the Events.

const (
	rtStore    = storagetest.Store
	rtStoreUID = storagetest.StoreUID
	openTo     = storagetest.OpenTo
)

// fixture is what a row runs against (storagetest.Fixture), and what the
// StorageBucket controller keeps in memory: its schedule, on a test
// clock, and its public-access guards.
type fixture struct {
	storagetest.Fixture
	clock    *testClock
	schedule *Schedule
	guards   *publicAccessGuards
	// conflicts is how many conflicts the last reconcile counted (at least:
	// the manager of the envtest suite counts under the same names).
	conflicts float64
	// accessEvents receives what the reconcile sends to the BucketAccess
	// controller.
	accessEvents chan event.TypedGenericEvent[*storagev1.BucketAccess]
}

func newFixture(objs ...client.Object) *fixture {
	f := &fixture{Fixture: storagetest.NewFixture(objs...), clock: newTestClock(), guards: newPublicAccessGuards(),
		accessEvents: make(chan event.TypedGenericEvent[*storagev1.BucketAccess], 10)}
	f.schedule = newTestSchedule(f.clock)
	return f
}

func (f *fixture) reconciler() *Reconciler {
	r := New(f.C, f.Rec, Config{Stores: f.Stores(), Namespaces: stores.NewNamespaceLabels(f.API.APIReader), Schedule: f.schedule,
		StoreChecks: f.StoreChecks, AccessEvents: f.accessEvents})
	r.guards = f.guards
	return r
}

// checkWait is the wait for a bucket's next check: on its phase, at least
// half an interval after a check.
var checkWait = storagetest.Requeue{UpTo: 2 * defaultInterval}

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
		a := storagetest.GrantedAccess()
		a.Namespace, a.UID = otherNS, "uid-their-access"
		a.Status.AccessKeyID = stores.AccountName(rtStoreUID, a.UID, 1)
		return a
	}
	refusedUntouched := func(want string) func(Gomega, *fixture, *storagev1.StorageBucket) {
		return func(g Gomega, f *fixture, b *storagev1.StorageBucket) {
			g.Expect(f.S3.Calls).To(Equal([]string{"BucketExists", "Policy"}), "the policy in the store is read, and with nothing to take out, not written")
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
			setup: func(f *fixture) { knownBucket(f, storagetest.ClaimedBucket()) },
			want:  storagetest.Exit{Gone: true},
			check: func(g Gomega, f *fixture, b *storagev1.StorageBucket) {
				g.Expect(bucketKnown(f, b)).To(Equal([]bool{false, false, false}), "metrics, schedule, guard")
			},
		},
		"reading the StorageBucket fails: returned, nothing written, its metrics, schedule and guard kept": {
			bucket: storagetest.ClaimedBucket(), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) {
				knownBucket(f, storagetest.ClaimedBucket())
				f.API.Fail(testenv.Get, "StorageBucket", storagetest.ErrUnavailable)
			},
			want: storagetest.Exit{Err: apierr.Transient, Ready: ReasonHealthy},
			check: func(g Gomega, f *fixture, b *storagev1.StorageBucket) {
				g.Expect(f.API.Writes()).To(BeEmpty())
				g.Expect(bucketKnown(f, b)).To(Equal([]bool{true, true, true}), "a read that failed is no deletion: metrics, schedule, guard")
			},
		},
		// Admitted with its finalizer (config/admission): two status writes,
		// the intent and Healthy, and one Event, not "Healthy" besides.
		"new: the intent, then created, tagged and Healthy": {
			bucket: storagetest.Bucket(), world: []client.Object{storagetest.ReadyStore(true)},
			want: storagetest.Exit{Requeue: checkWait, Ready: ReasonHealthy, StatusWrites: 2,
				Events: []string{"Normal BucketCreated"}},
			check: func(g Gomega, f *fixture, b *storagev1.StorageBucket) {
				g.Expect(f.S3.Calls).To(Equal([]string{"BucketExists", "CreateBucket", "SetOwner"}))
				g.Expect(b.Status.Claim).To(Equal(storagev1.BucketClaimed))
				g.Expect(b.Status.BucketName).To(Equal(testBucket))
				g.Expect(f.API.Writes()).To(Equal([]string{"status StorageBucket", "status StorageBucket"}), "no finalizer patch")
			},
		},
		"new, without its finalizer (no admission policy): the finalizer first": {
			bucket: func() *storagev1.StorageBucket { b := storagetest.Bucket(); b.Finalizers = nil; return b }(), world: []client.Object{storagetest.ReadyStore(true)},
			want: storagetest.Exit{Requeue: checkWait, Ready: ReasonHealthy, StatusWrites: 2,
				Events: []string{"Normal BucketCreated"}},
			check: func(g Gomega, f *fixture, b *storagev1.StorageBucket) {
				g.Expect(f.API.Writes()).To(Equal([]string{"patch StorageBucket", "status StorageBucket", "status StorageBucket"}))
				g.Expect(b.Finalizers).To(ConsistOf(stores.BucketFinalizer))
			},
		},
		"settled, no check due: nothing sent, nothing written": {
			bucket: storagetest.ClaimedBucket(), world: []client.Object{storagetest.ReadyStore(true)},
			want: storagetest.Exit{Requeue: checkWait, Ready: ReasonHealthy},
			check: func(g Gomega, f *fixture, _ *storagev1.StorageBucket) {
				g.Expect(f.S3.Calls).To(BeEmpty())
				g.Expect(f.API.Writes()).To(BeEmpty())
			},
		},
		"settled, check due: one HeadBucket, nothing written": {
			bucket: storagetest.ClaimedBucket(), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) {
				checkNow(f)
				f.S3.Exists = true
				f.guards.checked(types.NamespacedName{Namespace: testNS, Name: "assets"}, keyOf(storagetest.ClaimedBucket(), storagetest.ReadyStore(true), false))
			},
			want: storagetest.Exit{Requeue: checkWait, Ready: ReasonHealthy},
			check: func(g Gomega, f *fixture, _ *storagev1.StorageBucket) {
				g.Expect(f.S3.Calls).To(Equal([]string{"BucketExists"}))
				g.Expect(f.API.Writes()).To(BeEmpty())
			},
		},
		"settled, first check since the start, where the store blocks public access: the policy read once": {
			bucket: storagetest.ClaimedBucket(), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) { checkNow(f); f.S3.Exists = true },
			want:  storagetest.Exit{Requeue: checkWait, Ready: ReasonHealthy},
			check: func(g Gomega, f *fixture, b *storagev1.StorageBucket) {
				g.Expect(f.S3.Calls).To(Equal([]string{"BucketExists", "Policy"}))
				g.Expect(f.API.Writes()).To(BeEmpty())
				g.Expect(f.guards.due(client.ObjectKeyFromObject(b), keyOf(b, storagetest.ReadyStore(true), false))).To(BeFalse(), "not read again")
			},
		},
		"settled, no spec.policy, a public statement in the store's policy: taken out, the grants kept": {
			bucket: storagetest.ClaimedBucket(), world: []client.Object{storagetest.ReadyStore(true), storagetest.GrantedAccess()},
			setup: func(f *fixture) {
				checkNow(f)
				f.S3.Exists = true
				a := storagetest.GrantedAccess()
				grant := s3.Grant{ID: stores.GrantID(a.UID), Principals: []string{a.Status.AccessKeyID}, Mode: string(a.Spec.Mode)}
				var err error
				if f.S3.PolicyDoc, err = s3.WithGrant(policy, testBucket, grant); err != nil {
					panic(err)
				}
			},
			want: storagetest.Exit{Requeue: checkWait, Ready: ReasonHealthy, Events: []string{"Warning PublicAccessRemoved"}},
			check: func(g Gomega, f *fixture, _ *storagev1.StorageBucket) {
				g.Expect(f.S3.Calls).To(Equal([]string{"BucketExists", "Policy", "SetPolicy"}))
				g.Expect(f.S3.PolicyDoc).NotTo(ContainSubstring(`"Public"`))
				g.Expect(f.S3.PolicyDoc).To(ContainSubstring(s3.GrantSidPrefix + stores.GrantID(storagetest.GrantedAccess().UID)))
			},
		},
		"settled, no spec.policy, the store allows the namespace anything: the policy not read": {
			bucket: storagetest.ClaimedBucket(), world: []client.Object{publicStore()},
			setup: func(f *fixture) { checkNow(f); f.S3.Exists = true; f.S3.PolicyDoc = policy },
			want:  storagetest.Exit{Requeue: checkWait, Ready: ReasonHealthy},
			check: func(g Gomega, f *fixture, _ *storagev1.StorageBucket) {
				g.Expect(f.S3.Calls).To(Equal([]string{"BucketExists"}))
			},
		},
		"settled, no check due, the store's public access changed since the last check: checked now": {
			bucket: storagetest.ClaimedBucket(), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) {
				f.S3.Exists = true
				f.guards.checked(types.NamespacedName{Namespace: testNS, Name: "assets"}, keyOf(storagetest.ClaimedBucket(), publicStore(), true))
			},
			want: storagetest.Exit{Requeue: checkWait, Ready: ReasonHealthy},
			check: func(g Gomega, f *fixture, _ *storagev1.StorageBucket) {
				g.Expect(f.S3.Calls).To(Equal([]string{"BucketExists", "Policy"}))
			},
		},
		"a public policy refused where the store blocks it, the store's policy already public: taken out": {
			bucket: withPolicy(storagetest.ClaimedBucket()), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) { checkNow(f); f.S3.Exists = true; f.S3.PolicyDoc = policy },
			want: storagetest.Exit{Requeue: checkWait, Ready: ReasonPolicyRefused, Also: conditions.Stalled, StatusWrites: 1,
				Events: []string{"Warning PolicyRefused", "Warning PublicAccessRemoved"}},
			check: func(g Gomega, f *fixture, b *storagev1.StorageBucket) {
				g.Expect(f.S3.Calls).To(Equal([]string{"BucketExists", "Policy", "SetPolicy"}))
				g.Expect(f.S3.PolicyDoc).To(BeEmpty())
				g.Expect(conditions.Get(b.Status.Conditions, conditions.Ready).Message).To(ContainSubstring("that grant beyond that are taken out"))
			},
		},
		"the finalizer patch conflicts: retried at once, no status": {
			bucket: func() *storagev1.StorageBucket { b := storagetest.Bucket(); b.Finalizers = nil; return b }(), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) { f.API.Fail(testenv.Patch, "StorageBucket", storagetest.ErrConflict) },
			want:  storagetest.Exit{Err: apierr.Conflict},
		},
		"the finalizer patch fails: ReconcileError": {
			bucket: func() *storagev1.StorageBucket { b := storagetest.Bucket(); b.Finalizers = nil; return b }(), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) { f.API.Fail(testenv.Patch, "StorageBucket", storagetest.ErrUnavailable) },
			want: storagetest.Exit{Err: apierr.Transient, Ready: conditions.ReasonReconcileError, Also: conditions.Reconciling, StatusWrites: 1,
				Events: []string{"Warning ReconcileError"}},
		},
		"listing the other claimants fails: ReconcileError, the claim kept": {
			bucket: storagetest.ClaimedBucket(), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) { checkNow(f); f.API.Fail(testenv.List, "StorageBucket", storagetest.ErrUnavailable) },
			want: storagetest.Exit{Err: apierr.Transient, Ready: conditions.ReasonReconcileError, Also: conditions.Reconciling, StatusWrites: 1,
				Events: []string{"Warning ReconcileError"}},
			check: func(g Gomega, _ *fixture, b *storagev1.StorageBucket) {
				g.Expect(b.Status.Claim).To(Equal(storagev1.BucketClaimed))
			},
		},
		"another StorageBucket holds the bucket: Conflict, nothing sent": {
			bucket: storagetest.Bucket(),
			world: []client.Object{storagetest.ReadyStore(true), &storagev1.StorageBucket{
				ObjectMeta: metav1.ObjectMeta{Namespace: otherNS, Name: "first", UID: otherUID},
				Spec:       storagev1.StorageBucketSpec{StoreRef: storagev1.StoreReference{Name: rtStore}, BucketName: testBucket},
				Status:     storagev1.StorageBucketStatus{BucketName: testBucket, Claim: storagev1.BucketClaimed},
			}},
			want: storagetest.Exit{Requeue: checkWait, Ready: ReasonConflict, Also: conditions.Stalled, StatusWrites: 1,
				Events: []string{"Warning Conflict"}},
			check: func(g Gomega, f *fixture, b *storagev1.StorageBucket) {
				g.Expect(f.S3.Calls).To(BeEmpty())
				g.Expect(conditions.Get(b.Status.Conditions, conditions.Ready).Message).To(Equal("bucket team-assets is claimed by StorageBucket team-b/first"))
			},
		},
		"another StorageBucket holds the bucket and is being deleted: Conflict, saying what follows": {
			bucket: storagetest.Bucket(),
			world: []client.Object{storagetest.ReadyStore(true), &storagev1.StorageBucket{
				ObjectMeta: metav1.ObjectMeta{Namespace: otherNS, Name: "first", UID: otherUID,
					DeletionTimestamp: &metav1.Time{Time: time.Now()}, Finalizers: []string{stores.BucketFinalizer}},
				Spec:   storagev1.StorageBucketSpec{StoreRef: storagev1.StoreReference{Name: rtStore}, BucketName: testBucket},
				Status: storagev1.StorageBucketStatus{BucketName: testBucket, Claim: storagev1.BucketClaimed},
			}},
			want: storagetest.Exit{Requeue: checkWait, Ready: ReasonConflict, Also: conditions.Stalled, StatusWrites: 1,
				Events: []string{"Warning Conflict"}},
			check: func(g Gomega, f *fixture, b *storagev1.StorageBucket) {
				g.Expect(f.S3.Calls).To(BeEmpty())
				g.Expect(conditions.Get(b.Status.Conditions, conditions.Ready).Message).To(ContainSubstring("being deleted with deletionPolicy: Retain: the bucket stays, kept for namespace team-b"))
			},
		},
		"no such store: Stalled": {
			bucket: storagetest.Bucket(),
			want: storagetest.Exit{Requeue: checkWait, Ready: stores.ReasonStoreNotFound, Also: conditions.Stalled, StatusWrites: 1,
				Events: []string{"Warning StoreNotFound"}},
		},
		"the store is down: its state, no request": {
			bucket: storagetest.Bucket(), world: []client.Object{storagetest.ReadyStore(false)},
			want: storagetest.Exit{Requeue: checkWait, Ready: string(s3.ReasonStoreUnreachable), Also: conditions.Reconciling,
				StatusWrites: 1, Events: []string{"Warning StoreUnreachable"}},
			check: func(g Gomega, f *fixture, _ *storagev1.StorageBucket) { g.Expect(f.S3.Calls).To(BeEmpty()) },
		},
		"the store is not open to the namespace: Stalled, no request": {
			bucket: storagetest.Bucket(), world: []client.Object{storagetest.ReadyStore(true)}, closed: true,
			want: storagetest.Exit{Requeue: checkWait, Ready: stores.ReasonNamespaceNotAllowed, Also: conditions.Stalled, StatusWrites: 1,
				Events: []string{"Warning NamespaceNotAllowed"}},
			check: func(g Gomega, f *fixture, _ *storagev1.StorageBucket) { g.Expect(f.S3.Calls).To(BeEmpty()) },
		},
		"the store stops answering: Reconciling, and its controller is asked to check it": {
			bucket: storagetest.ClaimedBucket(), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) { checkNow(f); f.S3.ExistsErr = storagetest.ErrDown },
			want: storagetest.Exit{Requeue: checkWait, Ready: string(s3.ReasonStoreUnreachable), Also: conditions.Reconciling,
				StatusWrites: 1, Events: []string{"Warning StoreUnreachable"}},
			check: func(g Gomega, f *fixture, _ *storagev1.StorageBucket) { g.Expect(f.StoreChecked()).To(BeTrue()) },
		},
		"the status write conflicts: again at once, no error, nothing written": {
			bucket: storagetest.ClaimedBucket(), world: []client.Object{storagetest.ReadyStore(false)},
			setup: func(f *fixture) { checkNow(f); f.API.Fail(testenv.Status, "StorageBucket", storagetest.ErrConflict) },
			want:  storagetest.Exit{Err: apierr.Conflict, Ready: ReasonHealthy},
		},
		"the intent cannot be written: nothing created": {
			bucket: storagetest.Bucket(), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) { f.API.Fail(testenv.Status, "StorageBucket", storagetest.ErrUnavailable) },
			want:  storagetest.Exit{Err: apierr.Transient},
			check: func(g Gomega, f *fixture, _ *storagev1.StorageBucket) {
				g.Expect(f.S3.Calls).To(Equal([]string{"BucketExists"}), "no CreateBucket")
			},
		},
		"policy written, then listing the accesses to tell fails: the check is recorded, ReconcileError": {
			bucket: withPolicy(storagetest.ClaimedBucket()), world: []client.Object{publicStore()},
			setup: func(f *fixture) {
				checkNow(f)
				f.S3.Exists = true
				f.S3.OnSetPolicy = func() { f.API.Fail(testenv.List, "BucketAccess", storagetest.ErrUnavailable) }
			},
			want: storagetest.Exit{Err: apierr.Transient, Ready: conditions.ReasonReconcileError, Also: conditions.Reconciling, StatusWrites: 1,
				Events: []string{"Warning ReconcileError", "Normal BucketSettingsApplied"}},
			check: func(g Gomega, f *fixture, b *storagev1.StorageBucket) {
				g.Expect(f.S3.PolicyDoc).To(ContainSubstring("Public"))
				g.Expect(conditions.Get(b.Status.Conditions, conditions.SettingsApplied).Reason).To(Equal(ReasonApplied))
				g.Expect(b.Status.Claim).To(Equal(storagev1.BucketClaimed))
			},
		},
		"a public policy where the store blocks it: PolicyRefused, Stalled, nothing sent": {
			bucket: withPolicy(storagetest.ClaimedBucket()), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) { checkNow(f); f.S3.Exists = true },
			want: storagetest.Exit{Requeue: checkWait, Ready: ReasonPolicyRefused, Also: conditions.Stalled, StatusWrites: 1,
				Events: []string{"Warning PolicyRefused"}},
			check: refusedUntouched(`Principal "*" is everyone`),
		},
		"a public policy where the store allows it, but not for this namespace: PolicyRefused": {
			bucket: withPolicy(storagetest.ClaimedBucket()), world: []client.Object{func() client.Object {
				s := publicStore()
				s.Spec.PublicAccessNamespaceSelector.MatchLabels = map[string]string{"public": "yes"}
				return s
			}()},
			setup: func(f *fixture) { checkNow(f); f.S3.Exists = true },
			want: storagetest.Exit{Requeue: checkWait, Ready: ReasonPolicyRefused, Also: conditions.Stalled, StatusWrites: 1,
				Events: []string{"Warning PolicyRefused"}},
			check: refusedUntouched("its publicAccessNamespaceSelector selects, not " + testNS),
		},
		"a policy naming another namespace's key: PolicyRefused": {
			bucket: granting(`"` + stores.AccountName(rtStoreUID, "uid-their-access", 1) + `"`)(storagetest.ClaimedBucket()), world: []client.Object{storagetest.ReadyStore(true), theirAccess()},
			setup: func(f *fixture) { checkNow(f); f.S3.Exists = true },
			want: storagetest.Exit{Requeue: checkWait, Ready: ReasonPolicyRefused, Also: conditions.Stalled, StatusWrites: 1,
				Events: []string{"Warning PolicyRefused"}},
			check: refusedUntouched("is not a key of this namespace's BucketAccesses"),
		},
		"a policy naming the namespace's own keys: applied": {
			bucket: granting(`["` + stores.AccountName(rtStoreUID, "uid-access", 1) + `"]`)(storagetest.ClaimedBucket()), world: []client.Object{storagetest.ReadyStore(true), storagetest.GrantedAccess()},
			setup: func(f *fixture) { checkNow(f); f.S3.Exists = true },
			want:  storagetest.Exit{Requeue: checkWait, Ready: ReasonHealthy, StatusWrites: 1, Events: []string{"Normal BucketSettingsApplied"}},
			check: func(g Gomega, f *fixture, _ *storagev1.StorageBucket) {
				g.Expect(f.S3.Calls).To(ContainElement("SetPolicy"))
			},
		},
		"listing the keys before the policy fails: ReconcileError, nothing sent": {
			bucket: withPolicy(storagetest.ClaimedBucket()), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) {
				checkNow(f)
				f.S3.Exists = true
				f.API.Fail(testenv.List, "BucketAccess", storagetest.ErrUnavailable)
			},
			want: storagetest.Exit{Err: apierr.Transient, Ready: conditions.ReasonReconcileError, Also: conditions.Reconciling, StatusWrites: 1,
				Events: []string{"Warning ReconcileError"}},
			check: func(g Gomega, f *fixture, b *storagev1.StorageBucket) {
				g.Expect(f.S3.Calls).To(BeEmpty(), "nothing asked of the store")
				g.Expect(b.Status.Claim).To(Equal(storagev1.BucketClaimed))
			},
		},
		"the live grants cannot be listed: the policy is not written, ReconcileError": {
			// Without them, every grant would look forged.
			bucket: withPolicy(storagetest.ClaimedBucket()), world: []client.Object{publicStore()},
			setup: func(f *fixture) {
				checkNow(f)
				f.S3.Exists = true
				f.API.Fail(testenv.List, "BucketAccess", storagetest.ErrUnavailable)
			},
			want: storagetest.Exit{Requeue: checkWait, Ready: conditions.ReasonReconcileError, Also: conditions.Reconciling, StatusWrites: 1,
				Events: []string{"Warning ReconcileError"}},
			check: func(g Gomega, f *fixture, b *storagev1.StorageBucket) {
				g.Expect(f.S3.Calls).NotTo(ContainElement("SetPolicy"))
				g.Expect(f.S3.Calls).NotTo(ContainElement("Policy"), "not even read")
				g.Expect(conditions.Get(b.Status.Conditions, conditions.SettingsApplied).Reason).To(Equal(conditions.ReasonReconcileError))
			},
		},
		"policy written: its accesses are told": {
			bucket: withPolicy(storagetest.ClaimedBucket()), world: []client.Object{publicStore(), storagetest.GrantedAccess()},
			setup: func(f *fixture) { checkNow(f); f.S3.Exists = true },
			want: storagetest.Exit{Requeue: checkWait, Ready: ReasonHealthy, StatusWrites: 1,
				Events: []string{"Normal BucketSettingsApplied"}},
			check: func(g Gomega, f *fixture, _ *storagev1.StorageBucket) { g.Expect(f.accessEvents).To(HaveLen(1)) },
		},
		"deleted while accesses use it: InUse, Stalled": {
			bucket: storagetest.Deleting(storagetest.ClaimedBucket()).(*storagev1.StorageBucket), world: []client.Object{storagetest.ReadyStore(true), storagetest.GrantedAccess()},
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: 2 * time.Minute}, Ready: stores.ReasonInUse, Also: conditions.Stalled, StatusWrites: 1,
				Events: []string{"Warning InUse"}},
		},
		"deleted (Delete) holding objects: DeleteBlocked": {
			bucket: storagetest.Deleting(deletePolicy(storagetest.ClaimedBucket())).(*storagev1.StorageBucket), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) { f.S3.Exists, f.S3.OwnerTag, f.S3.Objects = true, mine, 3 },
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: 2 * time.Minute}, Ready: ReasonDeleteBlocked, Also: conditions.Stalled, StatusWrites: 1,
				Events: []string{"Warning DeleteBlocked"}},
			check: func(g Gomega, f *fixture, _ *storagev1.StorageBucket) {
				g.Expect(f.S3.Calls).NotTo(ContainElement("DeleteBucket"))
			},
		},
		"deleted (Delete), empty: deleted, the finalizer goes, no status": {
			bucket: storagetest.Deleting(deletePolicy(storagetest.ClaimedBucket())).(*storagev1.StorageBucket), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) { f.S3.Exists, f.S3.OwnerTag = true, mine },
			want:  storagetest.Exit{Gone: true, Events: []string{"Normal BucketDeleted"}},
			check: func(g Gomega, f *fixture, _ *storagev1.StorageBucket) {
				g.Expect(f.S3.Calls).To(ContainElement("DeleteBucket"))
				g.Expect(f.API.Writes()).To(Equal([]string{"patch StorageBucket"}))
			},
		},
		"deleted (Retain), the store is down: kept, with a Warning": {
			bucket: storagetest.Deleting(storagetest.ClaimedBucket()).(*storagev1.StorageBucket), world: []client.Object{storagetest.ReadyStore(false)},
			want: storagetest.Exit{Gone: true, Events: []string{"Warning RetainedUntagged"}},
		},
		"deleted (Retain), reading the store fails: ReconcileError, the finalizer stays": {
			bucket: storagetest.Deleting(storagetest.ClaimedBucket()).(*storagev1.StorageBucket), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) { f.API.Fail(testenv.Get, "ObjectStore", storagetest.ErrUnavailable) },
			want: storagetest.Exit{Err: apierr.Transient, Ready: conditions.ReasonReconcileError, Also: conditions.Reconciling, StatusWrites: 1,
				Events: []string{"Warning ReconcileError"}},
			check: func(g Gomega, _ *fixture, b *storagev1.StorageBucket) {
				g.Expect(b.Finalizers).To(ConsistOf(stores.BucketFinalizer))
			},
		},
		"deleted, the finalizer removal conflicts: retried at once, no status": {
			bucket: storagetest.Deleting(storagetest.Bucket()).(*storagev1.StorageBucket), world: []client.Object{storagetest.ReadyStore(true)},
			setup: func(f *fixture) { f.API.Fail(testenv.Patch, "StorageBucket", storagetest.ErrConflict) },
			want:  storagetest.Exit{Err: apierr.Conflict},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ns := storagetest.OpenNamespace()
			if tc.closed {
				ns.Labels = nil
			}
			world := append([]client.Object{ns, storagetest.StoreCredentials()}, tc.world...)
			obj := storagetest.Bucket()
			if tc.bucket != nil {
				world = append(world, tc.bucket)
				obj = tc.bucket.DeepCopy()
			}
			f := newFixture(world...)
			if tc.setup != nil {
				tc.setup(f)
			}
			before := storagetest.Conflicts(g, bucketController)
			res, err := f.reconciler().Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(obj)})
			f.conflicts = storagetest.Conflicts(g, bucketController) - before
			tc.want.Check(g, storagetest.Got{Result: res, Err: err, API: f.API, Events: f.Events(), Conflicts: f.conflicts}, obj, func() []metav1.Condition { return obj.Status.Conditions })
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
