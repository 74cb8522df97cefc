package storage

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/controller/setup"
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
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	if testenv.OwnProcess() {
		return m.Run() // a memory test alone, with no API server beside it
	}
	testenv.SetLogger()
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(storagev1.AddToScheme(scheme))

	env, cfg, err := testenv.Start(scheme)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	adminCfg = cfg
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	managerCfg, err := testenv.AsManager(ctx, cfg, k8s)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	// The roles config/rbac gives people, for the tests that act as a
	// namespace editor (envtest runs no aggregation controller, so they are
	// bound next to the built-in edit role instead of through it).
	if err := testenv.ApplyClusterRoles(ctx, k8s, "config/rbac/storage_roles.yaml"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: managerNS, Name: tokenSecret},
		Data:       map[string][]byte{TokenKey: []byte(eventsToken)},
	}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	opts := manager.NewOptions()
	opts.MetricsAddr, opts.ProbeAddr = "0", "0"
	opts.Namespace = managerNS
	opts.MaxConcurrentReconciles.Default = 2
	opts.StorageSweepInterval = sweepInterval
	eventsAddr := freeAddr()
	opts.BucketEventsAddr, opts.BucketEventsSecret = eventsAddr, tokenSecret
	eventsURL = "http://" + eventsAddr + "/bucket-events"
	ctl := setup.Controller{Name: ControllerName, Setup: func(ctx context.Context, mgr ctrl.Manager, o setup.Options) error {
		return setupWith(ctx, mgr, o, Backends{
			S3: func(c s3.Config) (s3.Client, error) {
				c.Timeout = 2 * time.Second
				return s3.New(c)
			},
			Accounts: func(c s3.Config, adminEndpoint string) (s3.Accounts, error) {
				c.Timeout = 2 * time.Second
				return s3.NewVersitygwAccounts(c, adminEndpoint)
			},
		}, mgrShared)
	}}
	mgr, err := manager.New(ctx, mgrWrites.Wrap(managerCfg), scheme, opts, []setup.Controller{ctl})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	stopManager, err := testenv.RunManager(mgr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	// versitygw checks its webhook at start, so the receiver must be up first.
	if err := waitListening(eventsAddr); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s3srv, err = testenv.StartS3(eventsURL + "?token=" + eventsToken)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer s3srv.Close()
	testS3Config = func() s3.Config {
		return s3.Config{Endpoint: s3srv.Direct, Region: "us-east-1", PathStyle: true, AccessKey: s3srv.AccessKey, SecretKey: s3srv.SecretKey}
	}
	if err := k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: managerNS, Name: credsSecret},
		Data:       map[string][]byte{AccessKeyIDKey: []byte(s3srv.AccessKey), SecretAccessKeyKey: []byte(s3srv.SecretKey)},
	}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	code := m.Run()
	if err := stopManager(); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	return code
}
