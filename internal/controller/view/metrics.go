package view

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
)

var (
	readyGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "trellis_markdownview_ready",
		Help: "1 when the MarkdownView's site is served by every desired replica, else 0.",
	}, []string{"namespace", "name"})
	availableGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "trellis_markdownview_available_replicas",
		Help: "Viewer replicas available for the MarkdownView.",
	}, []string{"namespace", "name"})
)

func init() {
	metrics.Registry.MustRegister(readyGauge, availableGauge)
}

func recordMetrics(mv *viewv1.MarkdownView, st viewv1.MarkdownViewStatus) {
	ready := 0.0
	if conditions.IsTrue(st.Conditions, conditions.Ready) {
		ready = 1
	}
	readyGauge.WithLabelValues(mv.Namespace, mv.Name).Set(ready)
	availableGauge.WithLabelValues(mv.Namespace, mv.Name).Set(float64(st.AvailableReplicas))
}

// forgetMetrics drops the series of a deleted MarkdownView.
func forgetMetrics(key types.NamespacedName) {
	readyGauge.DeleteLabelValues(key.Namespace, key.Name)
	availableGauge.DeleteLabelValues(key.Namespace, key.Name)
}
