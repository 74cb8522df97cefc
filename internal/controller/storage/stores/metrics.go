package stores

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Reasons that more than one storage kind (and the sweep) give.
const (
	// ReasonStoreNotFound: the ObjectStore named does not exist.
	ReasonStoreNotFound = "StoreNotFound"
	// ReasonStoreNotReady: the ObjectStore has not been checked yet, or its
	// last check failed; nothing is sent to it.
	ReasonStoreNotReady = "StoreNotReady"
	// ReasonInUse: a deletion waits for what uses the object (StorageBuckets
	// of a store, BucketAccesses of a bucket or of a store).
	ReasonInUse = "InUse"
	// ReasonNamespaceNotAllowed: the store's namespaceSelector does not
	// select the bucket's namespace.
	ReasonNamespaceNotAllowed = "NamespaceNotAllowed"
	// ReasonInvalidPolicy: spec.policy is not a policy, or the store refused it.
	ReasonInvalidPolicy = "InvalidPolicy"
)

// CacheError is an error of the manager's cache met while editing a
// bucket's policy: not the store's, and nothing was written (ClassifyError).
type CacheError struct{ Err error }

func (e *CacheError) Error() string { return e.Err.Error() }
func (e *CacheError) Unwrap() error { return e.Err }

// Requests counts the requests sent to each store, by operation.
var Requests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "trellis_objectstore_requests_total",
	Help: "Requests Trellis sent to an object store, by operation.",
}, []string{"store", "op"})

// Up is 1 for a store that answered its last check with the credentials
// accepted, else 0.
var Up = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "trellis_objectstore_up",
	Help: "1 when the ObjectStore answered its last check with the credentials accepted, else 0.",
}, []string{"store"})

func init() { metrics.Registry.MustRegister(Requests, Up) }

// ForgetMetrics drops a deleted store's series of Requests and Up.
func ForgetMetrics(store string) {
	Up.DeleteLabelValues(store)
	Requests.DeletePartialMatch(prometheus.Labels{"store": store})
}

// countRequests counts the requests sent to a store: its clients call it
// once per operation (s3.Config.OnRequest).
func countRequests(store string) func(op string) {
	return func(op string) { Requests.WithLabelValues(store, op).Inc() }
}
