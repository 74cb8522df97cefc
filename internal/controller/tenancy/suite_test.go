package tenancy

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/manager"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// Shared by the tests: a real API server with RBAC on, the manager running
// this controller as its ServiceAccount under config/rbac/role.yaml, and an
// admin client for the test itself.
var (
	k8s        client.Client
	adminCfg   *rest.Config
	mgrWrites  testenv.WriteCounter
	reconciler *Reconciler
)

func TestMain(m *testing.M) {
	suite := newSuite(&mgrWrites, &reconciler, false)
	os.Exit(suite.Run(m, func(s *testenv.Suite) error {
		k8s, adminCfg = s.Client, s.Config
		return nil
	}))
}

// newSuite is this package's envtest suite: config/admission as shipped (so
// the tests run under the policies that keep tenant admins from loosening
// guardrails, enforce Tenants' allowances and put the finalizer on every
// Tenant as it is created), the Gateway API's CRDs (the allowances are
// tested on HTTPRoutes), and a manager running the Tenant controller, its
// writes counted in writes and its pod lists in podReads, a handle on its
// reconciler put in r. beside
// says the suite starts beside the package's (a test's own API server): the
// controller's name is taken in this process already.
func newSuite(writes *testenv.WriteCounter, r **Reconciler, beside bool) *testenv.Suite {
	ctl := Controller
	ctl.Setup = func(ctx context.Context, mgr ctrl.Manager, o setup.Options) error {
		extra, err := CompileProtectedPattern(o.TenantProtectedNamespaces)
		if err != nil {
			return err
		}
		*r = NewReconciler(mgr, o, Protection{ManagerNamespace: o.Namespace, Extra: extra})
		co := o.ControllerOptions()
		co.SkipNameValidation = ptr.To(beside)
		return (*r).setupWith(ctx, mgr, co)
	}
	return &testenv.Suite{
		AddToScheme: []func(*k8sruntime.Scheme) error{tenancyv1.AddToScheme, apiextensionsv1.AddToScheme, gatewayv1.Install},
		GatewayAPI:  true,
		Admission:   true,
		Prepare:     func(ctx context.Context, s *testenv.Suite) error { return waitForFinalizerPolicy(ctx, s.Client) },
		Options: func(opts *manager.Options) {
			opts.TenantProtected = "protected-.*"
			opts.TenantReverifyInterval = 2 * time.Second
		},
		Controllers: []setup.Controller{ctl},
		Wrap:        func(c *rest.Config) *rest.Config { return podReads.Wrap(writes.Wrap(c)) },
	}
}

// waitForFinalizerPolicy waits until a Tenant is created with its finalizer
// (a dry run): the API server loads a policy within a second, and, for up
// to 5 s after a CRD is installed, answers the creates a mutating policy
// matches with 503 until it has the CRD's schema.
func waitForFinalizerPolicy(ctx context.Context, c client.Client) error {
	if serves, err := testenv.ServesMutatingPolicies(c); err != nil || !serves {
		return err // none to wait for: the controller adds the finalizer itself
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		probe := newTenant("probe", "probe-", "a")
		err := c.Create(ctx, probe, client.DryRunAll)
		if err == nil && slices.Contains(probe.Finalizers, Finalizer) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("config/admission: a Tenant is still created without its finalizer (%v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
