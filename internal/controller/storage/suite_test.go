package storage

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/controller/storage/bucketevents"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/manager"
	"github.com/trellis-dev/trellis/internal/s3"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// Shared by the tests: a real API server, a real versitygw behind a counting
// proxy, and the manager running both storage controllers as its
// ServiceAccount under config/rbac/role.yaml, with the bucket-event receiver on.
var (
	k8s          client.Client
	s3srv        *testenv.S3Server
	mgrWrites    testenv.WriteCounter
	eventsURL    string
	eventsToken  = "test-token-0123456789abcdef"
	managerNS    = testenv.ManagerNamespace
	credsSecret  = "s3-credentials"
	tokenSecret  = "bucket-events"
	testS3Config func() s3.Config
	// adminCfg is the test's own (cluster-admin) connection, for impersonation.
	adminCfg *rest.Config
	// mgrShared is what the manager's controllers keep in memory.
	mgrShared = &shared{}
	// mgrCache is the manager's cache: what its controllers and the sweep read.
	mgrCache client.Reader
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if testenv.OwnProcess() {
		return m.Run() // a memory test alone, with no API server beside it
	}
	eventsAddr := freeAddr()
	eventsURL = "http://" + eventsAddr + "/bucket-events"
	ctl := setup.Controller{Name: ControllerName, Setup: func(ctx context.Context, mgr ctrl.Manager, o setup.Options) error {
		mgrCache = mgr.GetCache()
		return setupWith(ctx, mgr, o, stores.Backends{
			S3: func(c s3.Config) (s3.Client, error) {
				c.Timeout = 2 * time.Second
				return s3.New(c)
			},
			Accounts: func(c s3.Config, store *storagev1.ObjectStore) (s3.Accounts, error) {
				c.Timeout = 2 * time.Second
				return stores.NewAccounts(c, store)
			},
		}, mgrShared)
	}}
	suite := &testenv.Suite{
		AddToScheme: []func(*runtime.Scheme) error{storagev1.AddToScheme},
		// config/admission as shipped: StorageBuckets and BucketAccesses
		// get their finalizers as they are created, and the writes counted
		// here are those of a `make deploy`.
		Admission: true,
		// The roles config/rbac gives people, for the tests that act as a
		// namespace editor (envtest runs no aggregation controller, so they
		// are bound next to the built-in edit role instead of through it),
		// and the receiver's token.
		Prepare: func(ctx context.Context, s *testenv.Suite) error {
			if err := waitForFinalizerPolicies(ctx, s.Client); err != nil {
				return err
			}
			if err := testenv.ApplyClusterRoles(ctx, s.Client, "config/rbac/storage_roles.yaml"); err != nil {
				return err
			}
			return s.Client.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: managerNS, Name: tokenSecret},
				Data:       map[string][]byte{bucketevents.TokenKey: []byte(eventsToken)},
			})
		},
		Options: func(opts *manager.Options) {
			opts.MaxConcurrentReconciles.Default = 2
			opts.StorageSweepInterval = sweepInterval
			opts.BucketEventsAddr, opts.BucketEventsSecret = eventsAddr, tokenSecret
		},
		Controllers: []setup.Controller{ctl},
		Wrap:        mgrWrites.Wrap,
	}
	defer func() {
		if s3srv != nil {
			s3srv.Close()
		}
		stopSeaweedFS()
		stopMinIO()
	}()
	return suite.Run(m, func(s *testenv.Suite) error {
		k8s, adminCfg = s.Client, s.Config
		// versitygw checks its webhook at start, so the receiver must be up first.
		if err := waitListening(eventsAddr); err != nil {
			return err
		}
		var err error
		if s3srv, err = testenv.StartS3(eventsURL + "?token=" + eventsToken); err != nil {
			return err
		}
		testS3Config = func() s3.Config {
			return s3.Config{Endpoint: s3srv.Direct, Region: "us-east-1", PathStyle: true, AccessKey: s3srv.AccessKey, SecretKey: s3srv.SecretKey}
		}
		return k8s.Create(context.Background(), &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: managerNS, Name: credsSecret},
			Data:       map[string][]byte{stores.AccessKeyIDKey: []byte(s3srv.AccessKey), stores.SecretAccessKeyKey: []byte(s3srv.SecretKey)},
		})
	})
}

// waitForFinalizerPolicies waits until a StorageBucket and a BucketAccess
// are created with their finalizers (dry runs): the API server loads a
// policy within a second, and, for up to 5 s after a CRD is installed,
// answers the creates a mutating policy matches with 503 until it has the
// CRD's schema.
func waitForFinalizerPolicies(ctx context.Context, c client.Client) error {
	if serves, err := testenv.ServesMutatingPolicies(c); err != nil || !serves {
		return err // none to wait for: the controller adds the finalizer itself
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		b := newBucket("default", "probe", "probe")
		a := newAccess("default", "probe", "probe", "probe", storagev1.AccessReadOnly)
		errB := c.Create(ctx, b, client.DryRunAll)
		errA := c.Create(ctx, a, client.DryRunAll)
		if errB == nil && errA == nil && slices.Contains(b.Finalizers, stores.BucketFinalizer) && slices.Contains(a.Finalizers, stores.AccessFinalizer) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("config/admission: a StorageBucket or BucketAccess is still created without its finalizer (%v, %v)", errB, errA)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
