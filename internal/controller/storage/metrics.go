package storage

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

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
	storeRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trellis_objectstore_requests_total",
		Help: "Requests Trellis sent to an object store, by operation.",
	}, []string{"store", "op"})
	storeUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "trellis_objectstore_up",
		Help: "1 when the ObjectStore answered its last check with the credentials accepted, else 0.",
	}, []string{"store"})
)

func init() {
	metrics.Registry.MustRegister(checksTotal, lastCheck, healthyGauge, checkLatency, storeRequests, storeUp)
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

// countingClient counts every request sent to a store, so "one request per
// check" can be measured.
type countingClient struct {
	store string
	next  s3.Client
}

func counted(store string, c s3.Client) s3.Client { return &countingClient{store: store, next: c} }

func (c *countingClient) inc(op string) { storeRequests.WithLabelValues(c.store, op).Inc() }

func (c *countingClient) Ping(ctx context.Context) error {
	c.inc("ListBuckets")
	return c.next.Ping(ctx)
}
func (c *countingClient) BucketExists(ctx context.Context, b string) (bool, error) {
	c.inc("HeadBucket")
	return c.next.BucketExists(ctx, b)
}
func (c *countingClient) CreateBucket(ctx context.Context, b string) error {
	c.inc("CreateBucket")
	return c.next.CreateBucket(ctx, b)
}
func (c *countingClient) DeleteBucket(ctx context.Context, b string) error {
	c.inc("DeleteBucket")
	return c.next.DeleteBucket(ctx, b)
}
func (c *countingClient) Owner(ctx context.Context, b string) (string, error) {
	c.inc("GetBucketTagging")
	return c.next.Owner(ctx, b)
}
func (c *countingClient) SetOwner(ctx context.Context, b, uid string) error {
	c.inc("PutBucketTagging")
	return c.next.SetOwner(ctx, b, uid)
}
func (c *countingClient) CountObjects(ctx context.Context, b string, limit int) (int, error) {
	c.inc("ListObjects")
	return c.next.CountObjects(ctx, b, limit)
}
func (c *countingClient) Probe(ctx context.Context, b string) error {
	c.inc("Probe")
	return c.next.Probe(ctx, b)
}
