package status

import (
	"reflect"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/trellis-dev/trellis/internal/conditions"
)

// objectsGauge counts the objects of each kind in the cache by the one of
// Ready, Reconciling and Stalled that is True (conditions.Summarize sets
// exactly one), or as Suspended while spec.suspend is true: a person chose
// that, and a suspended object that was never Ready (Stalled, reason
// Suspended) is no case for the TrellisObjectsStalled alert. It follows the
// cache, not the writes: it counts the statuses the API server holds, on
// every replica alike, the standby's too.
var objectsGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "trellis_objects",
	Help: "Objects of a kind in the manager's cache, by which of their conditions Ready, Reconciling and Stalled is True, or Suspended while spec.suspend is true (an object with none True, no status written yet, is not counted).",
}, []string{"kind", "condition"})

// savedWrites counts what remembering a write until the cache shows it
// saves: the status writes (and their Events) a reconcile would have sent
// again on the cache's stale copy.
var savedWrites = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "trellis_status_writes_saved_total",
	Help: "Status writes not sent because the cache had not yet shown Trellis' own last write of the same status, which the status patcher put on the cache's copy; without it each would have been sent again, with its Events.",
}, []string{"kind"})

func init() {
	metrics.Registry.MustRegister(objectsGauge, savedWrites)
}

// summaries are the conditions objectsGauge counts by, Suspended first,
// then Stalled: the first True one is an object's.
var summaries = []string{conditions.Suspended, conditions.Stalled, conditions.Reconciling, conditions.Ready}

// objectCounter keeps objectsGauge for one kind from cache events.
type objectCounter struct {
	gauge *prometheus.GaugeVec
	kind  string
}

// newObjectCounter starts the kind's series at 0, so that each exists from
// the start and not only once an object is in that state.
func newObjectCounter(gauge *prometheus.GaugeVec, kind string) objectCounter {
	for _, c := range summaries {
		gauge.WithLabelValues(kind, c).Add(0)
	}
	return objectCounter{gauge: gauge, kind: kind}
}

// summaryOf returns the first of summaries that is True on obj, or "".
func summaryOf(obj any) string {
	o, ok := obj.(Object)
	if !ok {
		return ""
	}
	for _, c := range summaries {
		if conditions.IsTrue(o.GetConditions(), c) {
			return c
		}
	}
	return ""
}

// changed moves one object from what old says to what new says; either may
// be nil (added, deleted).
func (c objectCounter) changed(old, new any) {
	from, to := summaryOf(old), summaryOf(new)
	if from == to {
		return
	}
	if from != "" {
		c.gauge.WithLabelValues(c.kind, from).Dec()
	}
	if to != "" {
		c.gauge.WithLabelValues(c.kind, to).Inc()
	}
}

// kindOf is the name of O's type: Tenant, MarkdownView, ObjectStore...
func kindOf[O Object]() string {
	var zero O
	return reflect.TypeOf(zero).Elem().Name()
}
