package tenancy

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
)

var (
	namespacesAdded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trellis_tenant_namespaces_added_total",
		Help: "Namespaces created for a Tenant.",
	}, []string{"tenant"})
	namespacesRemoved = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "trellis_tenant_namespaces_removed_total",
		Help: "Namespaces a Tenant gave up: deleted (policy Delete) or released (policy Retain).",
	}, []string{"tenant"})
	readyGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "trellis_tenant_ready",
		Help: "1 when every namespace of the Tenant is ready and administered, else 0.",
	}, []string{"tenant"})
	quotaHard = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "trellis_tenant_quota_hard",
		Help: "A Tenant's quota limit for a resource, summed over its ready namespaces (CPU in cores, memory in bytes).",
	}, []string{"tenant", "resource"})
	quotaUsed = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "trellis_tenant_quota_used",
		Help: "A Tenant's usage of a resource its quota limits, summed over its ready namespaces (CPU in cores, memory in bytes).",
	}, []string{"tenant", "resource"})
)

func init() {
	metrics.Registry.MustRegister(namespacesAdded, namespacesRemoved, readyGauge, quotaHard, quotaUsed)
}

// recordMetrics publishes what a status says: readiness and the tenant-wide quota.
func recordMetrics(t *tenancyv1.Tenant, st tenancyv1.TenantStatus) {
	ready := 0.0
	if conditions.IsTrue(st.Conditions, conditions.Ready) {
		ready = 1
	}
	readyGauge.WithLabelValues(t.Name).Set(ready)
	quotaSeries.Lock()
	defer quotaSeries.Unlock()
	for _, name := range quotaSeries.resources[t.Name] {
		if _, still := st.Quota.Hard[corev1.ResourceName(name)]; !still {
			quotaHard.DeleteLabelValues(t.Name, name)
			quotaUsed.DeleteLabelValues(t.Name, name)
		}
	}
	names := make([]string, 0, len(st.Quota.Hard))
	for name, q := range st.Quota.Hard {
		quotaHard.WithLabelValues(t.Name, string(name)).Set(q.AsApproximateFloat64())
		used := st.Quota.Used[name]
		quotaUsed.WithLabelValues(t.Name, string(name)).Set(used.AsApproximateFloat64())
		names = append(names, string(name))
	}
	if len(names) == 0 {
		delete(quotaSeries.resources, t.Name)
	} else {
		quotaSeries.resources[t.Name] = names
	}
}

// quotaSeries remembers which resources each tenant's quota series are for,
// so that a resource dropped from the quota loses its series.
var quotaSeries = struct {
	sync.Mutex
	resources map[string][]string
}{resources: map[string][]string{}}

// forgetMetrics drops the series of a deleted Tenant.
func forgetMetrics(tenant string) {
	namespacesAdded.DeleteLabelValues(tenant)
	namespacesRemoved.DeleteLabelValues(tenant)
	readyGauge.DeleteLabelValues(tenant)
	quotaHard.DeletePartialMatch(prometheus.Labels{"tenant": tenant})
	quotaUsed.DeletePartialMatch(prometheus.Labels{"tenant": tenant})
	quotaSeries.Lock()
	delete(quotaSeries.resources, tenant)
	quotaSeries.Unlock()
}
