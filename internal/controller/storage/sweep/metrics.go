package sweep

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/s3"
)

var (
	// Sweeps counts the sweeps of each store, by result.
	Sweeps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trellis_objectstore_sweeps_total",
		Help: "Sweeps of an ObjectStore for keys and grants of no live BucketAccess, by result (Clean, Revoked, Capped, StoreNotReady, or the reason the sweep stopped).",
	}, []string{"store", "result"})
	// RevokedTotal counts what sweeps revoked in each store, by kind.
	RevokedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trellis_objectstore_sweep_revoked_total",
		Help: "What sweeps revoked in an ObjectStore, by kind: account (a key of no live BucketAccess, deleted), grant (a bucket-policy statement with Trellis' Sid prefix that is no recorded grant, taken out or put back).",
	}, []string{"store", "kind"})
)

func init() { metrics.Registry.MustRegister(Sweeps, RevokedTotal) }

// Results are the results a sweep of a store ends with: Clean, Revoked,
// Capped, StoreNotReady, and why it stopped (sweepOf). Each store's series
// start at 0 for all of them, so that increase() sees a result's first
// occurrence too; a result not listed is counted all the same, from 1.
var Results = []string{
	Clean, Revoked, Capped, stores.ReasonStoreNotReady,
	string(s3.ReasonStoreUnreachable), string(s3.ReasonAccessDenied), string(s3.ReasonCredentialsMissing),
	string(s3.ReasonStoreError), string(s3.ReasonInvalidRequest), string(s3.ReasonNotSupported),
	stores.ReasonInvalidPolicy, conditions.ReasonReconcileError,
}

// StartSeries puts the store's sweep series at 0 where they are not yet.
func StartSeries(store string) {
	for _, r := range Results {
		Sweeps.WithLabelValues(store, r).Add(0)
	}
	for _, kind := range []string{"account", "grant"} {
		RevokedTotal.WithLabelValues(store, kind).Add(0)
	}
}

// ForgetMetrics drops a deleted store's sweep series.
func ForgetMetrics(store string) {
	Sweeps.DeletePartialMatch(prometheus.Labels{"store": store})
	RevokedTotal.DeletePartialMatch(prometheus.Labels{"store": store})
}
