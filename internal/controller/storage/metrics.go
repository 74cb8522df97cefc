package storage

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/s3"
)

var (
	checksTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trellis_storagebucket_checks_total",
		Help: "Health checks of StorageBuckets, by result (a condition reason, or Healthy).",
	}, []string{"namespace", "name", "result"})
	lastCheck = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "trellis_storagebucket_last_check_timestamp_seconds",
		Help: "When the StorageBucket was last checked against its store.",
	}, []string{"namespace", "name"})
	healthyGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "trellis_storagebucket_healthy",
		Help: "1 when the StorageBucket's last check passed, else 0.",
	}, []string{"namespace", "name"})
	checkLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "trellis_storagebucket_check_duration_seconds",
		Help:    "How long StorageBucket health checks take, store requests included.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 8),
	})
	storeUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "trellis_objectstore_up",
		Help: "1 when the ObjectStore answered its last check with the credentials accepted, else 0.",
	}, []string{"store"})
	sweepsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trellis_objectstore_sweeps_total",
		Help: "Sweeps of an ObjectStore for keys and grants of no live BucketAccess, by result (Clean, Revoked, Capped, StoreNotReady, or the reason the sweep stopped).",
	}, []string{"store", "result"})
	sweepRevoked = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trellis_objectstore_sweep_revoked_total",
		Help: "What sweeps revoked in an ObjectStore, by kind: account (a key of no live BucketAccess, deleted), grant (a bucket-policy statement with Trellis' Sid prefix that is no recorded grant, taken out or put back).",
	}, []string{"store", "kind"})
)

func init() {
	metrics.Registry.MustRegister(checksTotal, lastCheck, healthyGauge, checkLatency, storeUp, sweepsTotal, sweepRevoked)
}

func recordCheck(key types.NamespacedName, result string, healthy bool, took time.Duration) {
	checksTotal.WithLabelValues(key.Namespace, key.Name, result).Inc()
	lastCheck.WithLabelValues(key.Namespace, key.Name).SetToCurrentTime()
	checkLatency.Observe(took.Seconds())
	v := 0.0
	if healthy {
		v = 1
	}
	healthyGauge.WithLabelValues(key.Namespace, key.Name).Set(v)
}

// sweepResults are the results a sweep of a store ends with: Clean, Revoked,
// Capped, StoreNotReady, and why it stopped (sweepOf). Each store's series
// start at 0 for all of them, so that increase() sees a result's first
// occurrence too; a result not listed is counted all the same, from 1.
var sweepResults = []string{
	SweepClean, SweepRevoked, SweepCapped, stores.ReasonStoreNotReady,
	string(s3.ReasonStoreUnreachable), string(s3.ReasonAccessDenied), string(s3.ReasonCredentialsMissing),
	string(s3.ReasonStoreError), string(s3.ReasonInvalidRequest), string(s3.ReasonNotSupported),
	stores.ReasonInvalidPolicy, stores.ReasonReconcileError,
}

// startSweepSeries puts the store's sweep series at 0 where they are not yet.
func startSweepSeries(store string) {
	for _, r := range sweepResults {
		sweepsTotal.WithLabelValues(store, r).Add(0)
	}
	for _, kind := range []string{"account", "grant"} {
		sweepRevoked.WithLabelValues(store, kind).Add(0)
	}
}

// forgetStoreMetrics drops the series of a deleted ObjectStore.
func forgetStoreMetrics(store string) {
	storeUp.DeleteLabelValues(store)
	stores.Requests.DeletePartialMatch(prometheus.Labels{"store": store})
	sweepsTotal.DeletePartialMatch(prometheus.Labels{"store": store})
	sweepRevoked.DeletePartialMatch(prometheus.Labels{"store": store})
}

func forgetBucketMetrics(key types.NamespacedName) {
	checksTotal.DeletePartialMatch(prometheus.Labels{"namespace": key.Namespace, "name": key.Name})
	lastCheck.DeleteLabelValues(key.Namespace, key.Name)
	healthyGauge.DeleteLabelValues(key.Namespace, key.Name)
}
