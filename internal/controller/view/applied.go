package view

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	"github.com/trellis-dev/trellis/internal/controller/children"
	"github.com/trellis-dev/trellis/internal/controller/setup"
)

// appliedTransforms trim the children the controller applies (ApplyOwned)
// to what it reads of them: their metadata, the hash of what Trellis
// applied (children.TrimApplied), and the status the view's status and the
// Deployment predicate read (a Deployment's rollout figures and conditions,
// an HTTPRoute's parents). No spec is kept: drift is seen by the hash, since
// whoever changes a field Trellis set takes it over in managedFields, and the
// configuration extracted for Trellis then differs from the one it applies.
var appliedTransforms = []setup.Transform{
	{Object: &appsv1.Deployment{}, Func: children.TrimApplied(appsv1ac.ExtractDeployment,
		func(d *appsv1.Deployment) { d.Spec = appsv1.DeploymentSpec{} })},
	{Object: &corev1.Service{}, Func: children.TrimApplied(corev1ac.ExtractService,
		func(s *corev1.Service) { s.Spec, s.Status = corev1.ServiceSpec{}, corev1.ServiceStatus{} })},
	{Object: &networkingv1.Ingress{}, Func: children.TrimApplied(networkingv1ac.ExtractIngress,
		func(i *networkingv1.Ingress) {
			i.Spec, i.Status = networkingv1.IngressSpec{}, networkingv1.IngressStatus{}
		})},
	{Object: &gatewayv1.HTTPRoute{}, Func: children.TrimApplied(gatewayv1ac.ExtractHTTPRoute,
		func(r *gatewayv1.HTTPRoute) { r.Spec = gatewayv1.HTTPRouteSpec{} })},
}
