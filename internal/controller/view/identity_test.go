package view

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// markdownViewOnly returns a client acting as user, bound in ns to the
// shipped markdownview-editor-role (trellis-markdownview-editor-role once
// installed) and to nothing else.
func markdownViewOnly(t *testing.T, user, ns string) client.Client {
	t.Helper()
	ctx := context.Background()
	if err := testenv.ApplyClusterRoles(ctx, k8s, "config/rbac/markdownview_editor_role.yaml"); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-markdownview-editor"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "markdownview-editor-role"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(adminCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	c, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// foreignServices are Services of another team in ns that select the pods
// of an app instance called web: by the instance label alone, and with the
// name and managed-by labels an older Trellis put on its viewer pods.
func foreignServices(g Gomega, ns string) []*corev1.Service {
	selectors := map[string]map[string]string{
		"web": {"app.kubernetes.io/instance": "web"},
		"web-viewer": {"app.kubernetes.io/instance": "web", "app.kubernetes.io/name": "markdown-viewer",
			"app.kubernetes.io/managed-by": "trellis"},
	}
	out := make([]*corev1.Service, 0, len(selectors))
	for name, selector := range selectors {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.ServiceSpec{Selector: selector,
				Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}
		g.Expect(k8s.Create(context.Background(), svc)).To(Succeed())
		out = append(out, svc)
	}
	return out
}

// viewerTemplate waits for the viewer Deployment of the view and returns it.
func viewerTemplate(g Gomega, ns, view string) *appsv1.Deployment {
	d := &appsv1.Deployment{}
	g.Eventually(func() error { return k8s.Get(context.Background(), key(ns, viewerPrefix+view), d) }, timeout, interval).Should(Succeed())
	return d
}

// expectSelectedOnlyByItsOwn checks, for the view's viewer pods as their
// template labels them (envtest runs no endpoint controller, so the labels
// are what an EndpointSlice would follow): none of the foreign Services
// selects them, no label value is the view's name, and the view's own
// Service selects them and no other view's of the namespace.
func expectSelectedOnlyByItsOwn(g Gomega, ns, view string, foreign []*corev1.Service, others ...string) {
	ctx := context.Background()
	d := viewerTemplate(g, ns, view)
	pods := labels.Set(d.Spec.Template.Labels)
	for _, svc := range foreign {
		g.Expect(labels.SelectorFromSet(svc.Spec.Selector).Matches(pods)).To(BeFalse(),
			"Service %s (selector %v) selects the viewer pods of %s (%v)", svc.Name, svc.Spec.Selector, view, pods)
	}
	for k, v := range pods {
		g.Expect(v).NotTo(Equal(view), "label %s is the view's name", k)
	}
	own := &corev1.Service{}
	g.Eventually(func() error { return k8s.Get(ctx, key(ns, viewerPrefix+view), own) }, timeout, interval).Should(Succeed())
	g.Expect(labels.SelectorFromSet(own.Spec.Selector).Matches(pods)).To(BeTrue(), "its own Service does not select its pods")
	mv := &viewv1.MarkdownView{}
	g.Expect(k8s.Get(ctx, key(ns, view), mv)).To(Succeed())
	g.Expect(own.Spec.Selector).To(Equal(map[string]string{viewUIDLabel: string(mv.UID)}))
	for _, other := range others {
		g.Expect(labels.SelectorFromSet(own.Spec.Selector).Matches(labels.Set(viewerTemplate(g, ns, other).Spec.Template.Labels))).
			To(BeFalse(), "the Service of %s selects the pods of %s", view, other)
	}
}

// TestAViewNamedAfterAForeignServiceGetsNoneOfItsClients (issue #34, item
// 3): a MarkdownView-only user (trellis-markdownview-editor-role alone,
// impersonated) names a view web in a namespace where another team's
// Service selects app.kubernetes.io/instance=web. Viewer pods labelled with
// the view's name would be that Service's endpoints, and its clients would
// get the attacker's pages. Here no foreign Service selects the viewer
// pods' template, and Trellis' own Service selects exactly its view's.
func TestAViewNamedAfterAForeignServiceGetsNoneOfItsClients(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	foreign := foreignServices(g, ns)
	mona := markdownViewOnly(t, "mona", ns)
	g.Eventually(func() error {
		return mona.Create(ctx, newMarkdownView(ns, "web", map[string]string{"index.md": "# Not the shop"}))
	}, timeout, interval).Should(Succeed())
	g.Expect(mona.Create(ctx, newMarkdownView(ns, "docs", map[string]string{"index.md": "# Docs"}))).To(Succeed())

	expectSelectedOnlyByItsOwn(g, ns, "web", foreign, "docs")
	expectSelectedOnlyByItsOwn(g, ns, "docs", foreign, "web")
}

// TestMarkdownViewRightsOperationByOperation: what a MarkdownView-only user
// (trellis-markdownview-editor-role alone, impersonated) can do to the
// labels of the viewer pods, operation by operation, with who refuses
// what they may not and what holds afterwards. The pods' labels come from
// the view's UID, fixed values and spec.pod.labels, which the
// markdownview-rights policy lets only someone who may create pods or
// Deployments ask for; the view's own metadata never reaches them (each
// metadata row edits the Markdown afterwards, so the manager has written
// the view since).
func TestMarkdownViewRightsOperationByOperation(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	foreign := foreignServices(g, ns)
	mona := markdownViewOnly(t, "mona", ns)
	site := map[string]string{"index.md": "# A"}
	for _, name := range []string{"web", "labels", "annotations", "owner", "finalizers", "pod-labels", "status", "deleted"} {
		g.Eventually(func() error { return mona.Create(ctx, newMarkdownView(ns, name, site)) }, timeout, interval).Should(Succeed())
	}
	for _, name := range []string{"labels", "annotations", "owner", "finalizers", "pod-labels", "status"} {
		viewerTemplate(g, ns, name)
	}
	t.Cleanup(func() {
		// The finalizer mona put on is hers to take off; the test takes it.
		editView(NewWithT(t), ns, "finalizers", func(mv *viewv1.MarkdownView) { mv.Finalizers = nil })
	})

	// update changes the view as mona, and then, as mona, its Markdown
	// (generation 2 or more), and waits for the manager to write it.
	update := func(name string, change func(*viewv1.MarkdownView)) error {
		mv := &viewv1.MarkdownView{}
		if err := mona.Get(ctx, key(ns, name), mv); err != nil {
			return err
		}
		change(mv)
		if err := mona.Update(ctx, mv); err != nil {
			return err
		}
		mv.Spec.Markdowns["index.md"] = "# A, edited"
		return mona.Update(ctx, mv)
	}
	// podsUnlike checks, once the manager wrote the edited Markdown, that the
	// view's pods carry none of unwanted and are selected by their own
	// Service alone.
	podsUnlike := func(name string, unwanted map[string]string) func(Gomega) {
		return func(g Gomega) {
			g.Eventually(func(g Gomega) {
				cm := &corev1.ConfigMap{}
				g.Expect(k8s.Get(ctx, key(ns, configMapPrefix+name), cm)).To(Succeed())
				g.Expect(cm.Data).To(HaveKeyWithValue("index.md", "# A, edited"))
			}, timeout, interval).Should(Succeed())
			template := viewerTemplate(g, ns, name).Spec.Template
			for k, v := range unwanted {
				g.Expect(template.Labels).NotTo(HaveKeyWithValue(k, v))
				g.Expect(template.Annotations).NotTo(HaveKeyWithValue(k, v))
			}
			expectSelectedOnlyByItsOwn(g, ns, name, foreign)
		}
	}
	web := map[string]string{"app.kubernetes.io/instance": "web", "app": "web"}
	const (
		admitted = iota
		byPolicy
		byRBAC
	)
	rows := []struct {
		operation string
		do        func() error
		verdict   int
		want      string
		after     func(Gomega)
	}{
		{"CREATE a view named after a foreign Service's instance selector", func() error {
			return nil // made above, as mona
		}, admitted, "", func(g Gomega) { expectSelectedOnlyByItsOwn(g, ns, "web", foreign) }},
		{"CREATE a view asking for pod labels a foreign Service selects", func() error {
			mv := newMarkdownView(ns, "asks-labels", site)
			mv.Spec.Pod.Labels = map[string]viewv1.LabelValue{"app": "web"}
			return mona.Create(ctx, mv)
		}, byPolicy, "spec.pod: you may not create deployments.apps (nor pods) in namespace " + ns, func(g Gomega) {
			g.Expect(apierrors.IsNotFound(k8s.Get(ctx, key(ns, "asks-labels"), &viewv1.MarkdownView{}))).To(BeTrue())
		}},
		{"CREATE a view with a UID of its author's choosing", func() error {
			mv := newMarkdownView(ns, "chosen-uid", site)
			mv.UID = "web"
			return mona.Create(ctx, mv)
		}, admitted, "", func(g Gomega) {
			mv := &viewv1.MarkdownView{}
			g.Expect(k8s.Get(ctx, key(ns, "chosen-uid"), mv)).To(Succeed())
			g.Expect(mv.UID).NotTo(Equal(types.UID("web")), "the API server gives the UID")
			g.Expect(viewerTemplate(g, ns, "chosen-uid").Spec.Template.Labels).To(HaveKeyWithValue(viewUIDLabel, string(mv.UID)))
		}},
		{"UPDATE metadata: the view's labels", func() error {
			return update("labels", func(mv *viewv1.MarkdownView) { mv.Labels = web })
		}, admitted, "", podsUnlike("labels", web)},
		{"UPDATE metadata: the view's annotations", func() error {
			return update("annotations", func(mv *viewv1.MarkdownView) { mv.Annotations = web })
		}, admitted, "", podsUnlike("annotations", web)},
		{"UPDATE metadata: the view's ownerReferences, to the foreign Service", func() error {
			return update("owner", func(mv *viewv1.MarkdownView) {
				mv.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Service", Name: foreign[0].Name, UID: foreign[0].UID}}
			})
		}, admitted, "", podsUnlike("owner", web)},
		{"UPDATE metadata: the view's finalizers", func() error {
			return update("finalizers", func(mv *viewv1.MarkdownView) { mv.Finalizers = []string{"example.com/hold"} })
		}, admitted, "", podsUnlike("finalizers", web)},
		{"UPDATE spec.pod.labels to what a foreign Service selects", func() error {
			return update("pod-labels", func(mv *viewv1.MarkdownView) { mv.Spec.Pod.Labels = map[string]viewv1.LabelValue{"app": "web"} })
		}, byPolicy, "spec.pod: you may not create deployments.apps (nor pods) in namespace " + ns, func(g Gomega) {
			g.Expect(viewerTemplate(g, ns, "pod-labels").Spec.Template.Labels).NotTo(HaveKey("app"))
		}},
		{"DELETE a view", func() error {
			return mona.Delete(ctx, &viewv1.MarkdownView{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "deleted"}})
		}, admitted, "", func(g Gomega) {
			// Its children go with it by their owner references (the
			// garbage collector, which envtest does not run).
			g.Expect(apierrors.IsNotFound(k8s.Get(ctx, key(ns, "deleted"), &viewv1.MarkdownView{}))).To(BeTrue())
		}},
		{"markdownviews/status: write a status (the role grants get only)", func() error {
			mv := &viewv1.MarkdownView{}
			if err := mona.Get(ctx, key(ns, "status"), mv); err != nil {
				return err
			}
			mv.Status.URL = "http://web." + ns + ".svc"
			return mona.Status().Update(ctx, mv)
		}, byRBAC, `cannot update resource "markdownviews/status"`, func(g Gomega) {
			mv := &viewv1.MarkdownView{}
			g.Expect(k8s.Get(ctx, key(ns, "status"), mv)).To(Succeed())
			g.Expect(mv.Status.URL).NotTo(HavePrefix("http://web."))
		}},
	}
	for _, row := range rows {
		t.Run(row.operation, func(t *testing.T) {
			g := NewWithT(t)
			err := row.do()
			switch row.verdict {
			case admitted:
				g.Expect(err).NotTo(HaveOccurred())
			case byPolicy:
				g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
				g.Expect(err.Error()).To(ContainSubstring("ValidatingAdmissionPolicy 'markdownview-rights'"))
				g.Expect(err.Error()).To(ContainSubstring(row.want))
			case byRBAC:
				g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
				g.Expect(err.Error()).To(ContainSubstring(`User "mona" ` + row.want))
			}
			row.after(g)
		})
	}
}
