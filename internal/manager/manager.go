package manager

import (
	"context"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/trellis-dev/trellis/internal/controller/setup"
)

// New builds the Manager for the given options and registers every enabled controller.
func New(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, opts *Options, controllers []setup.Controller) (ctrl.Manager, error) {
	cfg = rest.CopyConfig(cfg)
	// The API server names the field manager of a write without one after the
	// user agent's first word: "trellis", like every write of the client below.
	cfg.UserAgent = setup.FieldManager + "/manager"
	cfg.QPS = float32(opts.KubeAPIQPS)
	cfg.Burst = opts.KubeAPIBurst
	cfg.Wrap(countRequests)

	enabled := make([]setup.Controller, 0, len(controllers))
	for _, c := range controllers {
		if opts.Enabled(c.Name) {
			enabled = append(enabled, c)
		}
	}

	metrics := metricsserver.Options{BindAddress: opts.MetricsAddr, SecureServing: opts.SecureMetrics}
	if opts.SecureMetrics {
		// Scrapers must present a token allowed to GET /metrics (config/rbac/metrics_reader_role.yaml).
		metrics.FilterProvider = filters.WithAuthenticationAndAuthorization
	}

	leNamespace := opts.LeaderElectionNamespace
	if leNamespace == "" {
		leNamespace = opts.Namespace
	}
	syncPeriod := opts.SyncPeriod
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Metrics:                       metrics,
		HealthProbeBindAddress:        opts.ProbeAddr,
		PprofBindAddress:              opts.PprofAddr,
		LeaderElection:                opts.LeaderElect,
		LeaderElectionID:              opts.LeaderElectionID,
		LeaderElectionNamespace:       leNamespace,
		LeaderElectionReleaseOnCancel: true, // we exit right after the manager stops, so handing over early is safe
		LeaseDuration:                 &opts.LeaseDuration,
		RenewDeadline:                 &opts.RenewDeadline,
		RetryPeriod:                   &opts.RetryPeriod,
		GracefulShutdownTimeout:       &opts.GracefulShutdownTimeout,
		Cache:                         cacheOptions(enabled, syncPeriod),
		Client: client.Options{FieldOwner: setup.FieldManager, Cache: &client.CacheOptions{
			// Secrets are read one at a time, straight from the API server, so
			// the manager never holds (or needs RBAC to list) every Secret.
			DisableFor: []client.Object{&corev1.Secret{}},
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, fmt.Errorf("adding health check: %w", err)
	}
	// Ready once the informers have synced, so a rolling update waits for a warm cache.
	if err := mgr.AddReadyzCheck("readyz", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return fmt.Errorf("informer caches not synced")
		}
		return nil
	}); err != nil {
		return nil, fmt.Errorf("adding ready check: %w", err)
	}

	for _, c := range enabled {
		if err := c.Setup(ctx, mgr, opts.ControllerOptions(c.Name)); err != nil {
			return nil, fmt.Errorf("setting up controller %s: %w", c.Name, err)
		}
	}
	return mgr, nil
}

// keepOwnManagedFields drops every managedFields entry but Trellis' own from a
// cached child: the controllers extract their applied configuration from it to
// skip no-op applies, and nothing else is worth the memory.
func keepOwnManagedFields(in any) (any, error) {
	obj, ok := in.(metav1.Object)
	if !ok {
		return in, nil
	}
	fields := obj.GetManagedFields()
	kept := fields[:0:0]
	for _, f := range fields {
		if f.Manager == setup.FieldManager {
			kept = append(kept, f)
		}
	}
	obj.SetManagedFields(kept)
	return in, nil
}

// cacheOptions scopes the informers of owned child types to objects Trellis
// manages, and drops managedFields from everything else cached (they are large
// and never read from the cache).
func cacheOptions(controllers []setup.Controller, syncPeriod time.Duration) cache.Options {
	managed := labels.SelectorFromSet(labels.Set{setup.ManagedByLabel: setup.ManagedByValue})
	byObject := map[client.Object]cache.ByObject{}
	seen := map[string]bool{}
	for _, c := range controllers {
		for _, obj := range c.Owned {
			key := fmt.Sprintf("%T", obj)
			if seen[key] {
				continue
			}
			seen[key] = true
			byObject[obj] = cache.ByObject{Label: managed, Transform: keepOwnManagedFields}
		}
	}
	return cache.Options{
		SyncPeriod:       &syncPeriod,
		ByObject:         byObject,
		DefaultTransform: cache.TransformStripManagedFields(),
	}
}
