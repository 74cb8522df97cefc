package view

import (
	"context"
	"fmt"
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/manager"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// Shared by the tests in this package: a real API server, a manager running
// this controller with a write-counting client, and a direct client for the test.
var (
	k8s        client.Client
	mgrWrites  testenv.WriteCounter
	reconciler *Reconciler
)

const testViewerImage = "example.com/viewer:test"

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	testenv.SetLogger()
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(viewv1.AddToScheme(scheme))

	env, cfg, err := testenv.Start(scheme)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()

	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The manager runs as its ServiceAccount, bound to exactly the generated
	// config/rbac/role.yaml: a permission the markers do not grant fails here.
	managerCfg, err := testenv.AsManager(ctx, cfg, k8s)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	opts := manager.NewOptions()
	opts.Namespace = testenv.ManagerNamespace
	opts.MetricsAddr, opts.ProbeAddr = "0", "0"
	opts.ViewerImage = testViewerImage
	// The manager's own controller, plus a handle on an identical reconciler
	// (same counted client) so tests can call Reconcile directly.
	ctl := setup.Controller{
		Name:  Controller.Name,
		Owned: Controller.Owned,
		Setup: func(_ context.Context, mgr ctrl.Manager, o setup.Options) error {
			reconciler = NewReconciler(mgr, o)
			return reconciler.SetupWithManager(mgr, o)
		},
	}
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

	code := m.Run()
	if err := stopManager(); err != nil {
		fmt.Fprintln(os.Stderr, "manager:", err)
		return 1
	}
	return code
}
