package view

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/internal/testenv"
)

// TestAConflictStormIsNoReconcileError: another field manager edits the
// views' ConfigMaps as fast as it can while the manager puts them back. The
// manager's updates carry the resourceVersion its cache saw, so many lose
// the race (409 Conflict). None of them is a reconcile error: no "Reconciler
// error", controller_runtime_reconcile_errors_total stays where it was (what
// the TrellisReconcileErrors alert reads), the conflicts are counted in
// trellis_reconcile_conflicts_total, and every view converges once the
// other writer stops.
func TestAConflictStormIsNoReconcileError(t *testing.T) {
	const (
		views   = 20
		edits   = 1000 // by the other field manager, over all the ConfigMaps
		writers = 8
	)
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	for i := range views {
		g.Expect(k8s.Create(ctx, newMarkdownView(ns, fmt.Sprintf("storm-%d", i), map[string]string{"a.md": fmt.Sprintf("# %d", i)}))).To(Succeed())
	}
	for i := range views {
		markAvailable(g, ns, fmt.Sprintf("viewer-storm-%d", i))
	}
	// Converged: each ConfigMap holds its view's files and nothing else,
	// and each view says Ready for its generation.
	converged := func(g Gomega) {
		for i := range views {
			name := fmt.Sprintf("storm-%d", i)
			cm := &corev1.ConfigMap{}
			g.Expect(k8s.Get(ctx, key(ns, "markdowns-"+name), cm)).To(Succeed())
			g.Expect(cm.Data).To(Equal(map[string]string{"a.md": fmt.Sprintf("# %d", i)}), name)
			ready := readyCondition(g, ns, name)
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), name)
			g.Expect(ready.ObservedGeneration).To(Equal(int64(1)), name)
		}
	}
	g.Eventually(converged, timeout, interval).Should(Succeed())

	counter := func(name string) float64 {
		n, err := testenv.Counter(name, "controller", ControllerName)
		g.Expect(err).NotTo(HaveOccurred())
		return n
	}
	errorsBefore := counter("controller_runtime_reconcile_errors_total")
	conflictsBefore := counter("trellis_reconcile_conflicts_total")

	start := time.Now()
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	for range writers {
		wg.Go(func() {
			for {
				n := next.Add(1)
				if n > edits {
					return
				}
				cm := &corev1.ConfigMap{}
				cm.Namespace, cm.Name = ns, fmt.Sprintf("markdowns-storm-%d", n%views)
				patch := fmt.Appendf(nil, `{"data":{"intruder.md":"edit %d"}}`, n)
				if err := k8s.Patch(ctx, cm, client.RawPatch(types.MergePatchType, patch), client.FieldOwner("storm")); err != nil {
					failed.Store(err)
					return
				}
			}
		})
	}
	wg.Wait()
	stormTook := time.Since(start)
	if err, _ := failed.Load().(error); err != nil {
		t.Fatalf("the other writer's edit failed: %v", err)
	}

	g.Eventually(converged, timeout, interval).Should(Succeed())
	conflicts := counter("trellis_reconcile_conflicts_total") - conflictsBefore
	t.Logf("%d edits of %d ConfigMaps by %d writers took %s; %d conflicts; converged after %s",
		edits, views, writers, stormTook.Round(time.Millisecond), int(conflicts), time.Since(start).Round(time.Millisecond))
	g.Expect(counter("controller_runtime_reconcile_errors_total")-errorsBefore).To(BeZero(), "a conflict is no reconcile error")
	g.Expect(conflicts).To(BeNumerically(">", 0), "the storm raced the manager: the test proves nothing without a conflict")
}
