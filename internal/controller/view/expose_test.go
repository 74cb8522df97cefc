package view

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// stalledCondition is the Stalled condition of a MarkdownView, nil when absent.
func stalledCondition(g Gomega, ns, name string) *metav1.Condition {
	mv := &viewv1.MarkdownView{}
	g.Expect(k8s.Get(context.Background(), key(ns, name), mv)).To(Succeed())
	return meta.FindStatusCondition(mv.Status.Conditions, conditions.Stalled)
}

// expectStalled waits until the MarkdownView is Stalled for reason and
// returns the message.
func expectStalled(g Gomega, ns, name, reason string) string {
	var msg string
	g.Eventually(func(g Gomega) {
		c := stalledCondition(g, ns, name)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(reason))
		g.Expect(readyCondition(g, ns, name).Status).To(Equal(metav1.ConditionFalse))
		msg = c.Message
	}, timeout, interval).Should(Succeed())
	return msg
}

// editView changes a MarkdownView's spec, retrying on conflicts.
func editView(g Gomega, ns, name string, edit func(*viewv1.MarkdownView)) {
	g.Eventually(func() error {
		mv := &viewv1.MarkdownView{}
		if err := k8s.Get(context.Background(), key(ns, name), mv); err != nil {
			return err
		}
		edit(mv)
		return k8s.Update(context.Background(), mv)
	}, timeout, interval).Should(Succeed())
}

func viewURL(g Gomega, ns, name string) string {
	mv := &viewv1.MarkdownView{}
	g.Expect(k8s.Get(context.Background(), key(ns, name), mv)).To(Succeed())
	return mv.Status.URL
}

// expectQuiet waits until the manager has stopped writing, then reconciles
// the object again several times and expects no write at all.
func expectQuiet(g Gomega, ns, name string) {
	g.Eventually(func() error {
		before, _ := mgrWrites.Writes()
		time.Sleep(500 * time.Millisecond)
		if after, paths := mgrWrites.Writes(); after != before {
			return fmt.Errorf("still writing: %v", paths[before:])
		}
		return nil
	}, timeout, interval).Should(Succeed())
	mgrWrites.Reset()
	for range 3 {
		_, err := reconciler.Reconcile(context.Background(), ctrl.Request{NamespacedName: key(ns, name)})
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(writesIn(ns)).To(BeEmpty())
}

func TestIngressIsCreatedChangedAndRemoved(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	mv := newMarkdownView(ns, "site", map[string]string{"a.md": "# A"})
	mv.Spec.Expose.Ingress = viewv1.IngressExpose{Host: "docs.example.com", IngressClassName: "public", TLSSecretName: "docs-tls"}
	g.Expect(k8s.Create(ctx, mv)).To(Succeed())

	in := &networkingv1.Ingress{}
	g.Eventually(func() error { return k8s.Get(ctx, key(ns, "viewer-site"), in) }, timeout, interval).Should(Succeed())
	g.Expect(metav1.IsControlledBy(in, mv)).To(BeTrue())
	g.Expect(in.Labels).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "trellis"))
	g.Expect(in.Spec.IngressClassName).To(HaveValue(Equal("public")))
	g.Expect(in.Spec.TLS).To(Equal([]networkingv1.IngressTLS{{Hosts: []string{"docs.example.com"}, SecretName: "docs-tls"}}))
	g.Expect(in.Spec.Rules).To(HaveLen(1))
	g.Expect(in.Spec.Rules[0].Host).To(Equal("docs.example.com"))
	g.Expect(in.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name).To(Equal("viewer-site"))
	g.Expect(testenv.FieldManagers(in)[""]).To(ConsistOf("trellis"))

	markAvailable(g, ns, "viewer-site")
	g.Eventually(func(g Gomega) {
		g.Expect(readyCondition(g, ns, "site").Status).To(Equal(metav1.ConditionTrue))
		g.Expect(viewURL(g, ns, "site")).To(Equal("https://docs.example.com"))
	}, timeout, interval).Should(Succeed())
	expectQuiet(g, ns, "site")

	// A new host and no TLS: the same Ingress follows.
	editView(g, ns, "site", func(mv *viewv1.MarkdownView) {
		mv.Spec.Expose.Ingress = viewv1.IngressExpose{Host: "handbook.example.com"}
	})
	g.Eventually(func(g Gomega) {
		got := &networkingv1.Ingress{}
		g.Expect(k8s.Get(ctx, key(ns, "viewer-site"), got)).To(Succeed())
		g.Expect(got.UID).To(Equal(in.UID))
		g.Expect(got.Spec.Rules[0].Host).To(Equal("handbook.example.com"))
		g.Expect(got.Spec.TLS).To(BeEmpty())
		g.Expect(got.Spec.IngressClassName).To(BeNil())
		g.Expect(viewURL(g, ns, "site")).To(Equal("http://handbook.example.com"))
	}, timeout, interval).Should(Succeed())

	// No more expose: the Ingress goes, the URL is the Service's again.
	editView(g, ns, "site", func(mv *viewv1.MarkdownView) { mv.Spec.Expose = viewv1.Expose{} })
	g.Eventually(func(g Gomega) {
		err := k8s.Get(ctx, key(ns, "viewer-site"), &networkingv1.Ingress{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
		g.Expect(viewURL(g, ns, "site")).To(Equal("http://viewer-site." + ns + ".svc"))
	}, timeout, interval).Should(Succeed())
	expectQuiet(g, ns, "site")
}

func TestHTTPRouteIsCreatedChangedAndRemoved(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	mv := newMarkdownView(ns, "routed", map[string]string{"a.md": "# A"})
	mv.Spec.Expose.HTTPRoute = viewv1.HTTPRouteExpose{
		ParentRefs: []viewv1.ParentReference{{Name: "public", Namespace: "infra", SectionName: "https"}},
		Hostnames:  []viewv1.Hostname{"docs.example.com"},
	}
	g.Expect(k8s.Create(ctx, mv)).To(Succeed())

	route := &gatewayv1.HTTPRoute{}
	g.Eventually(func() error { return k8s.Get(ctx, key(ns, "viewer-routed"), route) }, timeout, interval).Should(Succeed())
	g.Expect(metav1.IsControlledBy(route, mv)).To(BeTrue())
	g.Expect(route.Labels).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "trellis"))
	g.Expect(route.Spec.ParentRefs).To(HaveLen(1))
	g.Expect(route.Spec.ParentRefs[0].Name).To(BeEquivalentTo("public"))
	g.Expect(route.Spec.ParentRefs[0].Namespace).To(HaveValue(BeEquivalentTo("infra")))
	g.Expect(route.Spec.ParentRefs[0].SectionName).To(HaveValue(BeEquivalentTo("https")))
	g.Expect(route.Spec.Hostnames).To(ConsistOf(gatewayv1.Hostname("docs.example.com")))
	g.Expect(route.Spec.Rules).To(HaveLen(1))
	g.Expect(route.Spec.Rules[0].BackendRefs[0].Name).To(BeEquivalentTo("viewer-routed"))
	g.Expect(route.Spec.Rules[0].BackendRefs[0].Port).To(HaveValue(BeEquivalentTo(80)))
	g.Expect(testenv.FieldManagers(route)[""]).To(ConsistOf("trellis"))

	markAvailable(g, ns, "viewer-routed")
	g.Eventually(func(g Gomega) {
		g.Expect(readyCondition(g, ns, "routed").Status).To(Equal(metav1.ConditionTrue))
		g.Expect(viewURL(g, ns, "routed")).To(Equal("https://docs.example.com"))
	}, timeout, interval).Should(Succeed())
	// What the CRD defaults agrees with what Trellis applies: no write loop.
	expectQuiet(g, ns, "routed")

	// The route follows the spec: another Gateway and two hostnames.
	editView(g, ns, "routed", func(mv *viewv1.MarkdownView) {
		mv.Spec.Expose.HTTPRoute.ParentRefs = []viewv1.ParentReference{{Name: "internal"}}
		mv.Spec.Expose.HTTPRoute.Hostnames = []viewv1.Hostname{"handbook.example.com", "docs.example.com"}
		mv.Spec.Expose.HTTPRoute.Scheme = "http"
	})
	g.Eventually(func(g Gomega) {
		got := &gatewayv1.HTTPRoute{}
		g.Expect(k8s.Get(ctx, key(ns, "viewer-routed"), got)).To(Succeed())
		g.Expect(got.UID).To(Equal(route.UID))
		g.Expect(got.Spec.ParentRefs).To(HaveLen(1))
		g.Expect(got.Spec.ParentRefs[0].Name).To(BeEquivalentTo("internal"))
		g.Expect(got.Spec.ParentRefs[0].Namespace).To(BeNil())
		g.Expect(got.Spec.Hostnames).To(Equal([]gatewayv1.Hostname{"handbook.example.com", "docs.example.com"}))
		g.Expect(viewURL(g, ns, "routed")).To(Equal("http://handbook.example.com"))
	}, timeout, interval).Should(Succeed())
	expectQuiet(g, ns, "routed")

	// From a route to an Ingress: the route goes, the Ingress comes.
	editView(g, ns, "routed", func(mv *viewv1.MarkdownView) {
		mv.Spec.Expose = viewv1.Expose{Ingress: viewv1.IngressExpose{Host: "docs.example.com"}}
	})
	g.Eventually(func(g Gomega) {
		err := k8s.Get(ctx, key(ns, "viewer-routed"), &gatewayv1.HTTPRoute{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "got %v", err)
		g.Expect(k8s.Get(ctx, key(ns, "viewer-routed"), &networkingv1.Ingress{})).To(Succeed())
	}, timeout, interval).Should(Succeed())
}

func TestRefusedRouteIsStalledUntilAccepted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	mv := newMarkdownView(ns, "refused", map[string]string{"a.md": "# A"})
	mv.Spec.Expose.HTTPRoute = viewv1.HTTPRouteExpose{ParentRefs: []viewv1.ParentReference{{Name: "public"}}, Hostnames: []viewv1.Hostname{"docs.example.com"}}
	g.Expect(k8s.Create(ctx, mv)).To(Succeed())
	g.Eventually(func() error { return k8s.Get(ctx, key(ns, "viewer-refused"), &appsv1.Deployment{}) }, timeout, interval).Should(Succeed())
	markAvailable(g, ns, "viewer-refused")
	// No Gateway controller has looked at the route yet: the site is Ready
	// (it is served inside the cluster; some clusters have no Gateway at all).
	g.Eventually(func(g Gomega) {
		g.Expect(readyCondition(g, ns, "refused").Status).To(Equal(metav1.ConditionTrue))
	}, timeout, interval).Should(Succeed())

	// The Gateway's controller refuses the route.
	setRouteAccepted := func(status metav1.ConditionStatus, reason, message string) {
		g.Eventually(func() error {
			r := &gatewayv1.HTTPRoute{}
			if err := k8s.Get(ctx, key(ns, "viewer-refused"), r); err != nil {
				return err
			}
			r.Status.Parents = []gatewayv1.RouteParentStatus{{
				ParentRef:      gatewayv1.ParentReference{Name: "public"},
				ControllerName: "example.com/gateway-controller",
				Conditions: []metav1.Condition{{Type: "Accepted", Status: status, Reason: reason, Message: message,
					ObservedGeneration: r.Generation, LastTransitionTime: metav1.Now()}},
			}}
			return k8s.Status().Update(ctx, r)
		}, timeout, interval).Should(Succeed())
	}
	setRouteAccepted(metav1.ConditionFalse, "NotAllowedByListeners", "no listener allows routes from "+ns)
	msg := expectStalled(g, ns, "refused", ReasonRouteNotAccepted)
	g.Expect(msg).To(ContainSubstring("Gateway " + ns + "/public does not accept HTTPRoute viewer-refused (NotAllowedByListeners)"))

	setRouteAccepted(metav1.ConditionTrue, "Accepted", "")
	g.Eventually(func(g Gomega) {
		g.Expect(readyCondition(g, ns, "refused").Status).To(Equal(metav1.ConditionTrue))
		g.Expect(stalledCondition(g, ns, "refused")).To(BeNil())
	}, timeout, interval).Should(Succeed())
}

func TestForeignIngressAndRouteAreNeverAdopted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	class := "theirs"
	foreignIngress := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "viewer-taken", Labels: map[string]string{"owner": "someone"}},
		Spec: networkingv1.IngressSpec{IngressClassName: &class, DefaultBackend: &networkingv1.IngressBackend{
			Service: &networkingv1.IngressServiceBackend{Name: "their-app", Port: networkingv1.ServiceBackendPort{Number: 8080}}}},
	}
	g.Expect(k8s.Create(ctx, foreignIngress)).To(Succeed())
	foreignRoute := &gatewayv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "viewer-taken2"},
		Spec:       gatewayv1.HTTPRouteSpec{Hostnames: []gatewayv1.Hostname{"theirs.example.com"}},
	}
	g.Expect(k8s.Create(ctx, foreignRoute)).To(Succeed())

	mv := newMarkdownView(ns, "taken", map[string]string{"a.md": "# A"})
	mv.Spec.Expose.Ingress = viewv1.IngressExpose{Host: "docs.example.com"}
	g.Expect(k8s.Create(ctx, mv)).To(Succeed())
	mv2 := newMarkdownView(ns, "taken2", map[string]string{"a.md": "# A"})
	mv2.Spec.Expose.HTTPRoute = viewv1.HTTPRouteExpose{ParentRefs: []viewv1.ParentReference{{Name: "gw"}}, Hostnames: []viewv1.Hostname{"docs.example.com"}}
	g.Expect(k8s.Create(ctx, mv2)).To(Succeed())

	g.Expect(expectStalled(g, ns, "taken", ReasonChildConflict)).To(ContainSubstring("Ingress viewer-taken"))
	g.Expect(expectStalled(g, ns, "taken2", ReasonChildConflict)).To(ContainSubstring("HTTPRoute viewer-taken2"))

	// Untouched: same spec, labels, no owner, no field written by Trellis.
	gotIngress := &networkingv1.Ingress{}
	g.Expect(k8s.Get(ctx, key(ns, "viewer-taken"), gotIngress)).To(Succeed())
	g.Expect(gotIngress.Spec).To(Equal(foreignIngress.Spec))
	g.Expect(gotIngress.Labels).To(Equal(map[string]string{"owner": "someone"}))
	g.Expect(gotIngress.OwnerReferences).To(BeEmpty())
	g.Expect(gotIngress.ResourceVersion).To(Equal(foreignIngress.ResourceVersion))
	gotRoute := &gatewayv1.HTTPRoute{}
	g.Expect(k8s.Get(ctx, key(ns, "viewer-taken2"), gotRoute)).To(Succeed())
	g.Expect(gotRoute.ResourceVersion).To(Equal(foreignRoute.ResourceVersion))
	g.Expect(gotRoute.OwnerReferences).To(BeEmpty())

	// Dropping expose does not delete what is not ours either.
	editView(g, ns, "taken", func(mv *viewv1.MarkdownView) { mv.Spec.Expose = viewv1.Expose{} })
	g.Eventually(func(g Gomega) {
		g.Expect(stalledCondition(g, ns, "taken")).To(BeNil())
	}, timeout, interval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		got := &networkingv1.Ingress{}
		g.Expect(k8s.Get(ctx, key(ns, "viewer-taken"), got)).To(Succeed())
		g.Expect(got.UID).To(Equal(foreignIngress.UID))
	}, time.Second, interval).Should(Succeed())
}

// An Ingress carrying Trellis' label but controlled by nothing (someone
// copied our labels) is in the cache, and still not Trellis' to delete.
func TestLabelledButNotOwnedIngressIsNotDeleted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	lookalike := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "viewer-plain", Labels: map[string]string{"app.kubernetes.io/managed-by": "trellis"}},
		Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{
			Service: &networkingv1.IngressServiceBackend{Name: "x", Port: networkingv1.ServiceBackendPort{Number: 80}}}},
	}
	g.Expect(k8s.Create(ctx, lookalike)).To(Succeed())
	g.Expect(k8s.Create(ctx, newMarkdownView(ns, "plain", map[string]string{"a.md": "# A"}))).To(Succeed())
	g.Eventually(func() error { return k8s.Get(ctx, key(ns, "viewer-plain"), &appsv1.Deployment{}) }, timeout, interval).Should(Succeed())
	// The Deployment exists; the Ingress step may not have run yet, so run a reconcile to its end here.
	_, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: key(ns, "plain")})
	g.Expect(err).NotTo(HaveOccurred())
	got := &networkingv1.Ingress{}
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(lookalike), got)).To(Succeed())
	g.Expect(got.ResourceVersion).To(Equal(lookalike.ResourceVersion))
}
