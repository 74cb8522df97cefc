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
	metrics.Registry.MustRegister(checksTotal, lastCheck, healthyGauge, checkLatency, storeRequests, storeUp, sweepsTotal, sweepRevoked)
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
	SweepClean, SweepRevoked, SweepCapped, ReasonStoreNotReady,
	string(s3.ReasonStoreUnreachable), string(s3.ReasonAccessDenied), string(s3.ReasonCredentialsMissing),
	string(s3.ReasonStoreError), string(s3.ReasonInvalidRequest), string(s3.ReasonNotSupported),
	ReasonInvalidPolicy, ReasonReconcileError,
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
	storeRequests.DeletePartialMatch(prometheus.Labels{"store": store})
	sweepsTotal.DeletePartialMatch(prometheus.Labels{"store": store})
	sweepRevoked.DeletePartialMatch(prometheus.Labels{"store": store})
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
func (c *countingClient) Owner(ctx context.Context, b string) (s3.Owner, error) {
	c.inc("GetBucketTagging")
	return c.next.Owner(ctx, b)
}
func (c *countingClient) SetOwner(ctx context.Context, b string, owner s3.Owner) error {
	c.inc("PutBucketTagging")
	return c.next.SetOwner(ctx, b, owner)
}
func (c *countingClient) CountObjects(ctx context.Context, b string, limit int) (int, error) {
	c.inc("ListObjects")
	return c.next.CountObjects(ctx, b, limit)
}
func (c *countingClient) Probe(ctx context.Context, b string) error {
	c.inc("Probe")
	return c.next.Probe(ctx, b)
}
func (c *countingClient) Versioning(ctx context.Context, b string) (string, error) {
	c.inc("GetBucketVersioning")
	return c.next.Versioning(ctx, b)
}
func (c *countingClient) SetVersioning(ctx context.Context, b, status string) error {
	c.inc("PutBucketVersioning")
	return c.next.SetVersioning(ctx, b, status)
}
func (c *countingClient) Policy(ctx context.Context, b string) (string, error) {
	c.inc("GetBucketPolicy")
	return c.next.Policy(ctx, b)
}
func (c *countingClient) SetPolicy(ctx context.Context, b, policy string) error {
	c.inc("PutBucketPolicy")
	return c.next.SetPolicy(ctx, b, policy)
}
func (c *countingClient) CORS(ctx context.Context, b string) ([]s3.CORSRule, error) {
	c.inc("GetBucketCors")
	return c.next.CORS(ctx, b)
}
func (c *countingClient) SetCORS(ctx context.Context, b string, rules []s3.CORSRule) error {
	c.inc("PutBucketCors")
	return c.next.SetCORS(ctx, b, rules)
}
func (c *countingClient) Lifecycle(ctx context.Context, b string) ([]s3.ExpirationRule, error) {
	c.inc("GetBucketLifecycle")
	return c.next.Lifecycle(ctx, b)
}
func (c *countingClient) SetLifecycle(ctx context.Context, b string, rules []s3.ExpirationRule) error {
	c.inc("PutBucketLifecycle")
	return c.next.SetLifecycle(ctx, b, rules)
}

// countingAccounts counts the requests sent to a store's account driver.
type countingAccounts struct {
	store string
	next  s3.Accounts
}

func countedAccounts(store string, a s3.Accounts) s3.Accounts {
	return &countingAccounts{store: store, next: a}
}

func (c *countingAccounts) PutAccount(ctx context.Context, id, secret string) error {
	storeRequests.WithLabelValues(c.store, "PutAccount").Inc()
	return c.next.PutAccount(ctx, id, secret)
}
func (c *countingAccounts) DeleteAccount(ctx context.Context, id string) error {
	storeRequests.WithLabelValues(c.store, "DeleteAccount").Inc()
	return c.next.DeleteAccount(ctx, id)
}
func (c *countingAccounts) ListAccounts(ctx context.Context) ([]string, error) {
	storeRequests.WithLabelValues(c.store, "ListAccounts").Inc()
	return c.next.ListAccounts(ctx)
}
