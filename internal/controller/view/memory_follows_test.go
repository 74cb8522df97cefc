package view

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/manager"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// TestManagerMemoryFollowsLiveViews runs the manager, as bin/manager builds
// it, over many MarkdownViews against an API server of its own: created,
// Ready, then deleted with their children (as the garbage collector, which
// envtest does not run, would). The status writes the controller remembers
// must be none once its cache has them, while the views are still there,
// and the heap of the test process must come back to within
// testenv.HeapSlack of where it was after a warm-up, once client-go's Event
// cache is allowed for (testenv.EventBytes).
//
//	TRELLIS_MEMORY_VIEWS=200 go test -run TestManagerMemoryFollowsLiveViews -v ./internal/controller/view/
func TestManagerMemoryFollowsLiveViews(t *testing.T) {
	n := 60
	if v := os.Getenv("TRELLIS_MEMORY_VIEWS"); v != "" {
		var err error
		// Each view has a Service, and envtest's Service range (a /24) holds 253.
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > 240 {
			t.Fatalf("TRELLIS_MEMORY_VIEWS=%q: want 1 to 240 (envtest's Service range)", v)
		}
	}
	g := NewWithT(t)
	ctx := context.Background()
	cfg, c, scheme := ownAPIServer(t)
	var r *Reconciler
	cached, stop := startViewManager(g, cfg, scheme, func(_ *manager.Options, ctl *setup.Controller) {
		ctl.Setup = func(ctx context.Context, mgr ctrl.Manager, o setup.Options) error {
			var err error
			if r, err = NewReconciler(mgr, o); err != nil {
				return err
			}
			co := o.ControllerOptions()
			co.SkipNameValidation = ptr.To(true) // the suite's manager has one of this name already
			return r.setupWith(ctx, mgr, co)
		}
	})
	defer func() { g.Expect(stop()).To(Succeed()) }()

	var liveRemembered int
	round := func(ns string, count int) {
		g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		for i := range count {
			g.Expect(c.Create(ctx, smallView(ns, fmt.Sprintf("v%d", i)))).To(Succeed())
		}
		for i := range count {
			deploymentAvailable(g, c, ns, fmt.Sprintf("viewer-v%d", i))
		}
		g.Eventually(func(g Gomega) {
			views := &viewv1.MarkdownViewList{}
			g.Expect(cached.List(ctx, views, client.InNamespace(ns))).To(Succeed())
			g.Expect(views.Items).To(HaveLen(count))
			for _, mv := range views.Items {
				g.Expect(mv.Status.ObservedGeneration).To(Equal(mv.Generation), mv.Name)
				g.Expect(meta.IsStatusConditionTrue(mv.Status.Conditions, conditions.Ready)).To(BeTrue(), mv.Name)
			}
		}, 5*time.Minute, time.Second).Should(Succeed())
		// The views are all there; what the controller wrote is in its cache.
		g.Eventually(r.status.Remembered, 30*time.Second, 100*time.Millisecond).Should(BeZero(),
			"status writes the cache has shown are forgotten while the views live")
		liveRemembered = r.status.Remembered()

		g.Expect(c.DeleteAllOf(ctx, &viewv1.MarkdownView{}, client.InNamespace(ns))).To(Succeed())
		g.Expect(c.DeleteAllOf(ctx, &appsv1.Deployment{}, client.InNamespace(ns))).To(Succeed())
		g.Expect(c.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(ns), client.MatchingLabels{setup.ManagedByLabel: setup.ManagedByValue})).To(Succeed())
		services := &corev1.ServiceList{}
		g.Expect(c.List(ctx, services, client.InNamespace(ns))).To(Succeed())
		for i := range services.Items {
			g.Expect(client.IgnoreNotFound(c.Delete(ctx, &services.Items[i]))).To(Succeed())
		}
		g.Eventually(func(g Gomega) {
			for _, list := range []client.ObjectList{&viewv1.MarkdownViewList{}, &appsv1.DeploymentList{}, &corev1.ServiceList{}} {
				g.Expect(cached.List(ctx, list, client.InNamespace(ns))).To(Succeed())
				g.Expect(meta.LenList(list)).To(BeZero(), "%T", list)
			}
		}, 2*time.Minute, time.Second).Should(Succeed())
		g.Eventually(r.status.Remembered, 30*time.Second, 100*time.Millisecond).Should(BeZero(), "deleted views are forgotten")
	}

	round("mem-warm-up", 3) // what is paid once: connections, the event broadcaster, informer buffers
	start := testenv.LiveHeap()
	round("mem-live", n)
	time.Sleep(2 * time.Second) // the last watch events and Events in flight
	end := testenv.LiveHeap()
	events := &eventsv1.EventList{}
	g.Expect(c.List(ctx, events, client.InNamespace("mem-live"))).To(Succeed())
	t.Logf("heap: %.1f MiB after a warm-up; %+d KiB after %d views were created, Ready (%d status writes remembered) and deleted, which raised %d Events",
		float64(start)/(1<<20), (end-start)>>10, n, liveRemembered, len(events.Items))
	g.Expect(end - start).To(BeNumerically("<=", testenv.HeapSlack(start)+int64(len(events.Items))*testenv.EventBytes))
}
