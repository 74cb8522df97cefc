package view

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/manager"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// ownAPIServer starts an API server for one test that runs a manager of its
// own beside the suite's: its config, an admin client and the scheme (the
// Gateway API types included, whether or not the server has their CRDs). It
// is stopped when the test ends.
func ownAPIServer(t *testing.T) (*rest.Config, client.Client, *k8sruntime.Scheme) {
	t.Helper()
	scheme := k8sruntime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(viewv1.AddToScheme(scheme))
	utilruntime.Must(gatewayv1.Install(scheme))
	env, cfg, err := testenv.Start(scheme)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cfg, c, scheme
}

// startViewManager runs a manager with this controller only against cfg,
// with the manager's default options; adjust, when not nil, changes them or
// the controller first. It returns the manager's (cached) client and how to
// stop it.
func startViewManager(g Gomega, cfg *rest.Config, scheme *k8sruntime.Scheme, adjust func(*manager.Options, *setup.Controller)) (client.Client, func() error) {
	opts := manager.NewOptions()
	opts.Namespace = testenv.ManagerNamespace
	opts.MetricsAddr, opts.ProbeAddr = "0", "0"
	ctl := Controller
	ctl.Setup = func(ctx context.Context, mgr ctrl.Manager, o setup.Options) error {
		r, err := NewReconciler(mgr, o)
		if err != nil {
			return err
		}
		co := o.ControllerOptions()
		co.SkipNameValidation = ptr.To(true) // the suite's manager has one of this name already
		return r.setupWith(ctx, mgr, co)
	}
	if adjust != nil {
		adjust(opts, &ctl)
	}
	mgr, err := manager.New(context.Background(), cfg, scheme, opts, []setup.Controller{ctl})
	g.Expect(err).NotTo(HaveOccurred())
	stop, err := testenv.RunManager(mgr)
	g.Expect(err).NotTo(HaveOccurred())
	return mgr.GetClient(), stop
}
