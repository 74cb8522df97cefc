package view

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/operate"
	"github.com/trellis-dev/trellis/internal/testenv"
)

func patchView(g Gomega, ns, name, patch string) {
	mv := &viewv1.MarkdownView{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	g.Expect(k8s.Patch(context.Background(), mv, client.RawPatch("application/merge-patch+json", []byte(patch)))).To(Succeed())
}

func eventuallyViewSuspended(g Gomega, ns, name string) *viewv1.MarkdownView {
	mv := &viewv1.MarkdownView{}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(context.Background(), key(ns, name), mv)).To(Succeed())
		g.Expect(conditions.IsTrue(mv.Status.Conditions, operate.ConditionSuspended)).To(BeTrue(), "status: %+v", mv.Status)
		g.Expect(mv.Status.ObservedGeneration).To(Equal(mv.Generation))
	}, timeout, interval).Should(Succeed())
	return mv
}

// writesIn is the manager's writes in namespace ns since the last Reset,
// Events included: views of earlier tests in other namespaces may still be
// written (a view left rolling out says so after two minutes). The view
// controller writes nothing cluster-scoped, so nothing is missed.
func writesIn(ns string) []string {
	_, paths := mgrWrites.Writes()
	var mine []string
	for _, p := range paths {
		if strings.Contains(p, "/namespaces/"+ns+"/") {
			mine = append(mine, p)
		}
	}
	return mine
}

// waitForViewQuiet waits until the manager has written nothing for half a second.
func waitForViewQuiet(g Gomega) {
	g.Eventually(func() error {
		before, _ := mgrWrites.Writes()
		time.Sleep(500 * time.Millisecond)
		if after, paths := mgrWrites.Writes(); after != before {
			return fmt.Errorf("still writing: %v", paths[before:])
		}
		return nil
	}, timeout, interval).Should(Succeed())
}

// TestSuspendedViewKeepsWhatItHas: a suspended MarkdownView writes only the
// status that says so: a content edit does not reach its ConfigMap, drift of
// its Deployment stays; kstatus reads it Current; resuming applies both at
// once. kubectl shows REASON, and SUSPENDED with -o wide.
func TestSuspendedViewKeepsWhatItHas(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(k8s.Create(ctx, newMarkdownView(ns, "sus", map[string]string{"a.md": "A"}))).To(Succeed())
	g.Eventually(func() error { return k8s.Get(ctx, key(ns, "viewer-sus"), &appsv1.Deployment{}) }, timeout, interval).Should(Succeed())
	markAvailable(g, ns, "viewer-sus")
	g.Eventually(func(g Gomega) {
		g.Expect(readyCondition(g, ns, "sus").Status).To(Equal(metav1.ConditionTrue))
	}, timeout, interval).Should(Succeed())

	patchView(g, ns, "sus", `{"spec":{"suspend":true}}`)
	mv := eventuallyViewSuspended(g, ns, "sus")
	g.Expect(conditions.IsTrue(mv.Status.Conditions, conditions.Ready)).To(BeTrue(), "Ready is kept as it was")
	res, _, err := testenv.KStatusOnServer(ctx, k8s, mv)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Status).To(Equal(kstatus.CurrentStatus), "kstatus: %s", res.Message)
	rows, priority, err := testenv.Table(adminCfg, "/apis/view.trellis.dev/v1/namespaces/"+ns+"/markdownviews")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rows).To(HaveLen(1))
	g.Expect(rows[0]).To(HaveKeyWithValue("Reason", conditions.Get(mv.Status.Conditions, conditions.Ready).Reason))
	g.Expect(rows[0]).To(HaveKeyWithValue("Suspended", true))
	g.Expect(priority).To(HaveKeyWithValue("Suspended", int32(1)))
	waitForViewQuiet(g)

	mgrWrites.Reset()
	d := &appsv1.Deployment{}
	g.Expect(k8s.Get(ctx, key(ns, "viewer-sus"), d)).To(Succeed())
	d.Spec.Replicas = ptr.To[int32](5)
	g.Expect(k8s.Update(ctx, d)).To(Succeed())
	patchView(g, ns, "sus", `{"spec":{"markdowns":{"a.md":"B"}}}`)
	eventuallyViewSuspended(g, ns, "sus")
	time.Sleep(3 * time.Second)
	// This view's namespace only: views of earlier tests may still be
	// written (a retry of a stalled one) on a loaded machine.
	var writes []string
	_, paths := mgrWrites.Writes()
	for _, p := range paths {
		if strings.Contains(p, "/namespaces/"+ns+"/") && !strings.Contains(p, "/events") {
			writes = append(writes, p)
		}
	}
	g.Expect(writes).To(HaveLen(1), "only the status, that it saw the edit and is suspended: %v", writes)
	g.Expect(writes[0]).To(HaveSuffix("/markdownviews/sus/status"))
	cm := &corev1.ConfigMap{}
	g.Expect(k8s.Get(ctx, key(ns, "markdowns-sus"), cm)).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue("a.md", "A"), "an edit while suspended is not applied")
	g.Expect(k8s.Get(ctx, key(ns, "viewer-sus"), d)).To(Succeed())
	g.Expect(*d.Spec.Replicas).To(Equal(int32(5)), "drift is left while suspended")

	patchView(g, ns, "sus", `{"spec":{"suspend":false}}`)
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, key(ns, "markdowns-sus"), cm)).To(Succeed())
		g.Expect(cm.Data).To(HaveKeyWithValue("a.md", "B"))
		g.Expect(k8s.Get(ctx, key(ns, "viewer-sus"), d)).To(Succeed())
		g.Expect(*d.Spec.Replicas).To(Equal(int32(1)))
		got := &viewv1.MarkdownView{}
		g.Expect(k8s.Get(ctx, key(ns, "sus"), got)).To(Succeed())
		g.Expect(conditions.Get(got.Status.Conditions, operate.ConditionSuspended)).To(BeNil())
	}, timeout, interval).Should(Succeed())
}

// TestViewReconcileRequestIsAnsweredOnce: a Ready view is looked at on no
// schedule; a changed reconcile.fluxcd.io/requestedAt reconciles it and is
// recorded, and the same value again costs nothing.
func TestViewReconcileRequestIsAnsweredOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(k8s.Create(ctx, newMarkdownView(ns, "rnow", map[string]string{"a.md": "A"}))).To(Succeed())
	g.Eventually(func() error { return k8s.Get(ctx, key(ns, "viewer-rnow"), &appsv1.Deployment{}) }, timeout, interval).Should(Succeed())
	markAvailable(g, ns, "viewer-rnow")
	g.Eventually(func(g Gomega) {
		g.Expect(readyCondition(g, ns, "rnow").Status).To(Equal(metav1.ConditionTrue))
	}, timeout, interval).Should(Succeed())
	waitForViewQuiet(g)

	patchView(g, ns, "rnow", `{"metadata":{"annotations":{"reconcile.fluxcd.io/requestedAt":"1"}}}`)
	g.Eventually(func(g Gomega) {
		got := &viewv1.MarkdownView{}
		g.Expect(k8s.Get(ctx, key(ns, "rnow"), got)).To(Succeed())
		g.Expect(got.Status.LastHandledReconcileAt).To(Equal("1"))
	}, timeout, interval).Should(Succeed())
	waitForViewQuiet(g)

	mgrWrites.Reset()
	patchView(g, ns, "rnow", `{"metadata":{"labels":{"touched":"yes"}}}`)
	for range 3 {
		_, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: key(ns, "rnow")})
		g.Expect(err).NotTo(HaveOccurred())
	}
	time.Sleep(time.Second)
	g.Expect(writesIn(ns)).To(BeEmpty())
}
