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

// shardInfo is 1 on a shard of a ControllerRing and absent on any other
// replica. A shard counts only its own objects in trellis_objects, where a
// leader and its standby both count all: the alerts and the dashboard sum
// the series of the replicas that have it and take the max of the others.
var shardInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "trellis_shard_info",
	Help: "1 on a shard of a ControllerRing (its ring and shard name); absent on a replica that is no shard. A shard's per-kind series count its own objects only.",
}, []string{"ring", "shard"})

func init() {
	v := version.Get()
	buildInfo.WithLabelValues(v.Version, v.Revision, v.GoVersion).Set(1)
	metrics.Registry.MustRegister(buildInfo, shardInfo)
}
