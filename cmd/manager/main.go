// Command manager runs the Trellis controllers.
package main

import (
	"flag"
	"fmt"
	"os"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/controller/storage"
	"github.com/trellis-dev/trellis/internal/controller/tenancy"
	"github.com/trellis-dev/trellis/internal/controller/view"
	"github.com/trellis-dev/trellis/internal/manager"
	"github.com/trellis-dev/trellis/internal/memlimit"
	"github.com/trellis-dev/trellis/internal/version"
)

// controllers lists every controller the manager can run; --controllers picks among them.
var controllers = []setup.Controller{
	view.Controller,
	tenancy.Controller,
	storage.Controller,
}

func main() {
	opts := manager.NewOptions()
	opts.BindFlags(flag.CommandLine)
	zapOpts := zap.Options{Development: false}
	zapOpts.BindFlags(flag.CommandLine)
	showVersion := flag.Bool("version", false, "Print the version and exit.")
	flag.Parse()
	if *showVersion {
		fmt.Println("trellis-manager", version.Get())
		return
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")
	if limit := memlimit.Apply(); limit > 0 {
		log.Info("Go soft memory limit set to 90% of the container's", "bytes", limit)
	}

	names := make([]string, len(controllers))
	for i, c := range controllers {
		names[i] = c.Name
	}
	if err := opts.Validate(names); err != nil {
		log.Error(err, "invalid flags")
		os.Exit(2)
	}

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(viewv1.AddToScheme(scheme))
	utilruntime.Must(tenancyv1.AddToScheme(scheme))
	utilruntime.Must(storagev1.AddToScheme(scheme))
	utilruntime.Must(apiextensionsv1.AddToScheme(scheme))
	utilruntime.Must(gatewayv1.Install(scheme)) // HTTPRoutes, where the cluster serves them

	ctx := ctrl.SetupSignalHandler()
	mgr, err := manager.New(ctx, ctrl.GetConfigOrDie(), scheme, opts, controllers)
	if err != nil {
		log.Error(err, "unable to set up manager")
		os.Exit(1)
	}
	log.Info("starting manager", "controllers", names)
	if err := mgr.Start(ctx); err != nil {
		log.Error(err, "manager stopped with an error")
		os.Exit(1)
	}
}
