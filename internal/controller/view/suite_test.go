package view

import (
	"context"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
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
	// The manager's own controller, plus a handle on an identical reconciler
	// (same counted client) so tests can call Reconcile directly.
	ctl := Controller
	ctl.Setup = func(ctx context.Context, mgr ctrl.Manager, o setup.Options) (err error) {
		if reconciler, err = NewReconciler(mgr, o); err != nil {
			return err
		}
		return reconciler.SetupWithManager(ctx, mgr, o)
	}
	suite := &testenv.Suite{
		AddToScheme: []func(*k8sruntime.Scheme) error{viewv1.AddToScheme, gatewayv1.Install},
		GatewayAPI:  true,
		// config/admission as shipped: who may ask for what in a MarkdownView,
		// and Tenants' allowances, which bind the manager's writes too.
		Admission:   true,
		Options:     func(opts *manager.Options) { opts.ViewerImage = testViewerImage },
		Controllers: []setup.Controller{ctl},
		Wrap:        func(cfg *rest.Config) *rest.Config { return mvReads.wrap(mgrWrites.Wrap(cfg)) },
	}
	os.Exit(suite.Run(m, func(s *testenv.Suite) error {
		k8s, adminCfg = s.Client, s.Config
		return nil
	}))
}
