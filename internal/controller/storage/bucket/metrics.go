package bucket

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
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
)

func init() {
	metrics.Registry.MustRegister(checksTotal, lastCheck, healthyGauge, checkLatency)
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

func forgetBucketMetrics(key types.NamespacedName) {
	checksTotal.DeletePartialMatch(prometheus.Labels{"namespace": key.Namespace, "name": key.Name})
	lastCheck.DeleteLabelValues(key.Namespace, key.Name)
	healthyGauge.DeleteLabelValues(key.Namespace, key.Name)
}
