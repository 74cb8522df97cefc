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
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/manager"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// TestHTTPRouteWithoutGatewayAPI runs the manager against an API server of
// its own that has no Gateway API CRDs: the manager starts (it neither
// caches nor watches HTTPRoutes), a MarkdownView asking for an HTTPRoute
// says why it cannot have one, and everything else still works.
func TestHTTPRouteWithoutGatewayAPI(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(viewv1.AddToScheme(scheme))
	utilruntime.Must(gatewayv1.Install(scheme)) // known to the manager, not served by the cluster

	env, cfg, err := testenv.Start(scheme)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = env.Stop() }()
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	g.Expect(err).NotTo(HaveOccurred())
	managerCfg, err := testenv.AsManager(ctx, cfg, c)
	g.Expect(err).NotTo(HaveOccurred())

	opts := manager.NewOptions()
	opts.Namespace = testenv.ManagerNamespace
	opts.MetricsAddr, opts.ProbeAddr = "0", "0"
	ctl := Controller
	ctl.Setup = func(_ context.Context, mgr ctrl.Manager, o setup.Options) error {
		r, err := NewReconciler(mgr, o)
		if err != nil {
			return err
		}
		co := o.ControllerOptions()
		co.SkipNameValidation = ptr.To(true) // the suite's manager has one of this name already
		return r.setupWith(mgr, co)
	}
	mgr, err := manager.New(ctx, managerCfg, scheme, opts, []setup.Controller{ctl})
	g.Expect(err).NotTo(HaveOccurred())
	stop, err := testenv.RunManager(mgr)
	g.Expect(err).NotTo(HaveOccurred())

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
