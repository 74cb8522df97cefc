package tenancy

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
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
	testEnv    *envtest.Environment
	mgrWrites  testenv.WriteCounter
	reconciler *Reconciler
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	testenv.SetLogger()
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(tenancyv1.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	utilruntime.Must(gatewayv1.Install(scheme))

	// The Gateway API CRDs: the allowances policy is tested on HTTPRoutes.
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
	testEnv, adminCfg = env, cfg
	defer func() { _ = env.Stop() }()
	if k8s, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := installAdmissionPolicy(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	managerCfg, err := testenv.AsManager(ctx, cfg, k8s)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	opts := manager.NewOptions()
	opts.MetricsAddr, opts.ProbeAddr = "0", "0"
	opts.Namespace = testenv.ManagerNamespace
	opts.TenantProtected = "protected-.*"
	opts.TenantReverifyInterval = 2 * time.Second
	ctl := setup.Controller{
		Name:       Controller.Name,
		Owned:      Controller.Owned,
		Transforms: Controller.Transforms,
		Recognise:  Controller.Recognise, ForeignKeys: Controller.ForeignKeys,
		Setup: func(ctx context.Context, mgr ctrl.Manager, o setup.Options) error {
			extra, err := CompileProtectedPattern(o.TenantProtectedNamespaces)
			if err != nil {
				return err
			}
			reconciler = NewReconciler(mgr, o, Protection{ManagerNamespace: o.Namespace, Extra: extra})
			return reconciler.SetupWithManager(ctx, mgr, o)
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

// installAdmissionPolicy installs config/admission as shipped, so the suite
// runs under the policies that keep tenant admins from loosening guardrails,
// enforce Tenants' allowances and put the finalizer on every Tenant as it is
// created.
func installAdmissionPolicy(ctx context.Context) error {
	if err := testenv.InstallAdmission(ctx, k8s); err != nil {
		return err
	}
	return waitForFinalizerPolicy(ctx)
}

// waitForFinalizerPolicy waits until a Tenant is created with its finalizer
// (a dry run): the API server loads a policy within a second, and, for up
// to 5 s after a CRD is installed, answers the creates a mutating policy
// matches with 503 until it has the CRD's schema.
func waitForFinalizerPolicy(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		probe := newTenant("probe", "probe-", "a")
		err := k8s.Create(ctx, probe, client.DryRunAll)
		if err == nil && slices.Contains(probe.Finalizers, Finalizer) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("config/admission: a Tenant is still created without its finalizer (%v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
