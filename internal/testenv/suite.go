package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/manager"
)

// Suite is the envtest set-up a controller package's tests share: a real
// API server with Trellis' CRDs (and, if asked, the Gateway API's and
// config/admission), and a manager that runs the package's controllers as
// the manager's ServiceAccount, bound to exactly config/rbac/role.yaml (a
// permission the markers do not grant fails the tests). The fields above
// the line say what to start; Start fills in those below it.
type Suite struct {
	// AddToScheme adds the API types the tests use to client-go's.
	AddToScheme []func(*k8sruntime.Scheme) error
	// GatewayAPI installs the Gateway API's CRDs (GatewayAPICRDs).
	GatewayAPI bool
	// Admission installs config/admission as shipped (InstallAdmission).
	Admission bool
	// FluxSource installs Flux source-controller's CRDs and runs
	// source-controller itself (StartSourceController).
	FluxSource bool
	// Prepare, if set, runs once the API server is up (with config/admission
	// installed, and the manager's namespace and ServiceAccount created),
	// before the manager starts.
	Prepare func(ctx context.Context, s *Suite) error
	// Options, if set, changes the manager's options after the suite's
	// defaults: no metrics or probe listener, the manager namespace.
	Options func(*manager.Options)
	// Controllers are what the manager runs.
	Controllers []setup.Controller
	// Wrap, if set, wraps the manager's connection (WriteCounter.Wrap, say).
	Wrap func(*rest.Config) *rest.Config

	// Scheme holds client-go's types and AddToScheme's.
	Scheme *k8sruntime.Scheme
	// Config is the tests' own connection: cluster-admin, for impersonation.
	Config *rest.Config
	// Client is a client on Config.
	Client client.Client
	// SourceController is the running source-controller, with FluxSource.
	SourceController *SourceController

	env         *envtest.Environment
	stopManager func() error
}

// Start starts the API server, runs Prepare, then starts the manager and
// waits for its caches. On an error, what was started is stopped.
func (s *Suite) Start(ctx context.Context) (err error) {
	s.Scheme = k8sruntime.NewScheme()
	for _, add := range append([]func(*k8sruntime.Scheme) error{clientgoscheme.AddToScheme}, s.AddToScheme...) {
		if err := add(s.Scheme); err != nil {
			return err
		}
	}
	var crdDirs []string
	if s.GatewayAPI {
		dir, err := GatewayAPICRDs()
		if err != nil {
			return err
		}
		crdDirs = append(crdDirs, dir)
	}
	if s.FluxSource {
		dir, err := SourceControllerCRDs()
		if err != nil {
			return err
		}
		crdDirs = append(crdDirs, dir)
	}
	if s.env, s.Config, err = Start(s.Scheme, crdDirs...); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Stop())
		}
	}()
	if s.Client, err = client.New(s.Config, client.Options{Scheme: s.Scheme}); err != nil {
		return err
	}
	if s.Admission {
		if err := InstallAdmission(ctx, s.Client); err != nil {
			return err
		}
	}
	if s.FluxSource {
		if s.SourceController, err = StartSourceController(s.Config); err != nil {
			return err
		}
	}
	managerCfg, err := AsManager(ctx, s.Config, s.Client)
	if err != nil {
		return err
	}
	if s.Prepare != nil {
		if err := s.Prepare(ctx, s); err != nil {
			return err
		}
	}
	if s.Wrap != nil {
		managerCfg = s.Wrap(managerCfg)
	}
	opts := manager.NewOptions()
	opts.MetricsAddr, opts.ProbeAddr = "0", "0"
	opts.Namespace = ManagerNamespace
	if s.Options != nil {
		s.Options(opts)
	}
	mgr, err := manager.New(ctx, managerCfg, s.Scheme, opts, s.Controllers)
	if err != nil {
		return err
	}
	s.stopManager, err = RunManager(mgr)
	return err
}

// Stop stops the manager, then source-controller, then the API server, and reports how the manager
// ended. (How the API server ended is not the tests' business: on a loaded
// machine, envtest may time out waiting for it to exit.)
func (s *Suite) Stop() error {
	var err error
	if s.stopManager != nil {
		if merr := s.stopManager(); merr != nil {
			err = fmt.Errorf("manager: %w", merr)
		}
		s.stopManager = nil
	}
	if s.SourceController != nil {
		if serr := s.SourceController.Stop(); serr != nil {
			err = errors.Join(err, fmt.Errorf("source-controller: %w", serr))
		}
		s.SourceController = nil
	}
	if s.env != nil {
		_ = s.env.Stop()
		s.env = nil
	}
	return err
}

// Run is a package's TestMain: it starts the suite, calls started (if not
// nil: to hand the suite's clients to the tests, or to start what needs the
// manager running), runs the tests and stops the suite. It returns the exit
// code: 1 when the suite could not start or stop cleanly.
func (s *Suite) Run(m *testing.M, started func(*Suite) error) int {
	SetLogger()
	if err := s.Start(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var err error
	if started != nil {
		err = started(s)
	}
	code := 1
	if err == nil {
		code = m.Run()
	} else {
		fmt.Fprintln(os.Stderr, err)
	}
	if err := s.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return code
}
