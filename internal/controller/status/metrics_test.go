package status

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
)

func tenantIn(name string, p conditions.Progress) *tenancyv1.Tenant {
	t := &tenancyv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1}}
	conditions.Summarize(&t.Status.Conditions, 1, conditions.Summary{Progress: p, Reason: "R", Message: "m"})
	return t
}

// suspended is t with spec.suspend's condition, as operate sets it.
func suspended(t *tenancyv1.Tenant) *tenancyv1.Tenant {
	t = t.DeepCopy()
	meta.SetStatusCondition(&t.Status.Conditions, metav1.Condition{
		Type: conditions.Suspended, Status: metav1.ConditionTrue, Reason: "Suspended", ObservedGeneration: 1})
	return t
}

// counts reads the kind's four series from gauge.
func counts(gauge *prometheus.GaugeVec, kind string) map[string]float64 {
	out := map[string]float64{}
	for _, c := range summaries {
		out[c] = testutil.ToFloat64(gauge.WithLabelValues(kind, c))
	}
	return out
}

// The counter follows an object through its states and out of the cache;
// every series exists, at 0, before any object is counted.
func TestObjectCounterFollowsTheCache(t *testing.T) {
	g := NewWithT(t)
	gauge := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "objects"}, []string{"kind", "condition"})
	c := newObjectCounter(gauge, "Tenant")
	g.Expect(testutil.CollectAndCount(gauge)).To(Equal(4), "Ready, Reconciling, Stalled and Suspended start at 0")
	want := func(ready, reconciling, stalled float64, suspendedToo ...float64) {
		t.Helper()
		g.Expect(counts(gauge, "Tenant")).To(Equal(map[string]float64{
			conditions.Ready: ready, conditions.Reconciling: reconciling, conditions.Stalled: stalled,
			conditions.Suspended: append(suspendedToo, 0)[0]}))
	}

	fresh := &tenancyv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	c.changed(nil, fresh)
	want(0, 0, 0) // no condition yet: not counted
	working := tenantIn("a", conditions.Working)
	c.changed(fresh, working)
	want(0, 1, 0)
	c.changed(nil, tenantIn("b", conditions.Done))
	want(1, 1, 0)
	stalled := tenantIn("a", conditions.Blocked)
	c.changed(working, stalled)
	want(1, 0, 1)
	c.changed(stalled, stalled) // a resync
	want(1, 0, 1)
	c.changed(stalled, nil)
	want(1, 0, 0)
	c.changed(tenantIn("b", conditions.Done), nil)
	want(0, 0, 0)
	c.changed(nil, "not an object")
	want(0, 0, 0)

	// A suspended object counts as Suspended, whatever else it says: one
	// that was never Ready reads Stalled (reason Suspended), which is a
	// person's choice, not a case for TrellisObjectsStalled.
	neverReady := suspended(tenantIn("c", conditions.Blocked))
	c.changed(nil, neverReady)
	want(0, 0, 0, 1)
	wasReady := suspended(tenantIn("d", conditions.Done))
	c.changed(nil, wasReady)
	want(0, 0, 0, 2)
	c.changed(neverReady, tenantIn("c", conditions.Working)) // resumed
	want(0, 1, 0, 1)
}

// FollowCache keeps trellis_objects for its kind from the informer's events,
// a final state the informer missed included.
func TestFollowCacheCountsObjects(t *testing.T) {
	g := NewWithT(t)
	f := newFixture(t)
	inf := &handlerInformer{}
	g.Expect(f.patcher.FollowCache(context.Background(), inf)).To(Succeed())
	base := counts(objectsGauge, "Tenant")
	delta := func() map[string]float64 {
		now := counts(objectsGauge, "Tenant")
		for k := range now {
			now[k] -= base[k]
		}
		return now
	}

	stalled := tenantIn("x", conditions.Blocked)
	inf.handler.OnAdd(stalled, true)
	g.Expect(delta()).To(HaveKeyWithValue(conditions.Stalled, 1.0))
	ready := tenantIn("x", conditions.Done)
	inf.Update(stalled, ready)
	g.Expect(delta()).To(Equal(map[string]float64{conditions.Ready: 1, conditions.Reconciling: 0, conditions.Stalled: 0, conditions.Suspended: 0}))
	inf.handler.OnDelete(toolscache.DeletedFinalStateUnknown{Key: "x", Obj: ready})
	g.Expect(delta()).To(Equal(map[string]float64{conditions.Ready: 0, conditions.Reconciling: 0, conditions.Stalled: 0, conditions.Suspended: 0}))
}
