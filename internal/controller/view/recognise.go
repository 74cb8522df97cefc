package view

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
)

// recogniseChild is the controller's setup.Controller.Recognise: a child of
// a MarkdownView is controlled by a MarkdownView (an owner reference of the
// view.trellis.dev group) and has the name the controller gives that child
// of that view (markdowns-<view> for the ConfigMap, viewer-<view> for the
// rest). So the cache keeps at most one whole object of each kind per
// MarkdownView name, whatever anyone labels; every other labelled object is
// kept as metadata, which is all the reconcile reads of an object that is
// not its view's (the owner reference: ChildConflict). An owner reference to
// a MarkdownView that does not exist is removed with its object by the
// garbage collector.
func recogniseChild(obj client.Object) bool {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || ref.Kind != "MarkdownView" {
		return false
	}
	if gv, err := schema.ParseGroupVersion(ref.APIVersion); err != nil || gv.Group != viewv1.GroupVersion.Group {
		return false
	}
	owner := &viewv1.MarkdownView{ObjectMeta: metav1.ObjectMeta{Name: ref.Name}}
	switch obj.(type) {
	case *corev1.ConfigMap:
		return obj.GetName() == configMapName(owner)
	case *appsv1.Deployment, *corev1.Service, *networkingv1.Ingress, *gatewayv1.HTTPRoute:
		return obj.GetName() == viewerName(owner)
	}
	return false
}
