// Package setup is the small contract between cmd/manager and each controller:
// a controller is a name, the function that registers it with the manager,
// and what the manager's cache keeps for it (the child types it owns, how it
// recognises its own children among them, and how their cached copies are
// trimmed).
package setup

import (
	"context"
	"fmt"
	"slices"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trellis-dev/trellis/internal/jitter"
	"github.com/trellis-dev/trellis/internal/shard"
)

// Controller is one reconciler that the manager can enable or disable by name.
type Controller struct {
	// Name is the flag value that enables it (--controllers) and its key
	// in --max-concurrent-reconciles.
	Name string
	// Setup registers the controller and anything it needs (indexes,
	// runnables, HTTP handlers) with the manager.
	Setup func(ctx context.Context, mgr ctrl.Manager, opts Options) error
	// Owned lists the child types this controller creates. The manager caches
	// only the objects of these types that carry Trellis' managed-by label, so
	// unrelated objects in the cluster cost it no memory, and keeps whole only
	// those Recognise accepts.
	Owned []client.Object
	// OptionalOwned lists child types whose API a cluster may not serve (a
	// CRD of another project, such as Gateway API's HTTPRoute). The manager
	// looks each up once, at start-up: a served type is cached like Owned; a
	// missing one is neither cached nor watched, and Options.Serves tells
	// Setup which is which.
	OptionalOwned []client.Object
	// Transforms trim what the cache keeps of a type to what the controller
	// reads from it. Of an Owned or OptionalOwned type a transform gets the
	// object with Trellis' own managedFields entry and no other (to extract
	// what Trellis applied); what it leaves of managedFields is then dropped
	// unless the type is in ReadsManagedFields. A transform applies to every
	// cached object of its type, whichever controller reads it, so at most
	// one controller may declare one for a type. A transform of an
	// OptionalOwned type the API server does not serve is left out with it.
	Transforms []Transform
	// ReadsManagedFields lists the Owned types whose managedFields (Trellis'
	// own entry) the controller reads from the cache, such as the keys it set
	// on an object it creates and patches. The cache keeps no managedFields
	// of any other type.
	ReadsManagedFields []client.Object
	// Recognise tells the controller's own children from the other objects
	// of its Owned and OptionalOwned types that the cache selects: anyone
	// who may write such an object can put the managed-by label on it. The
	// cache keeps whole (and hands to Transforms) only what some owning
	// controller recognises; of any other object it keeps bounded metadata:
	// name, namespace, uid, resourceVersion, generation, timestamps, the
	// controller owner reference, and ForeignKeys. So it must recognise by
	// what a label alone cannot forge (an owner reference and the name the
	// controller gives that child; the names it gives its children), read
	// nothing but that metadata, and accept every object the controller
	// reads beyond it. Required with Owned or OptionalOwned (except types
	// cached with Transform.All, whose Func reduces foreign objects itself).
	Recognise func(obj client.Object) bool
	// ForeignKeys are the label and annotation keys the controller reads on
	// objects of its child types that Recognise does not accept (the
	// managed-by label is always kept). Values over 253 bytes are dropped.
	ForeignKeys []string
	// Sharded is an object of the kind the controller reconciles, when it
	// can run as a shard of a ControllerRing (--controller-ring): the
	// manager's cache then keeps only this shard's objects of that kind and
	// of Owned and OptionalOwned, and Setup wraps the controller with
	// Options.Shard. A controller without it does not run on a shard.
	Sharded client.Object
}

// Transform is a cache transform for the objects of one type.
type Transform struct {
	// Object is an object of the type, such as &corev1.ConfigMap{}.
	Object client.Object
	// Func changes the object in place (it gets the informer's own copy) and
	// returns it. Of a label-selected child type it gets only the objects
	// Recognise accepts.
	Func toolscache.TransformFunc
	// All caches every object of the type, not only those labelled
	// managed-by=trellis: for a controller that must judge objects it did
	// not create (a team's NetworkPolicies). Func must then reduce every
	// foreign object to what the controller reads, so that no user can grow
	// the manager's memory by what they put in their own objects.
	All bool
}

// ManagedByLabel and ManagedByValue mark every object Trellis creates; the
// cache selects children by them.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "trellis"
)

// FieldManager is the field manager of every Trellis write: the manager's
// client sets it on creates, updates, patches and applies, and its user agent
// starts with it, so writes made through other clients (Events, leases)
// carry it too.
const FieldManager = "trellis"

// Options are the knobs every controller takes from the manager's flags.
type Options struct {
	// MaxConcurrentReconciles is how many objects of this kind reconcile in parallel.
	MaxConcurrentReconciles int
	// RateLimit shapes the work queue: per-object exponential back-off on error,
	// and an overall rate shared by all objects of the controller.
	RateLimit RateLimit
	// Namespace is where the manager itself runs (protected from tenants, home of its Secrets).
	Namespace string
	// ViewerImage is the default image of MarkdownView viewers.
	ViewerImage string
	// ViewerImageAllow is the allow-list of images a MarkdownView may name
	// (internal/imagepolicy); empty stands for ViewerImage's repository.
	ViewerImageAllow string
	// ArtifactHosts are the hosts (a name, any port, or host:port) whose
	// artifact URLs a MarkdownView's source may name.
	ArtifactHosts []string
	// Served lists the controller's OptionalOwned types that the API server
	// served when the manager started.
	Served []schema.GroupVersionKind
	// TenantProtectedNamespaces is an extra pattern of namespace names no
	// Tenant may take (kube-*, default and Namespace always are).
	TenantProtectedNamespaces string
	// TenantReverifyInterval is how often every Ready Tenant is re-checked.
	TenantReverifyInterval time.Duration
	// BucketEventsAddr is where the S3 bucket-event receiver listens ("" or "0": off).
	BucketEventsAddr string
	// BucketEventsSecret names the Secret (in Namespace) holding the receiver's token.
	BucketEventsSecret string
	// StorageSweepInterval is how often every object store is swept for
	// keys and grants of no live BucketAccess (0: never).
	StorageSweepInterval time.Duration
	// Shard is the replica's place in its ControllerRing, nil when it is
	// not a shard.
	Shard *shard.Member
}

// RateLimit configures the controller work queue. The defaults match
// controller-runtime's: 5ms doubling to 1000s per object, 10 per second overall
// with a burst of 100.
type RateLimit struct {
	BaseDelay time.Duration
	MaxDelay  time.Duration
	QPS       float64
	Burst     int
}

// DefaultRateLimit is controller-runtime's default work-queue rate limiter.
var DefaultRateLimit = RateLimit{BaseDelay: 5 * time.Millisecond, MaxDelay: 1000 * time.Second, QPS: 10, Burst: 100}

// Validate reports settings that would stall or spin the queue.
func (r RateLimit) Validate() error {
	switch {
	case r.BaseDelay <= 0:
		return fmt.Errorf("rate limiter base delay must be positive, got %s", r.BaseDelay)
	case r.MaxDelay < r.BaseDelay:
		return fmt.Errorf("rate limiter max delay %s is below its base delay %s", r.MaxDelay, r.BaseDelay)
	case !(r.QPS > 0): // also refuses NaN, which would turn the limit off
		return fmt.Errorf("rate limiter QPS must be positive, got %g", r.QPS)
	case r.Burst < 1:
		return fmt.Errorf("rate limiter burst must be at least 1, got %d", r.Burst)
	}
	return nil
}

// Limiter builds the work-queue rate limiter: the slower of per-item back-off and the overall bucket.
func (r RateLimit) Limiter() workqueue.TypedRateLimiter[reconcile.Request] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](r.BaseDelay, r.MaxDelay),
		&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(r.QPS), r.Burst)},
	)
}

// Serves reports whether gvk, one of the controller's OptionalOwned types,
// was served when the manager started.
func (o Options) Serves(gvk schema.GroupVersionKind) bool {
	return slices.Contains(o.Served, gvk)
}

// ControllerOptions turns Options into controller-runtime's per-controller options.
func (o Options) ControllerOptions() controller.Options {
	return controller.Options{
		MaxConcurrentReconciles: o.MaxConcurrentReconciles,
		RateLimiter:             o.RateLimit.Limiter(),
	}
}

// ForeignChildRetry is how soon an object blocked by an object it does not
// own looks again: the foreign object is outside the cache (which holds only
// what Trellis labelled), so its removal is no event.
const ForeignChildRetry = 2 * time.Minute

// Jitter is d ±10%, so that objects that were handled together do not all
// come back in the same instant.
func Jitter(d time.Duration) time.Duration {
	return jitter.Duration(d, 0.1)
}
