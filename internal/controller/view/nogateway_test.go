package view

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// TestHTTPRouteWithoutGatewayAPI runs the manager against an API server of
// its own that has no Gateway API CRDs: the manager starts (it neither
// caches nor watches HTTPRoutes), a MarkdownView asking for an HTTPRoute
// says why it cannot have one, and everything else still works.
func TestHTTPRouteWithoutGatewayAPI(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cfg, c, scheme := ownAPIServer(t) // the Gateway API types known to the manager, not served by the cluster
	managerCfg, err := testenv.AsManager(ctx, cfg, c)
	g.Expect(err).NotTo(HaveOccurred())
	_, stop := startViewManager(g, managerCfg, scheme, nil)

	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "docs"}})).To(Succeed())
	routed := newMarkdownView("docs", "routed", map[string]string{"a.md": "# A"})
	routed.Spec.Expose.HTTPRoute = viewv1.HTTPRouteExpose{ParentRefs: []viewv1.ParentReference{{Name: "public"}}, Hostnames: []viewv1.Hostname{"docs.example.com"}}
	g.Expect(c.Create(ctx, routed)).To(Succeed())
	ingressed := newMarkdownView("docs", "ingressed", map[string]string{"a.md": "# A"})
	ingressed.Spec.Expose.Ingress = viewv1.IngressExpose{Host: "docs.example.com"}
	g.Expect(c.Create(ctx, ingressed)).To(Succeed())

	g.Eventually(func(g Gomega) {
		mv := &viewv1.MarkdownView{}
		g.Expect(c.Get(ctx, key("docs", "routed"), mv)).To(Succeed())
		stalled := meta.FindStatusCondition(mv.Status.Conditions, conditions.Stalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(ReasonGatewayAPIUnavailable))
		g.Expect(stalled.Message).To(ContainSubstring("install the Gateway API CRDs and restart the manager"))
	}, timeout, interval).Should(Succeed())
	// The site itself is still served inside the cluster.
	g.Expect(c.Get(ctx, key("docs", "viewer-routed"), &appsv1.Deployment{})).To(Succeed())
	g.Expect(c.Get(ctx, key("docs", "viewer-routed"), &corev1.Service{})).To(Succeed())
	// And an Ingress needs no Gateway API.
	g.Eventually(func() error { return c.Get(ctx, key("docs", "viewer-ingressed"), &networkingv1.Ingress{}) }, timeout, interval).Should(Succeed())

	g.Expect(stop()).To(Succeed())
}
