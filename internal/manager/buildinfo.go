package manager

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/trellis-dev/trellis/internal/version"
)

// buildInfo is always 1; its labels say which build of the manager serves
// the metrics, so a dashboard can tell the versions of a rollout apart.
var buildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "trellis_build_info",
	Help: "The manager's build: its release version, commit and Go toolchain. Always 1.",
}, []string{"version", "revision", "goversion"})

func init() {
	v := version.Get()
	buildInfo.WithLabelValues(v.Version, v.Revision, v.GoVersion).Set(1)
	metrics.Registry.MustRegister(buildInfo)
}
