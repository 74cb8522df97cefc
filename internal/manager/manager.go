package manager

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/leaderpod"
	"github.com/trellis-dev/trellis/internal/shard"
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

	member, err := opts.ShardMember()
	if err != nil {
		return nil, fmt.Errorf("--controller-ring: %w", err)
	}
	enabled, err := enabledControllers(opts, member, controllers)
	if err != nil {
		return nil, err
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
	optional, err := servedOptional(cfg, scheme, enabled)
	if err != nil {
		return nil, err
	}
	cacheOpts, err := cacheOptions(enabled, optional, opts.SyncPeriod, member)
	if err != nil {
		return nil, err
	}
	// A shard holds its own Lease instead of competing for the leader's,
	// and runs its controllers while it holds it, as a leader would.
	var shardLease resourcelock.Interface
	if member != nil {
		if shardLease, err = member.Lease(cfg, leNamespace); err != nil {
			return nil, fmt.Errorf("--controller-ring: %w", err)
		}
		shardInfo.WithLabelValues(member.Ring, member.Shard).Set(1)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                              scheme,
		Metrics:                             metrics,
		HealthProbeBindAddress:              opts.ProbeAddr,
		PprofBindAddress:                    opts.PprofAddr,
		LeaderElection:                      opts.LeaderElect || member != nil,
		LeaderElectionID:                    opts.LeaderElectionID,
		LeaderElectionNamespace:             leNamespace,
		LeaderElectionResourceLockInterface: shardLease,
		// We exit right after the manager stops, so handing over early is
		// safe; a shard's released Lease has the sharder move its objects at once.
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &opts.LeaseDuration,
		RenewDeadline:                 &opts.RenewDeadline,
		RetryPeriod:                   &opts.RetryPeriod,
		GracefulShutdownTimeout:       &opts.GracefulShutdownTimeout,
		Cache:                         cacheOpts,
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

	if opts.LeaderElect && opts.PodName != "" {
		// The leader's pod carries trellis.dev/leader, for Services that must reach the leader alone.
		l := &leaderpod.Labeller{Pod: types.NamespacedName{Namespace: opts.Namespace, Name: opts.PodName},
			Reader: mgr.GetAPIReader(), Writer: mgr.GetClient()}
		if err := l.SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("adding the leader pod labeller: %w", err)
		}
	}

	for _, c := range enabled {
		co := opts.ControllerOptions(c.Name)
		co.Shard = member
		for _, t := range optional[c.Name] {
			co.Served = append(co.Served, t.gvk)
		}
		if err := c.Setup(ctx, mgr, co); err != nil {
			return nil, fmt.Errorf("setting up controller %s: %w", c.Name, err)
		}
	}
	return mgr, nil
}

// enabledControllers are the controllers --controllers names (all when it
// names none). On a shard they are the Sharded ones: by default, only
// those; naming another is an error, since a shard sees only its share of
// the objects, and the others need every object (docs/scaling.md).
func enabledControllers(opts *Options, member *shard.Member, controllers []setup.Controller) ([]setup.Controller, error) {
	enabled := make([]setup.Controller, 0, len(controllers))
	var unsharded []string
	for _, c := range controllers {
		switch {
		case !opts.Enabled(c.Name):
		case member == nil || c.Sharded != nil:
			enabled = append(enabled, c)
		case len(opts.Controllers) > 0:
			unsharded = append(unsharded, c.Name)
		}
	}
	if len(unsharded) > 0 {
		return nil, fmt.Errorf("--controller-ring: the %s controllers do not run on a shard; run them in a replica of their own (--controllers, --leader-elect)", strings.Join(unsharded, ", "))
	}
	if len(enabled) == 0 {
		return nil, errors.New("no controller to run")
	}
	return enabled, nil
}

// keepOwnManagedFields drops every managedFields entry but Trellis' own from a
// cached child: a controller's transform extracts its applied configuration
// from it, and a controller may read the keys it set (ReadsManagedFields).
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

// servedType is an OptionalOwned type the API server serves.
type servedType struct {
	obj client.Object
	gvk schema.GroupVersionKind
}

// servedOptional looks up, once, which of the controllers' OptionalOwned
// types the API server serves. A missing type is logged and left out: the
// cache would fail to start on it, and a watch on it would fail forever.
func servedOptional(cfg *rest.Config, scheme *runtime.Scheme, controllers []setup.Controller) (map[string][]servedType, error) {
	var mapper meta.RESTMapper
	served := map[string][]servedType{}
	for _, c := range controllers {
		for _, obj := range c.OptionalOwned {
			gvk, err := apiutil.GVKForObject(obj, scheme)
			if err != nil {
				return nil, fmt.Errorf("controller %s: optional child type: %w", c.Name, err)
			}
			if mapper == nil {
				httpClient, err := rest.HTTPClientFor(cfg)
				if err != nil {
					return nil, err
				}
				if mapper, err = apiutil.NewDynamicRESTMapper(cfg, httpClient); err != nil {
					return nil, fmt.Errorf("discovering the API server's types: %w", err)
				}
			}
			_, err = mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			switch {
			case meta.IsNoMatchError(err):
				ctrl.Log.WithName("setup").Info("API not served: its objects are neither cached nor watched until the manager restarts",
					"controller", c.Name, "kind", gvk.String())
			case err != nil:
				return nil, fmt.Errorf("looking up %s: %w", gvk, err)
			default:
				served[c.Name] = append(served[c.Name], servedType{obj: obj, gvk: gvk})
			}
		}
	}
	return served, nil
}

// cacheOptions scopes the informers of owned child types (and of served
// optional ones) to objects Trellis manages, reduces the objects of those
// types that no owning controller recognises to bounded metadata
// (foreign.go), and applies the controllers' own transforms. It trims
// managedFields from every cached object: a child keeps Trellis' own entry
// through its controller's transform (which may extract what Trellis
// applied from it), and after it only if a controller reads it
// (ReadsManagedFields); any other object keeps none.
func cacheOptions(controllers []setup.Controller, optional map[string][]servedType, syncPeriod time.Duration, member *shard.Member) (cache.Options, error) {
	managed := labels.SelectorFromSet(labels.Set{setup.ManagedByLabel: setup.ManagedByValue})
	type entry struct {
		obj   client.Object
		owned bool
		// sharded: on a shard, only the objects the sharder assigned to it.
		sharded    bool
		recogniser recogniser
		transform  toolscache.TransformFunc
		all        bool
		declaredBy string
		// readsManagedFields keeps Trellis' managedFields entry in the cache.
		readsManagedFields bool
	}
	entries := map[string]*entry{}
	var order []string
	at := func(obj client.Object) *entry {
		key := fmt.Sprintf("%T", obj)
		e, ok := entries[key]
		if !ok {
			e = &entry{obj: obj}
			entries[key] = e
			order = append(order, key)
		}
		return e
	}
	for _, c := range controllers {
		if c.Recognise == nil && len(c.Owned)+len(optional[c.Name]) > 0 {
			return cache.Options{}, fmt.Errorf("controller %s owns child types but declares no Recognise", c.Name)
		}
		for _, obj := range c.Owned {
			at(obj).owned = true
			at(obj).recogniser.add(c)
			at(obj).sharded = c.Sharded != nil
		}
		for _, t := range optional[c.Name] {
			at(t.obj).owned = true
			at(t.obj).recogniser.add(c)
			at(t.obj).sharded = c.Sharded != nil
		}
		if c.Sharded != nil {
			at(c.Sharded).sharded = true
		}
		for _, obj := range c.ReadsManagedFields {
			at(obj).readsManagedFields = true
		}
		unserved := map[string]bool{}
		for _, obj := range c.OptionalOwned {
			unserved[fmt.Sprintf("%T", obj)] = true
		}
		for _, t := range optional[c.Name] {
			delete(unserved, fmt.Sprintf("%T", t.obj))
		}
		for _, t := range c.Transforms {
			if unserved[fmt.Sprintf("%T", t.Object)] {
				continue // neither cached nor watched
			}
			e := at(t.Object)
			if e.transform != nil {
				return cache.Options{}, fmt.Errorf("controllers %s and %s both transform cached %T objects", e.declaredBy, c.Name, t.Object)
			}
			e.transform, e.all, e.declaredBy = t.Func, t.All, c.Name
		}
	}
	// On a shard, the sharded kinds' objects are those whose shard label
	// names this shard: the sharder's webhook assigns every object of the
	// ring, a child to its controller's shard.
	var mine labels.Requirements
	if member != nil {
		r, err := labels.NewRequirement(member.ShardLabel(), selection.Equals, []string{member.Shard})
		if err != nil {
			return cache.Options{}, fmt.Errorf("the shard label selector: %w", err)
		}
		mine = labels.Requirements{*r}
	}
	byObject := map[client.Object]cache.ByObject{}
	for _, key := range order {
		e := entries[key]
		var strip toolscache.TransformFunc
		if !e.readsManagedFields {
			strip = cache.TransformStripManagedFields()
		}
		var o cache.ByObject
		switch {
		case e.owned && e.all:
			o = cache.ByObject{Label: labels.Everything(), Transform: chain(keepOwnManagedFields, e.transform, strip)}
		case e.owned:
			o = cache.ByObject{Label: managed, Transform: chain(keepOwnManagedFields, reduceForeign(&e.recogniser, e.transform), strip)}
		default:
			o = cache.ByObject{Label: labels.Everything(), Transform: chain(cache.TransformStripManagedFields(), e.transform)}
		}
		if e.sharded && member != nil {
			o.Label = o.Label.Add(mine...)
			o.Transform = keepRingLabels(member, o.Transform)
		}
		if o.Label.Empty() {
			o.Label = nil
		}
		byObject[e.obj] = o
	}
	return cache.Options{
		SyncPeriod:       &syncPeriod,
		ByObject:         byObject,
		DefaultTransform: cache.TransformStripManagedFields(),
	}, nil
}

// keepRingLabels runs transform, then puts the ring's shard and drain
// labels back on the object: a shard reads them (a drained object is
// handed on), and a controller's transform may drop labels. Two labels, of
// one ring: what the cache keeps stays bounded.
func keepRingLabels(m *shard.Member, transform toolscache.TransformFunc) toolscache.TransformFunc {
	keys := []string{m.ShardLabel(), m.DrainLabel()}
	return func(in any) (any, error) {
		obj, ok := in.(metav1.Object)
		if !ok {
			return transform(in)
		}
		kept := map[string]string{}
		for _, k := range keys {
			if v, ok := obj.GetLabels()[k]; ok {
				kept[k] = v
			}
		}
		out, err := transform(in)
		if err != nil || len(kept) == 0 {
			return out, err
		}
		if obj, ok = out.(metav1.Object); ok {
			labels := obj.GetLabels()
			if labels == nil {
				labels = map[string]string{}
			}
			maps.Copy(labels, kept)
			obj.SetLabels(labels)
		}
		return out, nil
	}
}

// chain runs the transforms in order, skipping nil ones.
func chain(fs ...toolscache.TransformFunc) toolscache.TransformFunc {
	return func(in any) (any, error) {
		var err error
		for _, f := range fs {
			if f == nil {
				continue
			}
			if in, err = f(in); err != nil {
				return nil, err
			}
		}
		return in, nil
	}
}
