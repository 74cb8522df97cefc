package testenv

import (
	"strings"

	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// EventReasons drains a fake recorder and returns "<type> <reason>" of each
// Event raised, in order: what the reconcile table tests compare.
func EventReasons(rec *events.FakeRecorder) []string {
	var out []string
	for {
		select {
		case e := <-rec.Events:
			fields := strings.Fields(e)
			out = append(out, fields[0]+" "+fields[1])
		default:
			return out
		}
	}
}

// StatusWrites counts the writes, as a table test's fake API server records
// them ("<verb> <Kind>"), that were status writes.
func StatusWrites(writes []string) int {
	n := 0
	for _, w := range writes {
		if strings.HasPrefix(w, "status ") {
			n++
		}
	}
	return n
}

// Counter is the value of the counter or gauge name in controller-runtime's
// metrics registry (the one the manager serves), summed over the series whose
// label is value; 0 when there is none.
func Counter(name, label, value string) (float64, error) {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return 0, err
	}
	total := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
				}
			}
		}
	}
	return total, nil
}
