package view

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// editorAs returns a client acting as user, bound in ns to the built-in edit
// role (empty in envtest, which aggregates nothing), to the shipped
// markdownview-editor-role and to the extra ClusterRoles given: all the user
// may do.
func editorAs(t *testing.T, user, ns string, extra ...string) client.Client {
	t.Helper()
	ctx := context.Background()
	if err := testenv.ApplyClusterRoles(ctx, k8s, "config/rbac/markdownview_editor_role.yaml"); err != nil {
		t.Fatal(err)
	}
	cfg, err := testenv.AsNamespaceEditor(ctx, adminCfg, k8s, user, []string{ns}, append([]string{"markdownview-editor-role"}, extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// mayCreate is a ClusterRole granting create on one resource.
func mayCreate(t *testing.T, group, resource string) string {
	t.Helper()
	name := "test-create-" + resource
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{group}, Resources: []string{resource}, Verbs: []string{"create"}}},
	}
	if err := k8s.Create(context.Background(), role); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return name
}

func withRoute(mv *viewv1.MarkdownView, hosts ...viewv1.Hostname) *viewv1.MarkdownView {
	mv.Spec.Expose.HTTPRoute = viewv1.HTTPRouteExpose{
		ParentRefs: []viewv1.ParentReference{{Name: "shared", Namespace: "infra"}},
		Hostnames:  hosts,
	}
	return mv
}

// refusedWith expects do to be refused by an admission policy with a message
// containing want. The policy may still be loading when the suite starts, so
// a success is retried (and the object it created deleted first).
func refusedWith(g Gomega, obj client.Object, do func() error, want string) {
	g.Eventually(func() error {
		err := do()
		if err == nil {
			_ = k8s.Delete(context.Background(), obj)
			g.Eventually(func() bool {
				return apierrors.IsNotFound(k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj))
			}, timeout, interval).Should(BeTrue())
		}
		return err
	}, timeout, interval).Should(And(
		WithTransform(apierrors.IsForbidden, BeTrue()),
		MatchError(ContainSubstring(want)),
	))
}

// TestNoOneGetsThroughAMarkdownViewWhatTheyCouldNotCreate: config/admission's
// markdownview-rights policy. The manager creates a view's Ingress or
// HTTPRoute and its pods under its own authority, so the API server asks,
// for the user who sends the MarkdownView, whether they could create those
// themselves: an HTTPRoute on a shared Gateway for any hostname, or pods with
// scheduling and labels of their choosing, are otherwise a confused deputy's
// gift. An UPDATE is checked only for the parts it changes.
func TestNoOneGetsThroughAMarkdownViewWhatTheyCouldNotCreate(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	// mona may create MarkdownViews and nothing else; eddie may also create
	// Deployments, but neither HTTPRoutes nor Ingresses.
	mona := editorAs(t, "mona", ns)
	eddie := editorAs(t, "eddie", ns, mayCreate(t, "apps", "deployments"))
	site := map[string]string{"a.md": "A"}

	t.Run("refused: an HTTPRoute for a user who may not create HTTPRoutes", func(t *testing.T) {
		g := NewWithT(t)
		mv := withRoute(newMarkdownView(ns, "route", site), "login.example.com")
		refusedWith(g, mv, func() error { return eddie.Create(ctx, mv.DeepCopy()) },
			"spec.expose.httpRoute: you may not create httproutes.gateway.networking.k8s.io in namespace "+ns+
				" yourself, so Trellis will not create one for you")
	})
	t.Run("refused: an Ingress for a user who may not create Ingresses", func(t *testing.T) {
		g := NewWithT(t)
		mv := newMarkdownView(ns, "ingress", site)
		mv.Spec.Expose.Ingress = viewv1.IngressExpose{Host: "login.example.com"}
		refusedWith(g, mv, func() error { return eddie.Create(ctx, mv.DeepCopy()) },
			"spec.expose.ingress: you may not create ingresses.networking.k8s.io in namespace "+ns+" yourself")
	})
	for name, pod := range map[string]viewv1.ViewerPod{
		"a priority class": {PriorityClassName: "system-cluster-critical"},
		"tolerations":      {Tolerations: []corev1.Toleration{{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists}}},
		"pod labels":       {Labels: map[string]viewv1.LabelValue{"app": "payments"}},
	} {
		t.Run("refused: "+name+" for a MarkdownView-only user", func(t *testing.T) {
			g := NewWithT(t)
			mv := newMarkdownView(ns, "pod", site)
			mv.Spec.Pod = pod
			refusedWith(g, mv, func() error { return mona.Create(ctx, mv.DeepCopy()) },
				"spec.pod: you may not create deployments.apps (nor pods) in namespace "+ns+" yourself")
		})
	}

	t.Run("admitted: a view without expose or pod settings for a MarkdownView-only user", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(mona.Create(ctx, newMarkdownView(ns, "plain", site))).To(Succeed())
	})
	t.Run("admitted: another viewer image for a MarkdownView-only user (--viewer-image-allow governs it)", func(t *testing.T) {
		g := NewWithT(t)
		mv := newMarkdownView(ns, "image", site)
		mv.Spec.ViewerImage = "example.com/viewer:other"
		g.Expect(mona.Create(ctx, mv)).To(Succeed())
	})
	t.Run("admitted: pod settings for an editor who may create Deployments", func(t *testing.T) {
		g := NewWithT(t)
		mv := newMarkdownView(ns, "pod", site)
		mv.Spec.Pod = viewv1.ViewerPod{PriorityClassName: "docs", Labels: map[string]viewv1.LabelValue{"team": "docs"}}
		g.Expect(eddie.Create(ctx, mv)).To(Succeed())
	})
	t.Run("admitted: an HTTPRoute and an Ingress once the user may create them", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(k8s.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "eddie-exposes"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: mayCreate(t, gatewayv1.GroupName, "httproutes")},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "eddie"}},
		})).To(Succeed())
		g.Expect(k8s.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "eddie-ingresses"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: mayCreate(t, networkingv1.GroupName, "ingresses")},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "eddie"}},
		})).To(Succeed())
		// The authorizer sees the binding once its informer has it.
		g.Eventually(func() error {
			return eddie.Create(ctx, withRoute(newMarkdownView(ns, "route", site), "docs.example.com"))
		}, timeout, interval).Should(Succeed())
		mv := newMarkdownView(ns, "ingress", site)
		mv.Spec.Expose.Ingress = viewv1.IngressExpose{Host: "docs.example.com"}
		g.Eventually(func() error { return eddie.Create(ctx, mv) }, timeout, interval).Should(Succeed())
	})

	// mona edits the views eddie exposed and gave pod settings.
	patch := func(name string, mutate func(*viewv1.MarkdownView)) error {
		mv := &viewv1.MarkdownView{}
		if err := k8s.Get(ctx, key(ns, name), mv); err != nil {
			return err
		}
		before := mv.DeepCopy()
		mutate(mv)
		return mona.Patch(ctx, mv, client.MergeFrom(before))
	}
	t.Run("admitted: a MarkdownView-only user changes only the Markdown of an exposed view", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(patch("route", func(mv *viewv1.MarkdownView) { mv.Spec.Markdowns["a.md"] = "A, edited" })).To(Succeed())
		g.Expect(patch("ingress", func(mv *viewv1.MarkdownView) { mv.Spec.Markdowns["b.md"] = "B" })).To(Succeed())
		g.Expect(patch("pod", func(mv *viewv1.MarkdownView) { mv.Spec.Replicas = 2 })).To(Succeed())
	})
	t.Run("refused: a MarkdownView-only user changes an exposed view's hostnames", func(t *testing.T) {
		g := NewWithT(t)
		err := patch("route", func(mv *viewv1.MarkdownView) {
			mv.Spec.Expose.HTTPRoute.Hostnames = []viewv1.Hostname{"login.example.com"}
		})
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
		g.Expect(err).To(MatchError(ContainSubstring("spec.expose.httpRoute: you may not create httproutes")))
	})
	t.Run("refused: a MarkdownView-only user changes a view's pod settings", func(t *testing.T) {
		g := NewWithT(t)
		err := patch("pod", func(mv *viewv1.MarkdownView) { mv.Spec.Pod.PriorityClassName = "system-node-critical" })
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
		g.Expect(err).To(MatchError(ContainSubstring("spec.pod: you may not create deployments.apps")))
	})
	t.Run("admitted: a MarkdownView-only user takes an exposure away", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(patch("ingress", func(mv *viewv1.MarkdownView) { mv.Spec.Expose = viewv1.Expose{} })).To(Succeed())
	})
}

// TestTheManagersChildrenAreHeldToTheTenantsAllowances: in a
// tenant namespace, config/admission's tenant-allowances policy binds
// everyone, the manager included, so the Ingress and HTTPRoute it writes for
// a view go through the same check as the view. A view within the
// allowances gets its children; one outside them is refused before the
// manager sees it; and once the allowances narrow, the manager's own write
// of a view's Ingress is refused and the view is Stalled. (This suite runs no Tenant controller: the namespace is
// labelled and annotated here as Trellis would for a Tenant with
// allowances; the tenancy suite tests that the controller does.)
func TestTheManagersChildrenAreHeldToTheTenantsAllowances(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   "mdv-tenant-docs",
		Labels: map[string]string{"tenancy.trellis.dev/tenant": "docs"},
		Annotations: map[string]string{
			"tenancy.trellis.dev/allowed-hostnames":       "*.docs.example.com",
			"tenancy.trellis.dev/allowed-ingress-classes": "internal",
			"tenancy.trellis.dev/allowed-gateways":        "infra/shared",
			"tenancy.trellis.dev/allowed-registries":      "example.com",
		},
	}}
	g.Expect(k8s.Create(ctx, ns)).To(Succeed())
	site := map[string]string{"a.md": "A"}

	outside := withRoute(newMarkdownView(ns.Name, "outside", site), "login.example.com")
	refusedWith(g, outside, func() error { return k8s.Create(ctx, outside.DeepCopy()) },
		"hostname login.example.com is outside the Tenant docs's allowances.hostnames [*.docs.example.com]")

	routed := withRoute(newMarkdownView(ns.Name, "routed", site), "a.docs.example.com")
	g.Expect(k8s.Create(ctx, routed)).To(Succeed())
	ingressed := newMarkdownView(ns.Name, "ingressed", site)
	ingressed.Spec.Expose.Ingress = viewv1.IngressExpose{Host: "b.docs.example.com", IngressClassName: "internal", TLSSecretName: "tls"}
	g.Expect(k8s.Create(ctx, ingressed)).To(Succeed())

	g.Eventually(func() error {
		return k8s.Get(ctx, key(ns.Name, "viewer-routed"), &gatewayv1.HTTPRoute{})
	}, timeout, interval).Should(Succeed())
	g.Eventually(func() error {
		return k8s.Get(ctx, key(ns.Name, "viewer-ingressed"), &networkingv1.Ingress{})
	}, timeout, interval).Should(Succeed())
	for _, name := range []string{"routed", "ingressed"} {
		c := stalledCondition(g, ns.Name, name)
		g.Expect(c == nil || c.Status != metav1.ConditionTrue).To(BeTrue(), "%s: %v", name, c)
	}

	// The manager is held to the allowances too: narrowed after the view
	// was admitted, they refuse the Ingress it writes again once its
	// Ingress is gone, and the view says why.
	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ns), ns)).To(Succeed())
	ns.Annotations["tenancy.trellis.dev/allowed-hostnames"] = "*.other.example.com"
	g.Expect(k8s.Update(ctx, ns)).To(Succeed())
	g.Expect(k8s.Delete(ctx, &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "viewer-ingressed"}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		c := stalledCondition(g, ns.Name, "ingressed")
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(ContainSubstring("hostname b.docs.example.com is outside the Tenant docs's allowances.hostnames [*.other.example.com]"))
	}, timeout, interval).Should(Succeed())
	g.Expect(apierrors.IsNotFound(k8s.Get(ctx, key(ns.Name, "viewer-ingressed"), &networkingv1.Ingress{}))).To(BeTrue())
}

// TestTheViewersPodsAreHeldToTheTenantsPriorityClasses: a MarkdownView's
// pod.priorityClassName is checked against the Tenant's
// allowances.priorityClasses when the view is made, and the pods the
// ReplicaSet controller makes from the viewer Deployment the manager
// writes are checked again when they are made (this test plays that
// controller, which envtest does not run): once the allowance narrows, the
// viewer's pods are refused, with the allowance's message. (Namespace
// labelled and annotated here as Trellis would for a Tenant.)
func TestTheViewersPodsAreHeldToTheTenantsPriorityClasses(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	for _, name := range []string{"docs-low", "docs-high"} {
		g.Expect(k8s.Create(ctx, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: 10})).To(Succeed())
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:        "mdv-tenant-prio",
		Labels:      map[string]string{"tenancy.trellis.dev/tenant": "prio"},
		Annotations: map[string]string{"tenancy.trellis.dev/allowed-priority-classes": "docs-low"},
	}}
	g.Expect(k8s.Create(ctx, ns)).To(Succeed())
	g.Expect(k8s.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "default"}})).To(Succeed())
	site := map[string]string{"a.md": "A"}

	high := newMarkdownView(ns.Name, "high", site)
	high.Spec.Pod.PriorityClassName = "docs-high"
	refusedWith(g, high, func() error { return k8s.Create(ctx, high.DeepCopy()) },
		"priority class docs-high is outside the Tenant prio's allowances.priorityClasses [docs-low]")

	low := newMarkdownView(ns.Name, "low", site)
	low.Spec.Pod.PriorityClassName = "docs-low"
	g.Expect(k8s.Create(ctx, low)).To(Succeed())
	viewerPod := func(g Gomega) *corev1.Pod {
		d := &appsv1.Deployment{}
		g.Expect(k8s.Get(ctx, key(ns.Name, "viewer-low"), d)).To(Succeed())
		g.Expect(d.Spec.Template.Spec.PriorityClassName).To(Equal("docs-low"))
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, GenerateName: "viewer-low-", Labels: d.Spec.Template.Labels},
			Spec:       d.Spec.Template.Spec,
		}
	}
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Create(ctx, viewerPod(g), client.DryRunAll)).To(Succeed())
	}, timeout, interval).Should(Succeed())

	g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(ns), ns)).To(Succeed())
	ns.Annotations["tenancy.trellis.dev/allowed-priority-classes"] = "docs-other"
	g.Expect(k8s.Update(ctx, ns)).To(Succeed())
	g.Eventually(func(g Gomega) {
		err := k8s.Create(ctx, viewerPod(g), client.DryRunAll)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("priority class docs-low is outside the Tenant prio's allowances.priorityClasses [docs-other]"))
	}, timeout, interval).Should(Succeed())
}
