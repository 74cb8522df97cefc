// Package storagetest is what the exit tables of the storage kinds share:
// the world their rows start from (a store, its credentials) and the check
// of what one reconcile did. Only tests import it.
package storagetest

import (
	"context"
	"errors"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/apierr"
	"github.com/trellis-dev/trellis/internal/controller/outcome"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/s3"
	"github.com/trellis-dev/trellis/internal/testenv"
)

const (
	// Store is the ObjectStore of the rows.
	Store = "store-a"
	// StoreUID is the UID of ReadyStore: its mark is in the keys it issues.
	StoreUID = "uid-store"
	// ManagerNS is the manager's namespace, where store credentials live.
	ManagerNS = "trellis-system"
	// NS is the namespace of the rows' StorageBuckets and BucketAccesses.
	NS = "team"
	// OpenTo is the label by which ReadyStore selects the namespaces open to it.
	OpenTo = "storage.test/open"
)

// Scheme knows the built-in kinds and the storage kinds.
var Scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(storagev1.AddToScheme(s))
	return s
}()

// Errors the fake API server and the fake store answer with.
var (
	ErrConflict    = apierrors.NewConflict(schema.GroupResource{Resource: "objects"}, "x", errors.New("the object has been modified"))
	ErrUnavailable = apierrors.NewServiceUnavailable("the API server did not answer")
	ErrDown        = minio.ErrorResponse{Code: "ServiceUnavailable", StatusCode: 503}
	ErrDenied      = minio.ErrorResponse{Code: "AccessDenied", StatusCode: 403}
	ErrNoBucket    = minio.ErrorResponse{Code: "NoSuchBucket", StatusCode: 404}
	ErrBadPolicy   = minio.ErrorResponse{Code: "MalformedPolicy", StatusCode: 400, Message: "Invalid principal in policy"}
	// ErrVgwNoIAM is versitygw's answer without an IAM service.
	ErrVgwNoIAM = minio.ErrorResponse{Code: "XAdminMethodNotSupported", StatusCode: 501}
)

// Summaries the kinds' status tests feed their status functions.
var (
	// StoreDown is what a store that did not answer reads.
	StoreDown = conditions.Summary{Progress: conditions.Working, Reason: string(s3.ReasonStoreUnreachable), Message: "no answer"}
	// APIError is what a reconcile that ended with an API error says
	// (outcome.Summary).
	APIError, _ = outcome.Of(errors.New("etcdserver: request timed out")).Summary()
)

// NewFake is the rows' API server holding objs, with the storage kinds'
// status subresources and field indexes.
func NewFake(objs ...client.Object) *testenv.Fake {
	b := fake.NewClientBuilder().WithScheme(Scheme).WithObjects(objs...).WithReturnManagedFields().
		WithStatusSubresource(&storagev1.ObjectStore{}, &storagev1.StorageBucket{}, &storagev1.BucketAccess{})
	for _, ix := range stores.Indexes {
		b = b.WithIndex(ix.Obj, ix.Field, ix.Value)
	}
	return testenv.NewFake(b)
}

// NewStore is an ObjectStore named name, with its credentials in ManagerNS.
func NewStore(name string) *storagev1.ObjectStore {
	return &storagev1.ObjectStore{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1},
		Spec: storagev1.ObjectStoreSpec{Endpoint: "http://127.0.0.1:9000", Region: "us-east-1", PathStyle: ptr.To(true),
			CredentialsSecretRef: storagev1.SecretReference{Namespace: ManagerNS, Name: "creds"}},
	}
}

// ReadyStore is Store, a Versitygw store open to NS; ready says whether its
// last check found it answering.
func ReadyStore(ready bool) *storagev1.ObjectStore {
	s := NewStore(Store)
	s.UID = StoreUID
	s.Finalizers = []string{stores.StoreFinalizer}
	s.Spec.Type = storagev1.StoreTypeVersitygw
	s.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{OpenTo: Store}}
	s.Status.ObservedGeneration = s.Generation
	// store.ReasonReachable, written out: the store package's own tests
	// import this one. Its exit table holds the two the same (a store
	// checked again writes nothing).
	sum := conditions.Summary{Progress: conditions.Done, Reason: "Reachable", Message: "the store answers and accepts the credentials"}
	if !ready {
		sum = conditions.Summary{Progress: conditions.Working, Reason: string(s3.ReasonStoreUnreachable), Message: "the object store did not answer"}
	}
	conditions.Summarize(&s.Status.Conditions, s.Generation, sum)
	return s
}

// StoreCredentials is the credentials Secret of NewStore.
func StoreCredentials() *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ManagerNS, Name: "creds"}, Data: map[string][]byte{stores.AccessKeyIDKey: []byte("access"), stores.SecretAccessKeyKey: []byte("secret")}}
}

// Deleting marks obj as being deleted.
func Deleting(obj client.Object) client.Object {
	obj.SetDeletionTimestamp(&metav1.Time{Time: time.Now()})
	return obj
}

// Conflicts is trellis_reconcile_conflicts_total of a controller.
func Conflicts(g gomega.Gomega, controller string) float64 {
	n, err := testenv.Counter("trellis_reconcile_conflicts_total", "controller", controller)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	return n
}

// Read reads obj back from api (with no failure injected any more); false
// when it is gone.
func Read(g gomega.Gomega, api *testenv.Fake, obj client.Object) bool {
	api.Heal()
	err := api.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
	if apierrors.IsNotFound(err) {
		return false
	}
	g.Expect(err).NotTo(gomega.HaveOccurred())
	return true
}

// Requeue is the RequeueAfter a row expects: About d (±10% jitter), or
// anything UpTo a maximum.
type Requeue struct {
	About time.Duration
	UpTo  time.Duration
}

// Check checks the result of a reconcile.
func (w Requeue) Check(g gomega.Gomega, got ctrl.Result) {
	switch {
	case w.About > 0:
		g.Expect(got.RequeueAfter).To(gomega.BeNumerically("~", w.About, w.About/10+time.Millisecond), "RequeueAfter")
	case w.UpTo > 0:
		g.Expect(got.RequeueAfter).To(gomega.And(gomega.BeNumerically(">", 0), gomega.BeNumerically("<=", w.UpTo)), "RequeueAfter")
	default:
		g.Expect(got).To(gomega.Equal(ctrl.Result{}))
	}
}

// Exit is what a row expects of one reconcile.
type Exit struct {
	// Err is the class of what the reconcile ended with: the error returned
	// (None: no error), or Conflict: no error, again after about
	// apierr.ConflictRetry, counted in trellis_reconcile_conflicts_total.
	Err apierr.Class
	Requeue
	// Ready is Ready's reason afterwards; "" when the object has no Ready
	// (no status was ever written) or is gone.
	Ready string
	// Also is a condition besides Ready expected True (Reconciling, Stalled).
	Also string
	// StatusWrites is how many status writes reached the API server.
	StatusWrites int
	// Events are "<type> <reason>" of the Events raised, in order.
	Events []string
	// Gone: the finalizer went, and the object with it.
	Gone bool
}

// Got is what one reconcile did.
type Got struct {
	Result ctrl.Result
	Err    error
	// API is the fake API server it ran against.
	API *testenv.Fake
	// Events are "<type> <reason>" of the Events it raised.
	Events []string
	// Conflicts is how many conflicts it counted (the exit tables run in
	// binaries of their own, with no manager counting beside them).
	Conflicts float64
}

// Check checks what a reconcile did against the row; obj is read back, and
// conds are its conditions then.
func (w Exit) Check(g gomega.Gomega, got Got, obj client.Object, conds func() []metav1.Condition) {
	if w.Err == apierr.Conflict {
		g.Expect(got.Err).NotTo(gomega.HaveOccurred(), "a conflict is no error")
		g.Expect(got.Result.RequeueAfter).To(gomega.BeNumerically("~", apierr.ConflictRetry, apierr.ConflictRetry/10), "again at once")
		g.Expect(got.Conflicts).To(gomega.Equal(1.0), "counted once")
	} else {
		g.Expect(apierr.Classify(got.Err)).To(gomega.Equal(w.Err), "error %v", got.Err)
		g.Expect(got.Conflicts).To(gomega.BeZero(), "no conflict counted")
		w.Requeue.Check(g, got.Result)
	}
	g.Expect(testenv.StatusWrites(got.API.Writes())).To(gomega.Equal(w.StatusWrites), "status writes %v", got.API.Writes())
	g.Expect(got.Events).To(gomega.Equal(w.Events))
	if w.Gone {
		g.Expect(Read(g, got.API, obj)).To(gomega.BeFalse(), "let go")
		return
	}
	g.Expect(Read(g, got.API, obj)).To(gomega.BeTrue())
	ready := conditions.Get(conds(), conditions.Ready)
	if w.Ready == "" {
		g.Expect(ready).To(gomega.BeNil(), "no status written")
		return
	}
	g.Expect(ready).NotTo(gomega.BeNil())
	g.Expect(ready.Reason).To(gomega.Equal(w.Ready), ready.Message)
	for _, typ := range []string{conditions.Reconciling, conditions.Stalled} {
		g.Expect(conditions.IsTrue(conds(), typ)).To(gomega.Equal(typ == w.Also), typ)
	}
}
