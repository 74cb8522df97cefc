package manager

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/trellis-dev/trellis/internal/version"
)

// The manager serves trellis_build_info{version,revision,goversion} 1 on the
// registry controller-runtime's metrics endpoint serves.
func TestBuildInfoMetric(t *testing.T) {
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	want := version.Get()
	for _, f := range families {
		if f.GetName() != "trellis_build_info" {
			continue
		}
		if len(f.GetMetric()) != 1 {
			t.Fatalf("%d series, want 1", len(f.GetMetric()))
		}
		m := f.GetMetric()[0]
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["version"] != want.Version || labels["revision"] != want.Revision || labels["goversion"] != want.GoVersion || len(labels) != 3 {
			t.Errorf("labels %v, want %+v", labels, want)
		}
		if m.GetGauge().GetValue() != 1 {
			t.Errorf("value %v, want 1", m.GetGauge().GetValue())
		}
		return
	}
	t.Fatal("trellis_build_info is not registered")
}
