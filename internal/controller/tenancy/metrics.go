package tenancy

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
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
)

func init() {
	metrics.Registry.MustRegister(namespacesAdded, namespacesRemoved, readyGauge)
}

// forgetMetrics drops the series of a deleted Tenant.
func forgetMetrics(tenant string) {
	namespacesAdded.DeleteLabelValues(tenant)
	namespacesRemoved.DeleteLabelValues(tenant)
	readyGauge.DeleteLabelValues(tenant)
}
