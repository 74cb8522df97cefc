package view

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/controller/children"
	"github.com/trellis-dev/trellis/internal/controller/setup"
)

// Names and ports of the children; docs/markdownview.md describes them.
const (
	configMapPrefix = "markdowns-"
	viewerPrefix    = "viewer-"
	viewerPort      = 8080
	servicePort     = 80
	markdownDir     = "/markdown"
	viewerUID       = 65532 // the distroless "nonroot" user
)

func configMapName(mv *viewv1.MarkdownView) string { return configMapPrefix + mv.Name }
func viewerName(mv *viewv1.MarkdownView) string    { return viewerPrefix + mv.Name }

// siteURL is where the rendered site is served inside the cluster.
func siteURL(mv *viewv1.MarkdownView) string {
	return "http://" + viewerName(mv) + "." + mv.Namespace + ".svc"
}

// selectorLabels pick a MarkdownView's viewer pods; they are immutable on the Deployment.
func selectorLabels(mv *viewv1.MarkdownView) map[string]string {
	return map[string]string{
		"app.kubernetes.io/name":     "markdown-viewer",
		"app.kubernetes.io/instance": mv.Name,
	}
}

// childLabels go on every child; managed-by also scopes the manager's cache.
func childLabels(mv *viewv1.MarkdownView) map[string]string {
	l := selectorLabels(mv)
	l["app.kubernetes.io/part-of"] = "trellis"
	l["app.kubernetes.io/component"] = "viewer"
	l[setup.ManagedByLabel] = setup.ManagedByValue
	return l
}

func ownerReference(mv *viewv1.MarkdownView) *metav1ac.OwnerReferenceApplyConfiguration {
	return children.OwnerReference(mv, viewv1.GroupVersion.WithKind("MarkdownView"))
}

// desiredConfigMapData is exactly the spec's files: a file removed from the
// spec must disappear from the ConfigMap.
func desiredConfigMapData(mv *viewv1.MarkdownView) map[string]string {
	data := make(map[string]string, len(mv.Spec.Markdowns))
	for name, text := range mv.Spec.Markdowns {
		data[name] = string(text)
	}
	return data
}

// desiredDeployment is the viewer Deployment as Trellis applies it.
func desiredDeployment(mv *viewv1.MarkdownView, image string) *appsv1ac.DeploymentApplyConfiguration {
	replicas := mv.Spec.Replicas
	if replicas == 0 {
		replicas = 1 // the CRD defaults it; objects from older clients may lack it
	}
	if mv.Spec.ViewerImage != "" { // unset: the manager's --viewer-image
		image = mv.Spec.ViewerImage
	}
	container := corev1ac.Container().
		WithName("viewer").
		WithImage(image).
		WithArgs("--dir="+markdownDir, "--addr=:8080").
		WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(viewerPort).WithProtocol(corev1.ProtocolTCP)).
		WithVolumeMounts(corev1ac.VolumeMount().WithName("markdowns").WithMountPath(markdownDir).WithReadOnly(true)).
		WithReadinessProbe(corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/healthz").WithPort(intstr.FromString("http")))).
		WithLivenessProbe(corev1ac.Probe().WithHTTPGet(corev1ac.HTTPGetAction().WithPath("/healthz").WithPort(intstr.FromString("http")))).
		WithResources(corev1ac.ResourceRequirements().
			WithRequests(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi")}).
			WithLimits(corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("64Mi")})).
		WithSecurityContext(corev1ac.SecurityContext().
			WithAllowPrivilegeEscalation(false).
			WithReadOnlyRootFilesystem(true).
			WithRunAsNonRoot(true).
			WithCapabilities(corev1ac.Capabilities().WithDrop("ALL")))

	return appsv1ac.Deployment(viewerName(mv), mv.Namespace).
		WithLabels(childLabels(mv)).
		WithOwnerReferences(ownerReference(mv)).
		WithSpec(appsv1ac.DeploymentSpec().
			WithReplicas(replicas).
			WithSelector(metav1ac.LabelSelector().WithMatchLabels(selectorLabels(mv))).
			WithTemplate(corev1ac.PodTemplateSpec().
				WithLabels(childLabels(mv)).
				WithSpec(corev1ac.PodSpec().
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
						WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(configMapName(mv)))))))
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
				WithName("http").
				WithProtocol(corev1.ProtocolTCP).
				WithPort(servicePort).
				WithTargetPort(intstr.FromString("http"))))
}
