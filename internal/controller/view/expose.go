package view

import (
	"context"
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/controller/children"
	"github.com/trellis-dev/trellis/internal/controller/outcome"
)

// reconcileIngress applies the Ingress spec.expose.ingress asks for, or
// removes the one Trellis made when it no longer does.
func (r *Reconciler) reconcileIngress(ctx context.Context, mv *viewv1.MarkdownView, _ *observation) error {
	live := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Name: viewerName(mv), Namespace: mv.Namespace}}
	if mv.Spec.Expose.Ingress.Host == "" {
		return r.removeOwned(ctx, mv, "Ingress", live)
	}
	applied, err := children.ApplyOwned(ctx, r.children, mv, "Ingress", live, desiredIngress(mv), networkingv1ac.ExtractIngress)
	if applied {
		log.FromContext(ctx).Info("Ingress applied", "ingress", live.Name)
	}
	return err
}

// reconcileHTTPRoute applies the HTTPRoute spec.expose.httpRoute asks for,
// or removes the one Trellis made when it no longer does, and reports a
// route its Gateway refused.
func (r *Reconciler) reconcileHTTPRoute(ctx context.Context, mv *viewv1.MarkdownView, _ *observation) error {
	wanted := len(mv.Spec.Expose.HTTPRoute.ParentRefs) > 0
	if !r.routesServed {
		if wanted {
			return outcome.Block(ReasonGatewayAPIUnavailable, "spec.expose.httpRoute needs the Gateway API, whose HTTPRoute (gateway.networking.k8s.io/v1) this cluster did not serve when the Trellis manager started: install the Gateway API CRDs and restart the manager, or expose the site with an Ingress")
		}
		return nil
	}
	live := &gatewayv1.HTTPRoute{ObjectMeta: metav1.ObjectMeta{Name: viewerName(mv), Namespace: mv.Namespace}}
	if !wanted {
		return r.removeOwned(ctx, mv, "HTTPRoute", live)
	}
	applied, err := children.ApplyOwned(ctx, r.children, mv, "HTTPRoute", live, desiredHTTPRoute(mv), gatewayv1ac.ExtractHTTPRoute)
	if err != nil {
		return err
	}
	if applied {
		log.FromContext(ctx).Info("HTTPRoute applied", "httproute", live.Name)
		return nil // live is from before the apply: its status is about the old spec
	}
	if msg := routeRefusal(live); msg != "" {
		return outcome.Block(ReasonRouteNotAccepted, msg)
	}
	return nil
}

// routeRefusal says which parent refused the route in its current
// generation, or "" when none did. A route no Gateway has looked at yet is
// not refused: a cluster may have no Gateway controller, and the site is
// still served inside the cluster.
func routeRefusal(route *gatewayv1.HTTPRoute) string {
	for _, p := range route.Status.Parents {
		for _, c := range p.Conditions {
			if c.Type == string(gatewayv1.RouteConditionAccepted) && c.Status == metav1.ConditionFalse && c.ObservedGeneration == route.Generation {
				ns := route.Namespace
				if p.ParentRef.Namespace != nil {
					ns = string(*p.ParentRef.Namespace)
				}
				return fmt.Sprintf("%s %s/%s does not accept HTTPRoute %s (%s): %s", kindOf(p.ParentRef), ns, p.ParentRef.Name, route.Name, c.Reason, c.Message)
			}
		}
	}
	return ""
}

func kindOf(ref gatewayv1.ParentReference) string {
	if ref.Kind != nil {
		return string(*ref.Kind)
	}
	return "Gateway"
}

// removeOwned deletes the child named like obj if it is in the cache (so
// labelled by Trellis) and controlled by mv. Anything else of that name is
// left alone: Trellis deletes only what it made for this object.
func (r *Reconciler) removeOwned(ctx context.Context, mv *viewv1.MarkdownView, kind string, obj client.Object) error {
	if err := r.client.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(obj, mv) {
		return nil
	}
	uid := obj.GetUID()
	if err := r.client.Delete(ctx, obj, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s %s: %w", kind, obj.GetName(), err)
	}
	log.FromContext(ctx).Info(kind+" deleted: no longer in spec.expose", "name", obj.GetName())
	return nil
}
