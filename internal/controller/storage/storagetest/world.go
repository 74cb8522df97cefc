package storagetest

import (
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/s3"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// The StorageBucket and BucketAccess of the rows, and their neighbours.
const (
	// BucketUID is the UID of Bucket.
	BucketUID = "uid-mine"
	// BucketName is the bucket Bucket names in Store.
	BucketName = "team-assets"
	// NSUID is the UID the bucket's ownership tags record for NS.
	NSUID = "ns-uid-team"
	// OtherNS and OtherUID are another namespace and another StorageBucket.
	OtherNS  = "team-b"
	OtherUID = "uid-theirs"
	// AccessName and SecretName are Access's name and its Secret's.
	AccessName = "app"
	SecretName = "app-s3"
)

// OpenNamespace is NS, open to ReadyStore.
func OpenNamespace() *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: NS, Labels: map[string]string{OpenTo: Store}}}
}

// Bucket is StorageBucket team/assets (bucket team-assets), with its finalizer.
func Bucket() *storagev1.StorageBucket {
	return &storagev1.StorageBucket{
		ObjectMeta: metav1.ObjectMeta{Namespace: NS, Name: "assets", UID: BucketUID, Generation: 1, Finalizers: []string{stores.BucketFinalizer}},
		Spec:       storagev1.StorageBucketSpec{StoreRef: storagev1.StoreReference{Name: Store}},
	}
}

// ClaimedBucket is Bucket once its bucket is created, tagged and healthy.
func ClaimedBucket() *storagev1.StorageBucket {
	b := Bucket()
	b.Status = storagev1.StorageBucketStatus{ObservedGeneration: 1, BucketName: BucketName, Claim: storagev1.BucketClaimed}
	// bucket.ReasonHealthy and its message, written out: the bucket
	// package's own tests import this one. Its exit table holds the two
	// the same (a bucket checked again writes nothing).
	conditions.Summarize(&b.Status.Conditions, 1, conditions.Summary{Progress: conditions.Done, Reason: "Healthy",
		Message: "bucket " + BucketName + " exists in " + Store + " and is healthy"})
	return b
}

// Access is BucketAccess team/app to Bucket, read-write, with its finalizer.
func Access() *storagev1.BucketAccess {
	return &storagev1.BucketAccess{
		ObjectMeta: metav1.ObjectMeta{Namespace: NS, Name: AccessName, UID: "uid-access", Generation: 1, Finalizers: []string{stores.AccessFinalizer}},
		Spec: storagev1.BucketAccessSpec{BucketRef: storagev1.BucketReference{Name: "assets"}, Mode: storagev1.AccessReadWrite,
			SecretName: SecretName, KeyVersion: 1},
	}
}

// GrantedAccess is Access with its key issued (as recorded in status).
func GrantedAccess() *storagev1.BucketAccess {
	a := Access()
	a.Status = storagev1.BucketAccessStatus{ObservedGeneration: 1, StoreName: Store, BucketName: BucketName,
		AccessKeyID: stores.AccountName(StoreUID, a.UID, 1), KeyVersion: 1}
	// access.ReasonGranted, written out, as above.
	conditions.Summarize(&a.Status.Conditions, 1, conditions.Summary{Progress: conditions.Done, Reason: "Granted", Message: "granted"})
	return a
}

// AccessSecret is the Secret of Access, controlled by it.
func AccessSecret() *corev1.Secret {
	a := Access()
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: NS, Name: SecretName, UID: "uid-secret",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: storagev1.GroupVersion.String(), Kind: "BucketAccess", Name: a.Name, UID: a.UID, Controller: ptr.To(true)}}}}
}

// Fixture is what the rows of a storage exit table run against: a fake API
// server (testenv.Fake), a fake store, and the channel on which a reconcile
// asks the ObjectStore controller for a store's check.
type Fixture struct {
	API *testenv.Fake
	// C is the manager's client of the fake API server (cache reads).
	C           client.WithWatch
	S3          *FakeS3
	Accounts    *FakeAccounts
	Rec         *events.FakeRecorder
	StoreChecks chan event.TypedGenericEvent[*storagev1.ObjectStore]
}

// NewFixture is a Fixture whose API server holds objs.
func NewFixture(objs ...client.Object) Fixture {
	api := NewFake(objs...)
	return Fixture{API: api, C: api.Client, S3: &FakeS3{}, Accounts: &FakeAccounts{}, Rec: events.NewFakeRecorder(50),
		StoreChecks: make(chan event.TypedGenericEvent[*storagev1.ObjectStore], 10)}
}

// Stores are the stores' clients, reading the stores' Secrets as the
// manager does, past the cache, and answered by the fake store.
func (f Fixture) Stores() *stores.Clients {
	return stores.NewClients(f.API.APIReader, ManagerNS, stores.Backends{
		S3: func(s3.Config) (s3.Client, error) { return f.S3, nil },
		Accounts: func(_ s3.Config, o *storagev1.ObjectStore) (s3.Accounts, error) {
			if !stores.HasAccounts(o) {
				return nil, s3.ErrAccessNotSupported
			}
			return f.Accounts, nil
		},
	})
}

// Events returns "<type> <reason>" of each Event raised, in order.
func (f Fixture) Events() []string { return testenv.EventReasons(f.Rec) }

// StoreChecked reports whether a check of the store was asked for.
func (f Fixture) StoreChecked() bool {
	select {
	case <-f.StoreChecks:
		return true
	default:
		return false
	}
}

// Read reads obj back from the fake API server (no failure injected);
// false when it is gone.
func (f Fixture) Read(g gomega.Gomega, obj client.Object) bool { return Read(g, f.API, obj) }

// AccessWithUID is GrantedAccess under another name and UID.
func AccessWithUID(name string, uid types.UID) *storagev1.BucketAccess {
	a := GrantedAccess()
	a.Name, a.UID = name, uid
	a.Status.AccessKeyID = stores.AccountName(StoreUID, uid, 1)
	return a
}

// Retiring is a retiring key, revoked at at.
func Retiring(id string, at time.Time) storagev1.RetiringKey {
	t := metav1.NewTime(at)
	return storagev1.RetiringKey{AccessKeyID: id, RevokeAt: &t}
}
