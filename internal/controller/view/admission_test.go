package view

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
)

// TestAdmissionRejectsBadAssetsPodSettingsAndExpose: the CRD refuses
// hostile or mistaken input to the fields of assets, pod settings and
// exposure, each with a message that says what is wrong.
func TestAdmissionRejectsBadAssetsPodSettingsAndExpose(t *testing.T) {
	ns := newNamespace(t)
	png := []byte("\x89PNG\r\n\x1a\nrest")
	route := func(mutate func(*viewv1.HTTPRouteExpose)) func(*viewv1.MarkdownView) {
		return func(mv *viewv1.MarkdownView) {
			r := viewv1.HTTPRouteExpose{ParentRefs: []viewv1.ParentReference{{Name: "public"}}, Hostnames: []viewv1.Hostname{"docs.example.com"}}
			mutate(&r)
			mv.Spec.Expose.HTTPRoute = r
		}
	}
	ingress := func(in viewv1.IngressExpose) func(*viewv1.MarkdownView) {
		return func(mv *viewv1.MarkdownView) { mv.Spec.Expose.Ingress = in }
	}
	labels := func(k, v string) func(*viewv1.MarkdownView) {
		return func(mv *viewv1.MarkdownView) {
			mv.Spec.Pod.Labels = map[string]viewv1.LabelValue{k: viewv1.LabelValue(v)}
		}
	}
	annotations := func(k, v string) func(*viewv1.MarkdownView) {
		return func(mv *viewv1.MarkdownView) {
			mv.Spec.Pod.Annotations = map[string]viewv1.AnnotationValue{k: viewv1.AnnotationValue(v)}
		}
	}
	assetsNamed := func(name string) func(*viewv1.MarkdownView) {
		return func(mv *viewv1.MarkdownView) { mv.Spec.Assets = map[string][]byte{name: png} }
	}
	const badAssetName = "asset names must be valid ConfigMap keys"
	cases := map[string]struct {
		mutate func(*viewv1.MarkdownView)
		want   string
	}{
		// assets
		"asset that is not an image":     {assetsNamed("run.sh"), badAssetName},
		"asset named like a page":        {assetsNamed("page.md"), badAssetName},
		"hidden asset":                   {assetsNamed(".png"), badAssetName},
		"hidden asset with a name":       {assetsNamed(".logo.png"), badAssetName},
		"asset in a directory":           {assetsNamed("img/logo.png"), badAssetName},
		"asset path traversal":           {assetsNamed("../logo.png"), badAssetName},
		"asset with a space":             {assetsNamed("my logo.png"), badAssetName},
		"asset with a double extension":  {assetsNamed("logo.png.html"), badAssetName},
		"asset name too long":            {assetsNamed(strings.Repeat("a", 250) + ".png"), badAssetName},
		"empty asset (not valid base64)": {func(mv *viewv1.MarkdownView) { mv.Spec.Assets = map[string][]byte{"a.png": {}} }, "spec.assets.a.png"},
		"too many assets (a huge map)": {func(mv *viewv1.MarkdownView) {
			mv.Spec.Assets = map[string][]byte{}
			for i := range 65 {
				mv.Spec.Assets[fmt.Sprintf("i%d.png", i)] = png
			}
		}, "must have at most 64 items"},
		// pod settings
		"selector label":              {labels("view.trellis.dev/markdownview-uid", "other"), "label keys under kubernetes.io, k8s.io and trellis.dev"},
		"an instance label":           {labels("app.kubernetes.io/instance", "other"), "are reserved"},
		"any app.kubernetes.io label": {labels("app.kubernetes.io/version", "1"), "are reserved"},
		"kubernetes.io label":         {labels("kubernetes.io/hostname", "x"), "are reserved"},
		"a k8s.io subdomain label":    {labels("node.k8s.io/x", "y"), "are reserved"},
		"a trellis.dev label":         {labels("view.trellis.dev/x", "y"), "are reserved"},
		"a label key that is not one": {labels("bad key", "x"), "labels must have label keys"},
		"a label value too long":      {labels("team", strings.Repeat("v", 64)), "spec.pod.labels.team: Too long"},
		"a label value with a space":  {labels("team", "a b"), "labels must have label keys"},
		"too many labels (a huge map)": {func(mv *viewv1.MarkdownView) {
			mv.Spec.Pod.Labels = map[string]viewv1.LabelValue{}
			for i := range 17 {
				mv.Spec.Pod.Labels[fmt.Sprintf("l%d", i)] = "x"
			}
		}, "must have at most 16 items"},
		"reserved annotation":          {annotations("kubectl.kubernetes.io/default-container", "x"), "annotation keys under kubernetes.io, k8s.io and trellis.dev"},
		"an AppArmor annotation":       {annotations("container.apparmor.security.beta.kubernetes.io/viewer", "unconfined"), "are reserved"},
		"an annotation key not a name": {annotations("a/b/c", "x"), "annotation keys must be qualified names"},
		"an annotation value too long": {annotations("example.com/x", strings.Repeat("v", 1025)), "Too long"},
		"a node selector key not a label": {func(mv *viewv1.MarkdownView) {
			mv.Spec.Pod.NodeSelector = map[string]viewv1.LabelValue{"-x": "y"}
		}, "nodeSelector keys must be label keys"},
		"too many tolerations": {func(mv *viewv1.MarkdownView) {
			mv.Spec.Pod.Tolerations = make([]corev1.Toleration, 17)
		}, "must have at most 16 items"},
		"too many spread constraints": {func(mv *viewv1.MarkdownView) {
			for range 9 {
				mv.Spec.Pod.TopologySpreadConstraints = append(mv.Spec.Pod.TopologySpreadConstraints,
					corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: "zone", WhenUnsatisfiable: corev1.ScheduleAnyway})
			}
		}, "must have at most 8 items"},
		"a priority class name that is not a name": {func(mv *viewv1.MarkdownView) { mv.Spec.Pod.PriorityClassName = "High Priority" }, "priorityClassName must be a DNS subdomain name"},
		"resource claims": {func(mv *viewv1.MarkdownView) {
			mv.Spec.Pod.Resources = &corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}
		}, "resources.claims is not supported"},
		// exposure
		"ingress and route at once": {func(mv *viewv1.MarkdownView) {
			ingress(viewv1.IngressExpose{Host: "docs.example.com"})(mv)
			route(func(*viewv1.HTTPRouteExpose) {})(mv)
		}, "expose takes exactly one of ingress and httpRoute"},
		"an ingress without a host":     {ingress(viewv1.IngressExpose{IngressClassName: "nginx"}), "spec.expose.ingress.host: Required value"},
		"a wildcard host":               {ingress(viewv1.IngressExpose{Host: "*.example.com"}), "a host name must be a DNS name in lower case"},
		"an IP address for a host":      {ingress(viewv1.IngressExpose{Host: "10.0.0.1"}), "no IP address"},
		"a host in upper case":          {ingress(viewv1.IngressExpose{Host: "Docs.Example.com"}), "a host name must be a DNS name"},
		"a host with a port":            {ingress(viewv1.IngressExpose{Host: "docs.example.com:443"}), "a host name must be a DNS name"},
		"a host with a path":            {ingress(viewv1.IngressExpose{Host: "docs.example.com/x"}), "a host name must be a DNS name"},
		"a host label over 63":          {ingress(viewv1.IngressExpose{Host: viewv1.Hostname(strings.Repeat("a", 64) + ".example.com")}), "a host name must be a DNS name"},
		"a host too long":               {ingress(viewv1.IngressExpose{Host: viewv1.Hostname(strings.Repeat("abcdefgh.", 30) + "com")}), "Too long"},
		"a TLS secret name not a name":  {ingress(viewv1.IngressExpose{Host: "docs.example.com", TLSSecretName: "My_Secret"}), "tlsSecretName must be a DNS subdomain name"},
		"an ingress class not a name":   {ingress(viewv1.IngressExpose{Host: "docs.example.com", IngressClassName: "a b"}), "ingressClassName must be a DNS subdomain name"},
		"a route without parents":       {route(func(r *viewv1.HTTPRouteExpose) { r.ParentRefs = nil }), "spec.expose.httpRoute.parentRefs: Required value"},
		"a route without hostnames":     {route(func(r *viewv1.HTTPRouteExpose) { r.Hostnames = nil }), "spec.expose.httpRoute.hostnames: Required value"},
		"a wildcard route hostname":     {route(func(r *viewv1.HTTPRouteExpose) { r.Hostnames = []viewv1.Hostname{"*.example.com"} }), "a host name must be a DNS name"},
		"a route parent without a name": {route(func(r *viewv1.HTTPRouteExpose) { r.ParentRefs = []viewv1.ParentReference{{Namespace: "infra"}} }), "Required value"},
		"a route parent kind not a kind": {route(func(r *viewv1.HTTPRouteExpose) {
			r.ParentRefs = []viewv1.ParentReference{{Name: "gw", Kind: "gate way"}}
		}), "kind must be a Kubernetes kind"},
		"a route parent port out of range": {route(func(r *viewv1.HTTPRouteExpose) {
			r.ParentRefs = []viewv1.ParentReference{{Name: "gw", Port: 70000}}
		}), "should be less than or equal to 65535"},
		"a route scheme that is not http(s)": {route(func(r *viewv1.HTTPRouteExpose) { r.Scheme = "ftp" }), `supported values: "http", "https"`},
		"too many hostnames (a huge list)": {route(func(r *viewv1.HTTPRouteExpose) {
			for i := range 17 {
				r.Hostnames = append(r.Hostnames, viewv1.Hostname(fmt.Sprintf("h%d.example.com", i)))
			}
		}), "must have at most 16 items"},
		"duplicate hostnames": {route(func(r *viewv1.HTTPRouteExpose) {
			r.Hostnames = []viewv1.Hostname{"a.example.com", "a.example.com"}
		}), "Duplicate value"},
		"too many parents": {route(func(r *viewv1.HTTPRouteExpose) {
			for i := range 9 {
				r.ParentRefs = append(r.ParentRefs, viewv1.ParentReference{Name: fmt.Sprintf("gw%d", i)})
			}
		}), "must have at most 8 items"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			mv := newMarkdownView(ns, "valid", map[string]string{"a.md": "A"})
			tc.mutate(mv)
			err := k8s.Create(context.Background(), mv)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
		})
	}

	t.Run("empty objects are refused, not ignored", func(t *testing.T) {
		for field, body := range map[string]map[string]any{
			"spec.pod":    {"pod": map[string]any{}},
			"spec.expose": {"expose": map[string]any{}},
		} {
			g := NewWithT(t)
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "view.trellis.dev/v1", "kind": "MarkdownView",
				"metadata": map[string]any{"name": "empty", "namespace": ns},
				"spec":     map[string]any{"markdowns": map[string]any{"a.md": "A"}},
			}}
			for k, v := range body {
				u.Object["spec"].(map[string]any)[k] = v
			}
			err := k8s.Create(context.Background(), u)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: got %v", field, err)
			g.Expect(err.Error()).To(ContainSubstring(field + ": Invalid value"))
		}
	})

	t.Run("a complete valid spec is accepted", func(t *testing.T) {
		g := NewWithT(t)
		mv := newMarkdownView(ns, "complete", map[string]string{"a.md": "A"})
		mv.Spec.Assets = map[string][]byte{"logo.PNG": png, "photo.jpeg": {0xFF, 0xD8, 0xFF, 0}, "chart.svg": []byte(testSVG),
			"a-b_c.1.webp": []byte("RIFF....WEBP"), "x.gif": []byte("GIF89a"), "y.avif": {0, 0, 0, 16}}
		mv.Spec.Pod = viewv1.ViewerPod{
			Resources:         &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")}},
			NodeSelector:      map[string]viewv1.LabelValue{"kubernetes.io/os": "linux", "node-role": ""},
			Tolerations:       []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}},
			PriorityClassName: "docs",
			Annotations:       map[string]viewv1.AnnotationValue{"example.com/owner": "docs", "prometheus.io/scrape": "false"},
			Labels:            map[string]viewv1.LabelValue{"team": "docs", "example.com/cost-center": "c-1"},
		}
		mv.Spec.Expose.HTTPRoute = viewv1.HTTPRouteExpose{
			ParentRefs: []viewv1.ParentReference{{Name: "public", Namespace: "infra", SectionName: "https", Port: 443}},
			Hostnames:  []viewv1.Hostname{"docs.example.com", "xn--dcs-qla.example.com"},
		}
		g.Expect(k8s.Create(context.Background(), mv)).To(Succeed())
		// Defaults are filled in.
		got := &viewv1.MarkdownView{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(mv), got)).To(Succeed())
		g.Expect(got.Spec.Expose.HTTPRoute.Scheme).To(Equal("https"))
		g.Expect(got.Spec.Expose.HTTPRoute.ParentRefs[0].Group).To(Equal("gateway.networking.k8s.io"))
		g.Expect(got.Spec.Expose.HTTPRoute.ParentRefs[0].Kind).To(Equal("Gateway"))
		g.Expect(got.Spec.Assets).To(Equal(mv.Spec.Assets))
	})
}
