// Package manager turns the command-line flags into a controller-runtime Manager
// and registers the enabled controllers with it.
package manager

import (
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/trellis-dev/trellis/internal/concurrency"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/imagepolicy"
	"github.com/trellis-dev/trellis/internal/shard"
)

// Options holds every flag of the manager binary.
type Options struct {
	MetricsAddr   string
	SecureMetrics bool
	ProbeAddr     string
	PprofAddr     string

	LeaderElect             bool
	ControllerRing          string
	LeaderElectionID        string
	LeaderElectionNamespace string
	LeaseDuration           time.Duration
	RenewDeadline           time.Duration
	RetryPeriod             time.Duration
	GracefulShutdownTimeout time.Duration
	SyncPeriod              time.Duration
	KubeAPIQPS              float64
	KubeAPIBurst            int
	Namespace               string
	PodName                 string
	Controllers             stringList
	MaxConcurrentReconciles concurrency.Flag
	RateLimit               setup.RateLimit
	ViewerImage             string
	ViewerImageAllow        string
	ArtifactHosts           stringList
	TenantProtected         string
	TenantReverifyInterval  time.Duration
	BucketEventsAddr        string
	BucketEventsSecret      string
	StorageSweepInterval    time.Duration
}

// DefaultNamespace is where the manager runs when neither --namespace nor POD_NAMESPACE says otherwise.
const DefaultNamespace = "trellis-system"

// DefaultViewerImage is the viewer a MarkdownView gets when it names none
// (built from cmd/viewer by `make docker-build`).
const DefaultViewerImage = "trellis-viewer:dev"

// DefaultArtifactHost is where Flux's source-controller serves artifacts
// when installed as Flux installs it (its --storage-adv-addr).
const DefaultArtifactHost = "source-controller.flux-system.svc.cluster.local."

// NewOptions returns the defaults, before flags are parsed.
func NewOptions() *Options {
	ns := os.Getenv("POD_NAMESPACE")
	if ns == "" {
		ns = DefaultNamespace
	}
	return &Options{
		MetricsAddr:             ":8443",
		SecureMetrics:           true,
		ProbeAddr:               ":8081",
		LeaderElectionID:        "trellis.trellis.dev",
		LeaseDuration:           15 * time.Second,
		RenewDeadline:           10 * time.Second,
		RetryPeriod:             2 * time.Second,
		GracefulShutdownTimeout: 30 * time.Second,
		SyncPeriod:              10 * time.Hour,
		// No client-side limit: the reconcile workers bound how many requests
		// are in flight, and the API server's Priority and Fairness shares
		// its capacity. Measured: docs/performance.md#chosen-defaults.
		KubeAPIQPS:              -1,
		KubeAPIBurst:            100,
		Namespace:               ns,
		PodName:                 os.Getenv("POD_NAME"),
		MaxConcurrentReconciles: concurrency.Flag{Default: 4, PerController: maps.Clone(defaultConcurrency), Defaults: defaultConcurrency},
		RateLimit:               setup.DefaultRateLimit,
		ViewerImage:             DefaultViewerImage,
		ArtifactHosts:           stringList{DefaultArtifactHost},
		TenantReverifyInterval:  time.Minute,
		StorageSweepInterval:    5 * time.Minute,
	}
}

// BindFlags registers the options on fs.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", o.MetricsAddr, "Address the metrics endpoint binds to; \"0\" disables it.")
	fs.BoolVar(&o.SecureMetrics, "metrics-secure", o.SecureMetrics, "Serve metrics over HTTPS, authenticated and authorized against the API server (TokenReview, SubjectAccessReview).")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", o.ProbeAddr, "Address the /healthz and /readyz probes bind to.")
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", o.PprofAddr, "Address for Go's pprof handlers; empty disables them.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", o.LeaderElect, "Elect a leader so only one replica reconciles and runs the periodic checks.")
	fs.StringVar(&o.ControllerRing, "controller-ring", o.ControllerRing, "Run as one shard of this kubernetes-controller-sharding ControllerRing (docs/scaling.md): no leader election; the replica holds a shard Lease of its own, named after its pod (--pod-name), and caches and reconciles only the objects the sharder assigns to it. Only the markdownview controller runs on a shard. Empty: not sharded.")
	fs.StringVar(&o.LeaderElectionID, "leader-election-id", o.LeaderElectionID, "Name of the Lease used for leader election.")
	fs.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "Namespace of the leader-election Lease (default: the manager's namespace).")
	fs.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", o.LeaseDuration, "How long a non-leader waits before trying to take over an unrenewed lease.")
	fs.DurationVar(&o.RenewDeadline, "leader-elect-renew-deadline", o.RenewDeadline, "How long the leader keeps retrying to renew before giving up leadership.")
	fs.DurationVar(&o.RetryPeriod, "leader-elect-retry-period", o.RetryPeriod, "How often leader-election clients retry.")
	fs.DurationVar(&o.GracefulShutdownTimeout, "graceful-shutdown-timeout", o.GracefulShutdownTimeout, "How long in-flight reconciles get to finish after SIGTERM.")
	fs.DurationVar(&o.SyncPeriod, "sync-period", o.SyncPeriod, "How often the informers resync every cached object into the work queues.")
	fs.Float64Var(&o.KubeAPIQPS, "kube-api-qps", o.KubeAPIQPS, "Sustained requests per second the manager's client may send to the API server; negative: no client-side limit (the workers bound the requests in flight, and the API server's Priority and Fairness applies).")
	fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", o.KubeAPIBurst, "Burst of requests the manager's client may send above a positive --kube-api-qps.")
	fs.StringVar(&o.Namespace, "namespace", o.Namespace, "Namespace the manager runs in; $POD_NAMESPACE, when set, is the default.")
	fs.StringVar(&o.PodName, "pod-name", o.PodName, "The manager's own pod ($POD_NAME, when set, is the default); with --leader-elect, the leader labels it trellis.dev/leader=true, which the bucket-events Service selects. Empty: no label.")
	fs.Var(&o.Controllers, "controllers", "Comma-separated controllers to run (default: all).")
	fs.Var(&o.MaxConcurrentReconciles, "max-concurrent-reconciles", "Parallel reconciles per controller: N for all, and name=N to override one (e.g. \"2,markdownview=4\"); without a bare N, the defaults of the controllers not named stay.")
	fs.DurationVar(&o.RateLimit.BaseDelay, "rate-limiter-base-delay", o.RateLimit.BaseDelay, "First retry delay after a failed reconcile; it doubles on each further failure of the same object.")
	fs.DurationVar(&o.RateLimit.MaxDelay, "rate-limiter-max-delay", o.RateLimit.MaxDelay, "Longest retry delay for a repeatedly failing object.")
	fs.Float64Var(&o.RateLimit.QPS, "rate-limiter-qps", o.RateLimit.QPS, "Reconciles per second each controller's queue hands out overall.")
	fs.IntVar(&o.RateLimit.Burst, "rate-limiter-burst", o.RateLimit.Burst, "Burst of reconciles above --rate-limiter-qps.")
	fs.StringVar(&o.ViewerImage, "viewer-image", o.ViewerImage, "Default viewer image of MarkdownViews that name none.")
	fs.StringVar(&o.ViewerImageAllow, "viewer-image-allow", o.ViewerImageAllow, "Comma-separated images a MarkdownView's spec.viewerImage may name: a repository (any tag or digest), a prefix ending in /*, or *. Default: the repository of --viewer-image.")
	fs.Var(&o.ArtifactHosts, "artifact-hosts", "Comma-separated hosts a MarkdownView's source may have its artifact served from: a name (any port) or host:port; the manager fetches from no other.")
	fs.StringVar(&o.TenantProtected, "tenant-protected-namespaces", o.TenantProtected, "Regular expression of further namespace names no Tenant may take (kube-*, default and the manager's namespace always are).")
	fs.StringVar(&o.BucketEventsAddr, "bucket-events-bind-address", o.BucketEventsAddr, "Address of the S3 bucket-event receiver (POST /bucket-events); empty or \"0\" disables it.")
	fs.StringVar(&o.BucketEventsSecret, "bucket-events-token-secret", o.BucketEventsSecret, "Secret in the manager's namespace whose key \"token\" authenticates bucket events.")
	fs.DurationVar(&o.StorageSweepInterval, "storage-sweep-interval", o.StorageSweepInterval, "How often (±10%) every object store is swept for keys and grants of no live BucketAccess (one deleted without its finalizer, a statement with Trellis' Sid prefix written by hand), at most 100 revocations a store each time; 0 turns the sweep off.")
	fs.DurationVar(&o.TenantReverifyInterval, "tenant-reverify-interval", o.TenantReverifyInterval, "How often every Ready Tenant is reconciled again (±10% jitter), a safety net for missed events; it costs cache reads only.")
}

// Validate checks the options against the controllers that exist.
func (o *Options) Validate(known []string) error {
	var errs []error
	for _, name := range o.Controllers {
		if !slices.Contains(known, name) {
			errs = append(errs, fmt.Errorf("--controllers: unknown controller %q (known: %s)", name, strings.Join(known, ", ")))
		}
	}
	for name, n := range o.MaxConcurrentReconciles.PerController {
		if d, builtin := defaultConcurrency[name]; builtin && n == d {
			continue // a default, not something the user asked for
		}
		if !slices.Contains(known, name) {
			errs = append(errs, fmt.Errorf("--max-concurrent-reconciles: unknown controller %q", name))
		}
		if n < 1 {
			errs = append(errs, fmt.Errorf("--max-concurrent-reconciles: %s must be at least 1", name))
		}
	}
	if o.MaxConcurrentReconciles.Default < 1 {
		errs = append(errs, errors.New("--max-concurrent-reconciles must be at least 1"))
	}
	if err := o.RateLimit.Validate(); err != nil {
		errs = append(errs, err)
	}
	if o.ControllerRing != "" && o.LeaderElect {
		errs = append(errs, errors.New("--controller-ring and --leader-elect exclude each other: a shard holds a Lease of its own instead of the leader's"))
	}
	if o.ControllerRing != "" {
		if _, err := o.ShardMember(); err != nil {
			errs = append(errs, fmt.Errorf("--controller-ring: %w", err))
		}
	}
	if (o.LeaderElect || o.ControllerRing != "") && (o.LeaseDuration <= o.RenewDeadline || o.RenewDeadline <= o.RetryPeriod || o.RetryPeriod <= 0) {
		errs = append(errs, fmt.Errorf("leader election needs lease duration (%s) > renew deadline (%s) > retry period (%s) > 0",
			o.LeaseDuration, o.RenewDeadline, o.RetryPeriod))
	}
	if !(o.KubeAPIQPS > 0 || o.KubeAPIQPS < 0) || (o.KubeAPIQPS > 0 && o.KubeAPIBurst < 1) { // refuses 0 and NaN
		errs = append(errs, errors.New("--kube-api-qps must be positive (then --kube-api-burst at least 1) or negative for no client-side limit"))
	}
	if o.TenantReverifyInterval < time.Second {
		errs = append(errs, errors.New("--tenant-reverify-interval must be at least 1s"))
	}
	if _, err := imagepolicy.Parse(o.ViewerImageAllow, o.ViewerImage); err != nil {
		errs = append(errs, fmt.Errorf("--viewer-image-allow: %w", err))
	}
	if _, err := regexp.Compile(o.TenantProtected); err != nil {
		errs = append(errs, fmt.Errorf("--tenant-protected-namespaces: %w", err))
	}
	if o.StorageSweepInterval != 0 && o.StorageSweepInterval < time.Second {
		errs = append(errs, errors.New("--storage-sweep-interval must be 0 (off) or at least 1s"))
	}
	if o.SyncPeriod <= 0 {
		errs = append(errs, errors.New("--sync-period must be positive"))
	}
	return errors.Join(errs...)
}

// ShardMember is the replica's place in --controller-ring: the ring, and
// the shard named after its pod (--pod-name, else the host name, which is
// the pod's name in a pod). Nil without a ring.
func (o *Options) ShardMember() (*shard.Member, error) {
	if o.ControllerRing == "" {
		return nil, nil
	}
	m := &shard.Member{Ring: o.ControllerRing, Shard: o.PodName}
	if m.Shard == "" {
		host, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("naming the shard: no --pod-name, and the host name: %w", err)
		}
		m.Shard = host
	}
	return m, m.Validate()
}

// Enabled reports whether the named controller should run.
func (o *Options) Enabled(name string) bool {
	return len(o.Controllers) == 0 || slices.Contains(o.Controllers, name)
}

// ControllerOptions returns the options for the named controller.
func (o *Options) ControllerOptions(name string) setup.Options {
	n := o.MaxConcurrentReconciles.Default
	if v, ok := o.MaxConcurrentReconciles.PerController[name]; ok {
		n = v
	}
	return setup.Options{
		MaxConcurrentReconciles:   n,
		RateLimit:                 o.RateLimit,
		Namespace:                 o.Namespace,
		ViewerImage:               o.ViewerImage,
		ViewerImageAllow:          o.ViewerImageAllow,
		ArtifactHosts:             o.ArtifactHosts,
		TenantProtectedNamespaces: o.TenantProtected,
		TenantReverifyInterval:    o.TenantReverifyInterval,
		BucketEventsAddr:          o.BucketEventsAddr,
		BucketEventsSecret:        o.BucketEventsSecret,
		StorageSweepInterval:      o.StorageSweepInterval,
	}
}

// stringList is a comma-separated flag value.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }

func (l *stringList) Set(v string) error {
	*l = nil
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l = append(*l, s)
		}
	}
	return nil
}

// defaultConcurrency are the controllers whose default differs from the
// others': a Tenant's reconcile writes a whole tenant in two rounds of round
// trips, so 16 run side by side, as many as the bench's floor has workers; 64
// were no faster (docs/performance.md, "Chosen defaults").
var defaultConcurrency = map[string]int{"tenant": 16}
