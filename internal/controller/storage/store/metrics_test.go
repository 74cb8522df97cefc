package store

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/internal/controller/storage/storagetest"
	"github.com/trellis-dev/trellis/internal/controller/storage/sweep"
)

// sweepSeries returns storagetest.Store's trellis_objectstore_sweeps_total series by
// result, and its trellis_objectstore_sweep_revoked_total series by "revoked "+kind.
func sweepSeries(t *testing.T) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(sweep.Sweeps, sweep.RevokedTotal)
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch {
			case labels["store"] != storagetest.Store:
			case f.GetName() == "trellis_objectstore_sweep_revoked_total":
				out["revoked "+labels["kind"]] = m.GetCounter().GetValue()
			default:
				out[labels["result"]] = m.GetCounter().GetValue()
			}
		}
	}
	return out
}

// A store's sweep series exist at 0 from its first check, for every result
// a sweep can end with, so an alert on increase() sees the first failure;
// without a sweep there are none, and a deleted store's go.
func TestSweepSeriesStartAtZero(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	req := ctrl.Request{NamespacedName: types.NamespacedName{Name: storagetest.Store}}
	forgetStoreMetrics(storagetest.Store)

	f := newFixture(storagetest.ReadyStore(true))
	r := f.reconciler()
	_, err := r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sweepSeries(t)).To(BeEmpty(), "no sweep, no sweep series")

	r.sweeps = true
	_, err = r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	series := sweepSeries(t)
	g.Expect(series).To(HaveLen(len(sweep.Results) + 2))
	for _, result := range append(sweep.Results, "revoked account", "revoked grant") {
		g.Expect(series).To(HaveKeyWithValue(result, 0.0))
	}
	g.Expect(series).To(HaveKey(sweep.Clean))
	g.Expect(series).To(HaveKey("StoreUnreachable"))

	// A sweep counted, then the store checked again: the count stays.
	sweep.Sweeps.WithLabelValues(storagetest.Store, "StoreUnreachable").Inc()
	_, err = r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sweepSeries(t)).To(HaveKeyWithValue("StoreUnreachable", 1.0))

	store := storagetest.ReadyStore(true)
	g.Expect(f.api.Others().Get(ctx, client.ObjectKeyFromObject(store), store)).To(Succeed())
	store.Finalizers = nil
	g.Expect(f.api.Others().Update(ctx, store)).To(Succeed())
	g.Expect(f.api.Others().Delete(ctx, store)).To(Succeed())
	_, err = r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sweepSeries(t)).To(BeEmpty(), "a deleted store's series go")
}
