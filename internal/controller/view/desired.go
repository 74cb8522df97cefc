package view

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/controller/children"
	"github.com/trellis-dev/trellis/internal/controller/setup"
)

// Names and ports of the children; docs/markdownview.md describes them.
const (
	configMapPrefix = "markdowns-"
	viewerPrefix    = "viewer-"
	viewerPort      = 8080
	portName        = "http" // the viewer container's port and the Service's
	servicePort     = 80
	markdownDir     = "/markdown"
	viewerUID       = 65532 // the distroless "nonroot" user
)

// defaultResources make the viewer a Burstable pod: it idles at about 40 MiB
// and peaks at 60–80 MiB while it renders and indexes a 1 MiB site
// (docs/performance.md), so 128Mi leaves room; CPU is not limited.
var defaultResources = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
	Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
}

func configMapName(mv *viewv1.MarkdownView) string { return configMapPrefix + mv.Name }
func viewerName(mv *viewv1.MarkdownView) string    { return viewerPrefix + mv.Name }

// siteURL is where the rendered site is served: the external URL when the
// spec exposes it, else the Service's address inside the cluster.
func siteURL(mv *viewv1.MarkdownView) string {
	const plain, secure = "http://", "https://"
	switch e := mv.Spec.Expose; {
	case e.Ingress.Host != "" && e.Ingress.TLSSecretName != "":
		return secure + string(e.Ingress.Host)
	case e.Ingress.Host != "":
		return plain + string(e.Ingress.Host)
	case len(e.HTTPRoute.Hostnames) > 0 && e.HTTPRoute.Scheme == "https", len(e.HTTPRoute.Hostnames) > 0 && e.HTTPRoute.Scheme == "":
		return secure + string(e.HTTPRoute.Hostnames[0]) // https is the CRD's default
	case len(e.HTTPRoute.Hostnames) > 0:
		return plain + string(e.HTTPRoute.Hostnames[0])
	}
	return plain + viewerName(mv) + "." + mv.Namespace + ".svc"
}

// viewUIDLabel holds a MarkdownView's UID on its viewer pods, and is the
// one label that selects them (the Deployment's and the Service's
// selector). Identity is a UID: a label whose value the view's author
// chooses, such as its name, would let them pick which Services of others
// select their pods (a view named web behind someone's Service that selects
// app.kubernetes.io/instance=web). Admission keeps users' own pod labels
// off trellis.dev keys.
const viewUIDLabel = "view.trellis.dev/markdownview-uid"

// errNoUID refuses to build the viewer of a view that has no UID yet: its
// selector would pick the pods of every other view without one.
var errNoUID = errors.New("the MarkdownView has no UID: its viewer pods would have nothing to be told apart by")

// selectorLabels pick a MarkdownView's viewer pods; they are immutable on
// the Deployment.
func selectorLabels(mv *viewv1.MarkdownView) map[string]string {
	return map[string]string{viewUIDLabel: string(mv.UID)}
}

// childLabels go on every child object (not on the viewer pods, whose labels
// are podLabels); managed-by also scopes the manager's cache.
func childLabels(mv *viewv1.MarkdownView) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":      "markdown-viewer",
		"app.kubernetes.io/instance":  mv.Name,
		"app.kubernetes.io/part-of":   "trellis",
		"app.kubernetes.io/component": "viewer",
		setup.ManagedByLabel:          setup.ManagedByValue,
	}
}

// podLabels go on the viewer pods: the selector's, labels of fixed value, and
// the user's own, which admission lets only someone who may create pods ask
// for. No other value is the view's name, or anything else its author
// chooses. User keys under the reserved prefixes, which admission refuses,
// are left out here too: they are where Kubernetes' conventions and
// Trellis' selector live.
func podLabels(mv *viewv1.MarkdownView) map[string]string {
	l := selectorLabels(mv)
	l["app.kubernetes.io/name"] = "markdown-viewer"
	l["app.kubernetes.io/part-of"] = "trellis"
	l["app.kubernetes.io/component"] = "viewer"
	l[setup.ManagedByLabel] = setup.ManagedByValue
	for k, v := range mv.Spec.Pod.Labels {
		if _, ours := l[k]; !ours && !reservedKey(k) {
			l[k] = string(v)
		}
	}
	return l
}

// reservedKey reports whether a label key's prefix is kubernetes.io, k8s.io
// or trellis.dev, or a subdomain of one: the CRD's rule for spec.pod.labels.
func reservedKey(key string) bool {
	prefix, _, found := strings.Cut(key, "/")
	if !found {
		return false
	}
	for _, domain := range []string{"kubernetes.io", "k8s.io", "trellis.dev"} {
		if prefix == domain || strings.HasSuffix(prefix, "."+domain) {
			return true
		}
	}
	return false
}

// stringMap turns a map of a string type into a map[string]string.
func stringMap[V ~string](m map[string]V) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = string(v)
	}
	return out
}

func ownerReference(mv *viewv1.MarkdownView) *metav1ac.OwnerReferenceApplyConfiguration {
	return children.OwnerReference(mv, viewv1.GroupVersion.WithKind("MarkdownView"))
}

// desiredConfigMap is the ConfigMap Trellis creates for mv, holding data and
// binaryData (mv's files) whose content hash is hash; the owner reference is
// the caller's to set.
func desiredConfigMap(mv *viewv1.MarkdownView, data map[string]string, binaryData map[string][]byte, hash string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: configMapName(mv), Namespace: mv.Namespace, Labels: childLabels(mv),
			Annotations: map[string]string{contentHashAnnotation: hash}},
		Data: data, BinaryData: binaryData,
	}
}

// artifactTmpSize bounds the viewer's /tmp, where an artifact is
// downloaded (at most maxArtifactBytes) before it is checked.
const artifactTmpSize = "64Mi"

// desiredDeployment is the viewer Deployment as Trellis applies it.
func desiredDeployment(mv *viewv1.MarkdownView, image string) (*appsv1ac.DeploymentApplyConfiguration, error) {
	if mv.UID == "" {
		return nil, errNoUID
	}
	replicas := mv.Spec.Replicas
	if replicas == 0 {
		replicas = 1 // the CRD defaults it; a view built in Go (the bench's floor, a test) may lack it
	}
	if mv.Spec.ViewerImage != "" { // unset: the manager's --viewer-image
		image = mv.Spec.ViewerImage
	}
	pod := mv.Spec.Pod
	resources := defaultResources
	if pod.Resources != nil {
		resources = *pod.Resources
	}
	args := []string{"--dir=" + markdownDir, "--addr=:8080"}
	if mv.Spec.Source.Kind != "" {
		args = []string{"--artifact=" + markdownDir + "/" + artifactKey, "--addr=:8080"}
	}
	container := corev1ac.Container().
		WithName("viewer").
		WithImage(image).
		WithArgs(args...).
		WithPorts(corev1ac.ContainerPort().WithName(portName).WithContainerPort(viewerPort).WithProtocol(corev1.ProtocolTCP)).
		WithVolumeMounts(corev1ac.VolumeMount().WithName("markdowns").WithMountPath(markdownDir).WithReadOnly(true)).
		WithReadinessProbe(corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/healthz").WithPort(intstr.FromString(portName)))).
		WithLivenessProbe(corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/healthz").WithPort(intstr.FromString(portName)))).
		WithSecurityContext(corev1ac.SecurityContext().
			WithAllowPrivilegeEscalation(false).
			WithReadOnlyRootFilesystem(true).
			WithRunAsNonRoot(true).
			WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")))
	if mv.Spec.Source.Kind != "" {
		// The viewer downloads the artifact into /tmp before it checks the
		// digest and unpacks it; the root filesystem is read-only.
		container.WithVolumeMounts(corev1ac.VolumeMount().WithName("tmp").WithMountPath("/tmp"))
	}
	if len(resources.Requests) > 0 || len(resources.Limits) > 0 {
		// Copies: an apply configuration keeps the map it is given, and the
		// client decodes the API server's answer into it, which would write
		// into defaultResources (shared by every worker) or the cached view.
		rr := corev1ac.ResourceRequirements()
		if len(resources.Requests) > 0 {
			rr.WithRequests(resources.Requests.DeepCopy())
		}
		if len(resources.Limits) > 0 {
			rr.WithLimits(resources.Limits.DeepCopy())
		}
		container.WithResources(rr)
	}

	spec := corev1ac.PodSpec().
		WithAutomountServiceAccountToken(false).
		WithEnableServiceLinks(false).
		WithSecurityContext(corev1ac.PodSecurityContext().
			WithRunAsNonRoot(true).
			WithRunAsUser(viewerUID).
			WithRunAsGroup(viewerUID).
			WithSeccompProfile(corev1ac.SeccompProfile().WithType(corev1.SeccompProfileTypeRuntimeDefault))).
		WithContainers(container).
		WithVolumes(corev1ac.Volume().
			WithName("markdowns").
			WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(configMapName(mv))))
	if mv.Spec.Source.Kind != "" {
		spec.WithVolumes(corev1ac.Volume().WithName("tmp").
			WithEmptyDir(corev1ac.EmptyDirVolumeSource().WithSizeLimit(resource.MustParse(artifactTmpSize))))
	}
	if err := withScheduling(spec, mv); err != nil {
		return nil, err
	}

	template := corev1ac.PodTemplateSpec().WithLabels(podLabels(mv)).WithSpec(spec)
	if len(pod.Annotations) > 0 {
		template.WithAnnotations(stringMap(pod.Annotations))
	}
	return appsv1ac.Deployment(viewerName(mv), mv.Namespace).
		WithLabels(childLabels(mv)).
		WithOwnerReferences(ownerReference(mv)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(replicas).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(mv))).
			WithTemplate(template)), nil
}

// withScheduling puts spec.pod's scheduling settings on the pod spec. A
// topology spread constraint without a labelSelector gets the viewer pods'
// selector: without one it would count no pods and spread nothing.
func withScheduling(spec *corev1ac.PodSpecApplyConfiguration, mv *viewv1.MarkdownView) error {
	pod := mv.Spec.Pod
	if len(pod.NodeSelector) > 0 {
		spec.WithNodeSelector(stringMap(pod.NodeSelector))
	}
	if pod.PriorityClassName != "" {
		spec.WithPriorityClassName(pod.PriorityClassName)
	}
	for _, t := range pod.Tolerations {
		ac, err := viaJSON[corev1ac.TolerationApplyConfiguration](t)
		if err != nil {
			return err
		}
		spec.WithTolerations(ac)
	}
	if pod.Affinity != nil {
		ac, err := viaJSON[corev1ac.AffinityApplyConfiguration](pod.Affinity)
		if err != nil {
			return err
		}
		spec.WithAffinity(ac)
	}
	for _, c := range pod.TopologySpreadConstraints {
		if c.LabelSelector == nil {
			c.LabelSelector = &metav1.LabelSelector{MatchLabels: selectorLabels(mv)}
		}
		ac, err := viaJSON[corev1ac.TopologySpreadConstraintApplyConfiguration](c)
		if err != nil {
			return err
		}
		spec.WithTopologySpreadConstraints(ac)
	}
	return nil
}

// viaJSON turns an API value into another type of the same JSON form: a
// typed value into its apply configuration, or back. Going through JSON keeps
// unset fields unset, so the configuration extracted back from the live
// object compares equal.
func viaJSON[A any](v any) (*A, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding %T: %w", v, err)
	}
	out := new(A)
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("decoding %T: %w", out, err)
	}
	return out, nil
}

// desiredService exposes the viewer on port 80.
func desiredService(mv *viewv1.MarkdownView) *corev1ac.ServiceApplyConfiguration {
	return corev1ac.Service(viewerName(mv), mv.Namespace).
		WithLabels(childLabels(mv)).
		WithOwnerReferences(ownerReference(mv)).
		WithSpec(corev1ac.ServiceSpec().
			WithType(corev1.ServiceTypeClusterIP).
			WithSelector(selectorLabels(mv)).
			WithPorts(corev1ac.ServicePort().
				WithName(portName).
				WithProtocol(corev1.ProtocolTCP).
				WithPort(servicePort).
				WithTargetPort(intstr.FromString(portName))))
}

// desiredIngress sends every path of the host to the viewer Service.
func desiredIngress(mv *viewv1.MarkdownView) *networkingv1ac.IngressApplyConfiguration {
	in := mv.Spec.Expose.Ingress
	host := string(in.Host)
	spec := networkingv1ac.IngressSpec().
		WithRules(networkingv1ac.IngressRule().
			WithHost(host).
			WithHTTP(networkingv1ac.HTTPIngressRuleValue().
				WithPaths(networkingv1ac.HTTPIngressPath().
					WithPath("/").
					WithPathType(networkingv1.PathTypePrefix).
					WithBackend(networkingv1ac.IngressBackend().
						WithService(networkingv1ac.IngressServiceBackend().
							WithName(viewerName(mv)).
							WithPort(networkingv1ac.ServiceBackendPort().WithName(portName)))))))
	if in.IngressClassName != "" {
		spec.WithIngressClassName(in.IngressClassName)
	}
	if in.TLSSecretName != "" {
		spec.WithTLS(networkingv1ac.IngressTLS().WithHosts(host).WithSecretName(in.TLSSecretName))
	}
	return networkingv1ac.Ingress(viewerName(mv), mv.Namespace).
		WithLabels(childLabels(mv)).
		WithOwnerReferences(ownerReference(mv)).
		WithSpec(spec)
}

// desiredHTTPRoute sends every path of the hostnames to the viewer Service.
// Fields the Gateway API CRD would default are set as it would set them, so
// what Trellis applied and what it reads back agree.
func desiredHTTPRoute(mv *viewv1.MarkdownView) *gatewayv1ac.HTTPRouteApplyConfiguration {
	route := mv.Spec.Expose.HTTPRoute
	spec := gatewayv1ac.HTTPRouteSpec()
	for _, p := range route.ParentRefs {
		group, kind := p.Group, p.Kind
		if group == "" {
			group = gatewayv1.GroupName
		}
		if kind == "" {
			kind = "Gateway"
		}
		ref := gatewayv1ac.ParentReference().
			WithGroup(gatewayv1.Group(group)).
			WithKind(gatewayv1.Kind(kind)).
			WithName(gatewayv1.ObjectName(p.Name))
		if p.Namespace != "" {
			ref.WithNamespace(gatewayv1.Namespace(p.Namespace))
		}
		if p.SectionName != "" {
			ref.WithSectionName(gatewayv1.SectionName(p.SectionName))
		}
		if p.Port != 0 {
			ref.WithPort(p.Port)
		}
		spec.WithParentRefs(ref)
	}
	for _, h := range route.Hostnames {
		spec.WithHostnames(gatewayv1.Hostname(h))
	}
	spec.WithRules(gatewayv1ac.HTTPRouteRule().
		WithMatches(gatewayv1ac.HTTPRouteMatch().
			WithPath(gatewayv1ac.HTTPPathMatch().WithType(gatewayv1.PathMatchPathPrefix).WithValue("/"))).
		WithBackendRefs(gatewayv1ac.HTTPBackendRef().
			WithGroup("").
			WithKind("Service").
			WithName(gatewayv1.ObjectName(viewerName(mv))).
			WithPort(servicePort).
			WithWeight(1)))
	return gatewayv1ac.HTTPRoute(viewerName(mv), mv.Namespace).
		WithLabels(childLabels(mv)).
		WithOwnerReferences(ownerReference(mv)).
		WithSpec(spec)
}
