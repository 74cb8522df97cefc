package view

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// reconcilesSoFar is controller-runtime's count of MarkdownView reconciles
// in this process.
func reconcilesSoFar(g Gomega) float64 {
	families, err := crmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == ControllerName {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// TestRestartedManagerWritesNothing: a manager that starts on converged
// (Ready) MarkdownViews reconciles every one and writes nothing. (Client-go hands
// the cache transforms each object of the initial list twice; a transform
// that took its own trimmed copy for a live object would see every
// ConfigMap as changed and rewrite it.)
func TestRestartedManagerWritesNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cfg, c, scheme := ownAPIServer(t)

	_, stop := startViewManager(g, cfg, scheme, nil)
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "docs"}})).To(Succeed())
	const views = 6
	for i := range views {
		mv := newMarkdownView("docs", fmt.Sprintf("v%d", i), map[string]string{"a.md": fmt.Sprintf("# %d", i)})
		switch i {
		case 1:
			mv.Spec.Assets = map[string][]byte{"logo.png": testPNG(t)}
		case 2:
			mv.Spec.Expose.Ingress = viewv1.IngressExpose{Host: "docs.example.com"}
		case 3:
			mv.Spec.Pod.Tolerations = []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
		}
		g.Expect(c.Create(ctx, mv)).To(Succeed())
	}
	for i := range views {
		markAvailableIn(g, c, "docs", fmt.Sprintf("viewer-v%d", i))
	}
	g.Eventually(func(g Gomega) {
		list := &viewv1.MarkdownViewList{}
		g.Expect(c.List(ctx, list)).To(Succeed())
		g.Expect(list.Items).To(HaveLen(views))
		for _, mv := range list.Items {
			g.Expect(mv.Status.ObservedGeneration).To(Equal(mv.Generation))
			g.Expect(meta.IsStatusConditionTrue(mv.Status.Conditions, conditions.Ready)).To(BeTrue(), mv.Name)
		}
		cms := &corev1.ConfigMapList{}
		g.Expect(c.List(ctx, cms, client.InNamespace("docs"))).To(Succeed())
		g.Expect(cms.Items).To(HaveLen(views))
	}, timeout, interval).Should(Succeed())
	time.Sleep(time.Second)
	g.Expect(stop()).To(Succeed())

	var writes testenv.WriteCounter
	before := reconcilesSoFar(g)
	_, stop = startViewManager(g, writes.Wrap(cfg), scheme, nil)
	defer func() { g.Expect(stop()).To(Succeed()) }()
	g.Eventually(func() float64 { return reconcilesSoFar(g) - before }, timeout, interval).Should(BeNumerically(">=", views),
		"the new manager reconciles every view")
	time.Sleep(2 * time.Second)
	n, paths := writes.Writes()
	g.Expect(n).To(BeZero(), "writes after a restart: %v", paths)
}
