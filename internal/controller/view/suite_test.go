package view

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/manager"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// Shared by the tests in this package: a real API server, a manager running
// this controller with a write-counting client, and a direct client for the test.
var (
	k8s        client.Client
	adminCfg   *rest.Config // the test's own (cluster-admin) connection, for impersonation
	mgrWrites  testenv.WriteCounter
	mvReads    viewReads
	reconciler *Reconciler
)

// viewReads counts the manager's GETs of single MarkdownViews: the reads
// around the cache that fetch a view's files.
type viewReads struct {
	mu sync.Mutex
	n  map[string]int // by request path
}

func (v *viewReads) wrap(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodGet && req.URL.Query().Get("watch") == "" &&
				strings.HasPrefix(req.URL.Path, "/apis/view.trellis.dev/v1/namespaces/") &&
				strings.Count(strings.TrimPrefix(req.URL.Path, "/apis/view.trellis.dev/v1/namespaces/"), "/") == 2 {
				v.mu.Lock()
				if v.n == nil {
					v.n = map[string]int{}
				}
				v.n[req.URL.Path]++
				v.mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	return out
}

// of returns how many times the MarkdownView was read so far.
func (v *viewReads) of(view types.NamespacedName) int {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.n["/apis/view.trellis.dev/v1/namespaces/"+view.Namespace+"/markdownviews/"+view.Name]
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

const testViewerImage = "example.com/viewer:test"

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	testenv.SetLogger()
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(viewv1.AddToScheme(scheme))
	utilruntime.Must(gatewayv1.Install(scheme))

	gatewayCRDs, err := testenv.GatewayAPICRDs()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env, cfg, err := testenv.Start(scheme, gatewayCRDs)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() { _ = env.Stop() }()
	adminCfg = cfg

	k8s, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// config/admission as shipped: who may ask for what in a MarkdownView,
	// and Tenants' allowances, which bind the manager's writes too.
	if err := testenv.InstallAdmission(ctx, k8s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
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
	ctl := Controller
	ctl.Setup = func(ctx context.Context, mgr ctrl.Manager, o setup.Options) error {
		if reconciler, err = NewReconciler(mgr, o); err != nil {
			return err
		}
		return reconciler.SetupWithManager(ctx, mgr, o)
	}
	mgr, err := manager.New(ctx, mvReads.wrap(mgrWrites.Wrap(managerCfg)), scheme, opts, []setup.Controller{ctl})
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
