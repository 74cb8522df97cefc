package view

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
)

// These tests exercise the builders of pod settings, Ingress and HTTPRoute
// alone; they make no API calls.

func TestDesiredDeploymentDefaultResourcesAreBurstable(t *testing.T) {
	g := NewWithT(t)
	d := asTyped[appsv1.Deployment](g, deploymentOf(g, desiredTestView(1, "")))
	c := d.Spec.Template.Spec.Containers[0]
	g.Expect(c.Resources.Requests.Cpu().String()).To(Equal("10m"))
	g.Expect(c.Resources.Requests.Memory().String()).To(Equal("64Mi"))
	g.Expect(c.Resources.Limits.Memory().String()).To(Equal("128Mi"))
	g.Expect(c.Resources.Limits).NotTo(HaveKey(corev1.ResourceCPU), "a CPU limit throttles rendering for nothing")
	// Nothing else is set on the pod when spec.pod is empty.
	pod := d.Spec.Template.Spec
	g.Expect(pod.NodeSelector).To(BeEmpty())
	g.Expect(pod.Tolerations).To(BeEmpty())
	g.Expect(pod.Affinity).To(BeNil())
	g.Expect(pod.TopologySpreadConstraints).To(BeEmpty())
	g.Expect(pod.PriorityClassName).To(BeEmpty())
	g.Expect(d.Spec.Template.Annotations).To(BeEmpty())
}

func TestDesiredDeploymentPodSettings(t *testing.T) {
	g := NewWithT(t)
	mv := desiredTestView(2, "")
	zoneSpread := corev1.TopologySpreadConstraint{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway}
	ownSelector := corev1.TopologySpreadConstraint{MaxSkew: 2, TopologyKey: "kubernetes.io/hostname", WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "docs"}}}
	affinity := &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 50, PodAffinityTerm: corev1.PodAffinityTerm{
			TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: selectorLabels(mv)}}}},
	}}
	mv.Spec.Pod = viewv1.ViewerPod{
		Resources: &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("100Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("200Mi"), corev1.ResourceCPU: resource.MustParse("1")},
		},
		NodeSelector:              map[string]viewv1.LabelValue{"kubernetes.io/os": "linux"},
		Tolerations:               []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "docs", Effect: corev1.TaintEffectNoSchedule}},
		Affinity:                  affinity,
		TopologySpreadConstraints: []corev1.TopologySpreadConstraint{zoneSpread, ownSelector},
		PriorityClassName:         "docs-low",
		Annotations:               map[string]viewv1.AnnotationValue{"prometheus.io/scrape": "false"},
		Labels:                    map[string]viewv1.LabelValue{"team": "a"},
	}

	d := asTyped[appsv1.Deployment](g, deploymentOf(g, mv))

	pod := d.Spec.Template.Spec
	g.Expect(pod.Containers[0].Resources).To(Equal(*mv.Spec.Pod.Resources), "resources replace the defaults as a whole")
	g.Expect(pod.NodeSelector).To(Equal(map[string]string{"kubernetes.io/os": "linux"}))
	g.Expect(pod.Tolerations).To(Equal(mv.Spec.Pod.Tolerations))
	g.Expect(pod.Affinity).To(Equal(affinity))
	g.Expect(pod.PriorityClassName).To(Equal("docs-low"))
	// A spread without a selector spreads this view's pods; one with its own keeps it.
	zoneSpread.LabelSelector = &metav1.LabelSelector{MatchLabels: selectorLabels(mv)}
	g.Expect(pod.TopologySpreadConstraints).To(Equal([]corev1.TopologySpreadConstraint{zoneSpread, ownSelector}))
	g.Expect(mv.Spec.Pod.TopologySpreadConstraints[0].LabelSelector).To(BeNil(), "the spec is not changed")
	g.Expect(d.Spec.Template.Annotations).To(Equal(map[string]string{"prometheus.io/scrape": "false"}))
	g.Expect(d.Spec.Template.Labels).To(HaveKeyWithValue("team", "a"))
	for k, v := range selectorLabels(mv) {
		g.Expect(d.Spec.Template.Labels).To(HaveKeyWithValue(k, v))
	}
	// The Deployment's own labels and selector are not the user's.
	g.Expect(d.Labels).To(Equal(childLabels(mv)))
	g.Expect(d.Spec.Selector.MatchLabels).To(Equal(selectorLabels(mv)))
}

func TestPodLabelsNeverReplaceOurs(t *testing.T) {
	g := NewWithT(t)
	mv := desiredTestView(1, "")
	// Admission refuses these keys; the builder does not trust it alone.
	mv.Spec.Pod.Labels = map[string]viewv1.LabelValue{
		"app.kubernetes.io/instance": "other", "app.kubernetes.io/managed-by": "me", viewUIDLabel: "forged",
		"view.trellis.dev/other": "x", "kubernetes.io/x": "y", "node.k8s.io/x": "y", "team": "a",
	}
	g.Expect(podLabels(mv)).To(Equal(map[string]string{
		viewUIDLabel:                   "0b5e7c6a-uid",
		"app.kubernetes.io/name":       "markdown-viewer",
		"app.kubernetes.io/part-of":    "trellis",
		"app.kubernetes.io/component":  "viewer",
		"app.kubernetes.io/managed-by": "trellis",
		"team":                         "a",
	}))
}

// TestViewerPodLabelsDoNotFollowTheViewsName: the viewer pods' labels are
// the view's UID, labels of fixed value and the user's spec.pod.labels
// (which need the right to create pods), and nothing else: two views that
// differ only in name and namespace give their pods the same labels, so no
// author picks by a view's name which Services select its pods. The
// Deployment's and the Service's selectors are the UID, which selects the
// view's pods and no other view's.
func TestViewerPodLabelsDoNotFollowTheViewsName(t *testing.T) {
	g := NewWithT(t)
	web := desiredTestView(1, "")
	web.Name, web.Namespace = "web", "shop"
	docs := desiredTestView(1, "")
	g.Expect(podLabels(web)).To(Equal(podLabels(docs)), "labels that follow the name or namespace")
	for _, v := range podLabels(web) {
		g.Expect(v).NotTo(Equal("web"))
	}

	other := desiredTestView(1, "")
	other.UID = "another-uid"
	for _, mv := range []*viewv1.MarkdownView{web, other} {
		d := asTyped[appsv1.Deployment](g, deploymentOf(g, mv))
		svc := asTyped[corev1.Service](g, desiredService(mv))
		g.Expect(d.Spec.Selector).To(Equal(&metav1.LabelSelector{MatchLabels: map[string]string{viewUIDLabel: string(mv.UID)}}))
		g.Expect(svc.Spec.Selector).To(Equal(map[string]string{viewUIDLabel: string(mv.UID)}))
		g.Expect(labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels))).To(BeTrue())
	}
	g.Expect(labels.SelectorFromSet(desiredService(other).Spec.Selector).Matches(labels.Set(podLabels(web)))).To(BeFalse())

	// A view without a UID (not from the API server) gets no viewer.
	web.UID = ""
	_, err := desiredDeployment(web, "viewer:1")
	g.Expect(err).To(MatchError(errNoUID))
}

func TestDesiredIngress(t *testing.T) {
	g := NewWithT(t)
	mv := desiredTestView(1, "")
	mv.Spec.Expose.Ingress = viewv1.IngressExpose{Host: "docs.example.com"}

	in := asTyped[networkingv1.Ingress](g, desiredIngress(mv))

	g.Expect(in.APIVersion).To(Equal("networking.k8s.io/v1"))
	g.Expect(in.Kind).To(Equal("Ingress"))
	g.Expect(in.Name).To(Equal("viewer-docs"))
	g.Expect(in.Namespace).To(Equal("team-a"))
	g.Expect(in.Labels).To(Equal(childLabels(mv)))
	expectControllerOwnerRef(g, in.OwnerReferences, mv)
	g.Expect(in.Spec.IngressClassName).To(BeNil(), "unset: the cluster's default class")
	g.Expect(in.Spec.TLS).To(BeEmpty())
	g.Expect(in.Spec.Rules).To(Equal([]networkingv1.IngressRule{{
		Host: "docs.example.com",
		IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{
			Path: "/", PathType: ptr.To(networkingv1.PathTypePrefix),
			Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
				Name: "viewer-docs", Port: networkingv1.ServiceBackendPort{Name: "http"}}},
		}}}},
	}}), "every path of the host (pages, /search, images) goes to the viewer Service's http port")
	g.Expect(desiredService(mv).Spec.Ports[0].Name).To(HaveValue(Equal("http")))
	g.Expect(siteURL(mv)).To(Equal("http://docs.example.com"))

	mv.Spec.Expose.Ingress.IngressClassName = "nginx"
	mv.Spec.Expose.Ingress.TLSSecretName = "docs-tls"
	in = asTyped[networkingv1.Ingress](g, desiredIngress(mv))
	g.Expect(in.Spec.IngressClassName).To(HaveValue(Equal("nginx")))
	g.Expect(in.Spec.TLS).To(Equal([]networkingv1.IngressTLS{{Hosts: []string{"docs.example.com"}, SecretName: "docs-tls"}}))
	g.Expect(siteURL(mv)).To(Equal("https://docs.example.com"))
}

func TestDesiredHTTPRoute(t *testing.T) {
	g := NewWithT(t)
	mv := desiredTestView(1, "")
	mv.Spec.Expose.HTTPRoute = viewv1.HTTPRouteExpose{
		ParentRefs: []viewv1.ParentReference{
			{Name: "public"},
			{Group: "gateway.networking.k8s.io", Kind: "Gateway", Namespace: "infra", Name: "shared", SectionName: "https", Port: 443},
		},
		Hostnames: []viewv1.Hostname{"docs.example.com", "handbook.example.com"},
	}

	r := asTyped[gatewayv1.HTTPRoute](g, desiredHTTPRoute(mv))

	g.Expect(r.APIVersion).To(Equal("gateway.networking.k8s.io/v1"))
	g.Expect(r.Kind).To(Equal("HTTPRoute"))
	g.Expect(r.Name).To(Equal("viewer-docs"))
	g.Expect(r.Labels).To(Equal(childLabels(mv)))
	expectControllerOwnerRef(g, r.OwnerReferences, mv)
	group, kind := gatewayv1.Group("gateway.networking.k8s.io"), gatewayv1.Kind("Gateway")
	g.Expect(r.Spec.ParentRefs).To(Equal([]gatewayv1.ParentReference{
		{Group: &group, Kind: &kind, Name: "public"},
		{Group: &group, Kind: &kind, Namespace: ptr.To(gatewayv1.Namespace("infra")), Name: "shared",
			SectionName: ptr.To(gatewayv1.SectionName("https")), Port: ptr.To(gatewayv1.PortNumber(443))},
	}))
	g.Expect(r.Spec.Hostnames).To(Equal([]gatewayv1.Hostname{"docs.example.com", "handbook.example.com"}))
	g.Expect(r.Spec.Rules).To(HaveLen(1))
	rule := r.Spec.Rules[0]
	g.Expect(rule.Matches).To(Equal([]gatewayv1.HTTPRouteMatch{{Path: &gatewayv1.HTTPPathMatch{
		Type: ptr.To(gatewayv1.PathMatchPathPrefix), Value: ptr.To("/")}}}))
	g.Expect(rule.BackendRefs).To(HaveLen(1))
	backend := rule.BackendRefs[0].BackendRef
	g.Expect(backend.Name).To(BeEquivalentTo("viewer-docs"))
	g.Expect(backend.Port).To(HaveValue(BeEquivalentTo(80)))
	g.Expect(backend.Kind).To(HaveValue(BeEquivalentTo("Service")))
	g.Expect(backend.Group).To(HaveValue(BeEquivalentTo("")))
	g.Expect(backend.Weight).To(HaveValue(BeEquivalentTo(1)))

	g.Expect(siteURL(mv)).To(Equal("https://docs.example.com"), "https unless the spec says the listener is plain HTTP")
	mv.Spec.Expose.HTTPRoute.Scheme = "http"
	g.Expect(siteURL(mv)).To(Equal("http://docs.example.com"))
}

func TestRouteRefusal(t *testing.T) {
	accepted := func(status metav1.ConditionStatus, gen int64) gatewayv1.RouteParentStatus {
		return gatewayv1.RouteParentStatus{
			ParentRef:      gatewayv1.ParentReference{Name: "public", Namespace: ptr.To(gatewayv1.Namespace("infra"))},
			ControllerName: "example.com/gateway",
			Conditions: []metav1.Condition{{Type: "Accepted", Status: status, ObservedGeneration: gen,
				Reason: "NotAllowedByListeners", Message: "namespace team-a is not allowed"}},
		}
	}
	cases := map[string]struct {
		parents []gatewayv1.RouteParentStatus
		want    string
	}{
		"no Gateway has looked yet":          {},
		"accepted":                           {parents: []gatewayv1.RouteParentStatus{accepted(metav1.ConditionTrue, 3)}},
		"refused, about an older generation": {parents: []gatewayv1.RouteParentStatus{accepted(metav1.ConditionFalse, 2)}},
		"refused": {parents: []gatewayv1.RouteParentStatus{accepted(metav1.ConditionTrue, 3), accepted(metav1.ConditionFalse, 3)},
			want: "Gateway infra/public does not accept HTTPRoute viewer-docs (NotAllowedByListeners): namespace team-a is not allowed"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: "viewer-docs", Namespace: "team-a", Generation: 3}}
			r.Status.Parents = tc.parents
			g.Expect(routeRefusal(r)).To(Equal(tc.want))
		})
	}
}
