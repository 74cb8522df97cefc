package access

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
	"k8s.io/apimachinery/pkg/util/validation/field"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/apierr"
	"github.com/trellis-dev/trellis/internal/controller/status"
	"github.com/trellis-dev/trellis/internal/controller/storage/storagetest"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/s3"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// The BucketAccess reconcile, driven through every exit: a fake API
// server (testenv.Fake: controller-runtime's fake client, with the errors
// of a row injected) and a fake store (storagetest.FakeS3,
// storagetest.FakeAccounts). Each row names the exit, and checks the
// result, the error, the status written (Ready's reason, and how many
// status writes) and the Events.

var (
	// Errors the fake API server answers with.
	errQuota   = apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, rtSecret, errors.New("exceeded quota: count/secrets"))
	errInvalid = apierrors.NewInvalid(schema.GroupKind{Kind: "Secret"}, rtSecret, field.ErrorList{field.Invalid(field.NewPath("metadata", "labels"), "x", "refused by policy")})
)

// fixture is what a row runs against (storagetest.Fixture); its clock
// stands at syncNow.
type fixture struct {
	storagetest.Fixture
	// status is the status patcher of the last reconciler.
	status *status.Patcher[*storagev1.BucketAccess, storagev1.BucketAccessStatus]
	// conflicts is how many conflicts the last reconcile counted (at least:
	// the manager of the envtest suite counts under the same names).
	conflicts float64
}

func newFixture(objs ...client.Object) *fixture {
	return &fixture{Fixture: storagetest.NewFixture(objs...)}
}

func (f *fixture) reconciler() *Reconciler {
	r := New(f.C, f.API.APIReader, f.Rec, Config{Stores: f.Stores(), Namespaces: stores.NewNamespaceLabels(f.API.APIReader), StoreChecks: f.StoreChecks})
	r.now = func() time.Time { return syncNow }
	f.status = r.status
	return r
}

func TestBucketAccessReconcileExits(t *testing.T) {
	ownKey := func(a *storagev1.BucketAccess) string { return stores.AccountName(rtStoreUID, a.UID, 1) }
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
			access: storagetest.Access(), world: []client.Object{storagetest.ReadyStore(true), storagetest.ClaimedBucket()}, granted: true,
			setup: func(f *fixture) { f.API.Fail(testenv.Get, "BucketAccess", storagetest.ErrUnavailable) },
			want:  storagetest.Exit{Err: apierr.Transient, Ready: ReasonGranted},
			check: func(g Gomega, f *fixture, _ *storagev1.BucketAccess) {
				g.Expect(f.API.Writes()).To(BeEmpty())
				g.Expect(f.status.Remembered()).To(Equal(1), "a read that failed is no deletion")
			},
		},
		"new: the target, then a key issued, granted and in its Secret": {
			access: storagetest.Access(), world: []client.Object{storagetest.ReadyStore(true), storagetest.ClaimedBucket()},
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: accessVerifyInterval}, Ready: ReasonGranted, StatusWrites: 2,
				Events: []string{"Normal Granted", "Normal KeyIssued"}},
			check: func(g Gomega, f *fixture, a *storagev1.BucketAccess) {
				g.Expect(a.Status.AccessKeyID).To(Equal(ownKey(a)))
				g.Expect(f.Accounts.Accounts).To(HaveKey(ownKey(a)))
				secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: rtSecret}}
				g.Expect(f.Read(g, secret)).To(BeTrue())
				g.Expect(string(secret.Data[envAccessKeyID])).To(Equal(ownKey(a)))
				g.Expect(f.API.Writes()).To(Equal([]string{"status BucketAccess", "apply Secret", "status BucketAccess"}))
			},
		},
		// Where the admission policy is not installed (Kubernetes below 1.36).
		"new, without its finalizer (no admission policy): the finalizer first, then the key": {
			access: func() *storagev1.BucketAccess { a := storagetest.Access(); a.Finalizers = nil; return a }(),
			world:  []client.Object{storagetest.ReadyStore(true), storagetest.ClaimedBucket()},
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: accessVerifyInterval}, Ready: ReasonGranted, StatusWrites: 2,
				Events: []string{"Normal Granted", "Normal KeyIssued"}},
			check: func(g Gomega, f *fixture, a *storagev1.BucketAccess) {
				g.Expect(f.API.Writes()).To(Equal([]string{"patch BucketAccess", "status BucketAccess", "apply Secret", "status BucketAccess"}))
				g.Expect(a.Finalizers).To(ConsistOf(stores.AccessFinalizer))
				g.Expect(f.Accounts.Accounts).To(HaveKey(ownKey(a)))
			},
		},
		"a forged grant in the bucket's policy: taken out with the grant, a Warning on the StorageBucket": {
			access: storagetest.Access(), world: []client.Object{storagetest.ReadyStore(true), storagetest.ClaimedBucket()},
			setup: func(f *fixture) {
				f.S3.PolicyDoc, _ = s3.WithGrant("", testBucket, s3.Grant{ID: "forged", Principals: []string{"FORGEDKEY0000001"}, Mode: s3.ReadWrite})
			},
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: accessVerifyInterval}, Ready: ReasonGranted, StatusWrites: 2,
				Events: []string{"Warning GrantRemoved", "Normal Granted", "Normal KeyIssued"}},
			check: func(g Gomega, f *fixture, a *storagev1.BucketAccess) {
				g.Expect(f.S3.PolicyDoc).NotTo(ContainSubstring("FORGEDKEY"))
				g.Expect(f.S3.PolicyDoc).To(ContainSubstring(ownKey(a)))
			},
		},
		"no such StorageBucket: Stalled": {
			access: storagetest.Access(), world: []client.Object{storagetest.ReadyStore(true)},
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: time.Minute}, Ready: ReasonBucketNotFound, Also: conditions.Stalled, StatusWrites: 1,
				Events: []string{"Warning BucketNotFound"}},
		},
		"the bucket is not claimed yet: waiting": {
			access: storagetest.Access(), world: []client.Object{storagetest.ReadyStore(true), storagetest.Bucket()},
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: time.Minute}, Ready: ReasonBucketNotReady, Also: conditions.Reconciling, StatusWrites: 1},
		},
		"the bucket is not claimed yet, the status write conflicts: again at once, no error, nothing written": {
			access: storagetest.Access(), world: []client.Object{storagetest.ReadyStore(true), storagetest.Bucket()},
			setup: func(f *fixture) { f.API.Fail(testenv.Status, "BucketAccess", storagetest.ErrConflict) },
			want:  storagetest.Exit{Err: apierr.Conflict},
		},
		"a store without accounts: Stalled": {
			access: storagetest.Access(), world: []client.Object{s3Store(), storagetest.ClaimedBucket()},
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: time.Minute}, Ready: ReasonAccessNotSupported, Also: conditions.Stalled, StatusWrites: 1,
				Events: []string{"Warning AccessNotSupported"}},
		},
		"the Secret is someone else's: SecretConflict, nothing made in the store": {
			access: storagetest.Access(), world: []client.Object{storagetest.ReadyStore(true), storagetest.ClaimedBucket(),
				&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: rtSecret}}},
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: 2 * time.Minute}, Ready: ReasonSecretConflict, Also: conditions.Stalled, StatusWrites: 1,
				Events: []string{"Warning SecretConflict"}},
			check: func(g Gomega, f *fixture, _ *storagev1.BucketAccess) { g.Expect(f.Accounts.Calls).To(BeEmpty()) },
		},
		"the Secret is forbidden by a quota: SecretRejected, no key on record": {
			access: storagetest.Access(), world: []client.Object{storagetest.ReadyStore(true), storagetest.ClaimedBucket()},
			setup: func(f *fixture) { f.API.Fail(testenv.Apply, "Secret", errQuota) },
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: 2 * time.Minute}, Ready: ReasonSecretRejected, Also: conditions.Stalled, StatusWrites: 2,
				Events: []string{"Warning SecretRejected"}},
			check: func(g Gomega, f *fixture, a *storagev1.BucketAccess) {
				noKey(g, f, a)
				g.Expect(conditions.Get(a.Status.Conditions, conditions.Ready).Message).To(ContainSubstring("exceeded quota"))
			},
		},
		"the Secret is invalid: SecretRejected": {
			access: storagetest.Access(), world: []client.Object{storagetest.ReadyStore(true), storagetest.ClaimedBucket()},
			setup: func(f *fixture) { f.API.Fail(testenv.Apply, "Secret", errInvalid) },
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: 2 * time.Minute}, Ready: ReasonSecretRejected, Also: conditions.Stalled, StatusWrites: 2,
				Events: []string{"Warning SecretRejected"}},
			check: noKey,
		},
		"the Secret write conflicts: retried at once, no status about it": {
			access: storagetest.Access(), world: []client.Object{storagetest.ReadyStore(true), storagetest.ClaimedBucket()},
			setup: func(f *fixture) { f.API.Fail(testenv.Apply, "Secret", storagetest.ErrConflict) },
			want:  storagetest.Exit{Err: apierr.Conflict, Ready: ReasonIssuing, Also: conditions.Reconciling, StatusWrites: 1},
			check: noKey,
		},
		"the Secret write fails: ReconcileError, no key on record": {
			access: storagetest.Access(), world: []client.Object{storagetest.ReadyStore(true), storagetest.ClaimedBucket()},
			setup: func(f *fixture) { f.API.Fail(testenv.Apply, "Secret", storagetest.ErrUnavailable) },
			want: storagetest.Exit{Err: apierr.Transient, Ready: conditions.ReasonReconcileError, Also: conditions.Reconciling, StatusWrites: 2,
				Events: []string{"Warning ReconcileError"}},
			check: noKey,
		},
		"the store stops answering at the grant: Reconciling, soon again, its controller asked to check it": {
			access: storagetest.Access(), world: []client.Object{storagetest.ReadyStore(true), storagetest.ClaimedBucket()},
			setup: func(f *fixture) { f.S3.PolicyErr = storagetest.ErrDown },
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: accessStoreRetry}, Ready: string(s3.ReasonStoreUnreachable), Also: conditions.Reconciling,
				StatusWrites: 2, Events: []string{"Warning StoreUnreachable"}},
			check: func(g Gomega, f *fixture, a *storagev1.BucketAccess) {
				noKey(g, f, a)
				g.Expect(f.StoreChecked()).To(BeTrue())
			},
		},
		"the finalizer patch fails: ReconcileError": {
			access: func() *storagev1.BucketAccess { a := storagetest.Access(); a.Finalizers = nil; return a }(),
			world:  []client.Object{storagetest.ReadyStore(true), storagetest.ClaimedBucket()},
			setup:  func(f *fixture) { f.API.Fail(testenv.Patch, "BucketAccess", storagetest.ErrUnavailable) },
			want: storagetest.Exit{Err: apierr.Transient, Ready: conditions.ReasonReconcileError, Also: conditions.Reconciling, StatusWrites: 1,
				Events: []string{"Warning ReconcileError"}},
		},
		"the status cannot be written: the error is returned, nothing made": {
			access: storagetest.Access(), world: []client.Object{storagetest.ReadyStore(true), storagetest.ClaimedBucket()},
			setup: func(f *fixture) { f.API.Fail(testenv.Status, "BucketAccess", storagetest.ErrUnavailable) },
			want:  storagetest.Exit{Err: apierr.Transient},
			check: func(g Gomega, f *fixture, _ *storagev1.BucketAccess) { g.Expect(f.Accounts.Calls).To(BeEmpty()) },
		},
		"the status write conflicts: again at once, no error, nothing made": {
			access: storagetest.Access(), world: []client.Object{storagetest.ReadyStore(true), storagetest.ClaimedBucket()},
			setup: func(f *fixture) { f.API.Fail(testenv.Status, "BucketAccess", storagetest.ErrConflict) },
			want:  storagetest.Exit{Err: apierr.Conflict},
			check: func(g Gomega, f *fixture, _ *storagev1.BucketAccess) { g.Expect(f.Accounts.Calls).To(BeEmpty()) },
		},
		"deleted: key revoked, Secret deleted, the finalizer goes": {
			access: storagetest.Deleting(storagetest.GrantedAccess()).(*storagev1.BucketAccess), world: []client.Object{storagetest.ReadyStore(true), storagetest.ClaimedBucket(), storagetest.AccessSecret()},
			setup: func(f *fixture) {
				f.Accounts.Accounts = map[string]string{stores.AccountName(rtStoreUID, "uid-access", 1): "s", "SOMEONEELSE": "s"}
			},
			want: storagetest.Exit{Gone: true, Events: []string{"Normal KeyRevoked"}},
			check: func(g Gomega, f *fixture, _ *storagev1.BucketAccess) {
				g.Expect(f.Accounts.Accounts).To(Equal(map[string]string{"SOMEONEELSE": "s"}))
				g.Expect(f.Read(g, storagetest.AccessSecret())).To(BeFalse(), "the Secret is deleted")
			},
		},
		"deleted, the store does not answer: Revoking, the finalizer stays": {
			access: storagetest.Deleting(storagetest.GrantedAccess()).(*storagev1.BucketAccess), world: []client.Object{storagetest.ReadyStore(false), storagetest.ClaimedBucket()},
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: time.Minute}, Ready: ReasonRevoking, Also: conditions.Reconciling, StatusWrites: 1},
		},
		"deleted, the store is gone: a Warning, let go": {
			access: storagetest.Deleting(storagetest.GrantedAccess()).(*storagev1.BucketAccess),
			want:   storagetest.Exit{Gone: true, Events: []string{"Warning StoreGone"}},
		},
		"deleted, the Secret may not be deleted: SecretRejected": {
			access: storagetest.Deleting(storagetest.GrantedAccess()).(*storagev1.BucketAccess), world: []client.Object{storagetest.ReadyStore(true), storagetest.ClaimedBucket(), storagetest.AccessSecret()},
			setup: func(f *fixture) { f.API.Fail(testenv.Delete, "Secret", errQuota) },
			want: storagetest.Exit{Requeue: storagetest.Requeue{About: 2 * time.Minute}, Ready: ReasonSecretRejected, Also: conditions.Stalled, StatusWrites: 1,
				Events: []string{"Warning SecretRejected"}},
		},
		"deleted, reading the store fails: ReconcileError": {
			access: storagetest.Deleting(storagetest.GrantedAccess()).(*storagev1.BucketAccess), world: []client.Object{storagetest.ReadyStore(true), storagetest.ClaimedBucket()},
			setup: func(f *fixture) { f.API.Fail(testenv.Get, "ObjectStore", storagetest.ErrUnavailable) },
			want: storagetest.Exit{Err: apierr.Transient, Ready: conditions.ReasonReconcileError, Also: conditions.Reconciling, StatusWrites: 1,
				Events: []string{"Warning ReconcileError"}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			world := append([]client.Object{storagetest.OpenNamespace(), storagetest.StoreCredentials()}, tc.world...)
			obj := storagetest.Access()
			if tc.access != nil {
				world = append(world, tc.access)
				obj = tc.access.DeepCopy()
			}
			f := newFixture(world...)
			r := f.reconciler()
			req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(obj)}
			if tc.granted {
				_, err := r.Reconcile(context.Background(), req)
				g.Expect(err).NotTo(HaveOccurred())
				f.API.ForgetWrites()
				f.Events()
			}
			if tc.setup != nil {
				tc.setup(f)
			}
			before := storagetest.Conflicts(g, accessController)
			res, err := r.Reconcile(context.Background(), req)
			f.conflicts = storagetest.Conflicts(g, accessController) - before
			tc.want.Check(g, storagetest.Got{Result: res, Err: err, API: f.API, Events: f.Events(), Conflicts: f.conflicts}, obj, func() []metav1.Condition { return obj.Status.Conditions })
			if tc.check != nil {
				tc.check(g, f, obj)
			}
		})
	}
}
