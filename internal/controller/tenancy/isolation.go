// Network isolation that holds whatever was there before it: NetworkPolicies
// add up, so a team's policy admitting more than the tenant (made before
// isolation was switched on, by someone the admission policy exempts, or
// found in a namespace handed over or reclaimed) undoes Trellis' own. The
// controller judges every NetworkPolicy in a tenant namespace exactly as
// config/admission/tenant_guardrails.yaml judges one at admission, reports
// those that admit traffic from outside the tenant, and never touches them.

package tenancy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/controller/setup"
)

// admitsFromOutside reports whether a NetworkPolicy in a namespace of tenant
// admits ingress traffic from outside the tenant: exactly what the admission
// policy (config/admission/tenant_guardrails.yaml, its validation of
// NetworkPolicies) refuses in a network-isolated namespace. A rule without
// peers admits everyone; an ipBlock peer admits addresses, whoever holds
// them; a namespaceSelector peer stays inside the tenant only when its
// matchLabels name this tenant (tenant admins cannot label namespaces, so
// that label is Trellis'), and there is none without a tenant; a podSelector
// alone selects pods of the policy's own namespace.
// Egress rules admit nothing in, and policyTypes are not read: the admission
// policy judges the ingress rules as written, so this does too.
// TestIsolationVerdictAgreesWithTheAdmissionPolicy feeds the same cases to
// both.
func admitsFromOutside(spec *networkingv1.NetworkPolicySpec, tenant string) bool {
	for _, rule := range spec.Ingress {
		if len(rule.From) == 0 {
			return true
		}
		for _, peer := range rule.From {
			if peer.IPBlock != nil {
				return true
			}
			if sel := peer.NamespaceSelector; sel != nil {
				if v, ok := sel.MatchLabels[TenantLabel]; !ok || tenant == "" || v != tenant {
					return true
				}
			}
		}
	}
	return false
}

// isIsolationPolicy reports whether a NetworkPolicy carries the name and
// marks of the isolation policy Trellis keeps in a tenant namespace. The
// cache keeps those whole (the controller compares their spec with the
// desired one); whether it is this tenant's is ownsChild's question.
func isIsolationPolicy(np *networkingv1.NetworkPolicy) bool {
	return np.Name == networkPolicyName && np.Labels[setup.ManagedByLabel] == setup.ManagedByValue && np.Labels[TenantLabel] != ""
}

// reduceNetworkPolicy is the cache transform of NetworkPolicies, which are
// all cached (a team's policies carry no Trellis label). Trellis' isolation
// policies are kept whole. Every other policy is cut down, in place, to what
// the controller reads: its name, namespace, UID and resourceVersion,
// Trellis' label keys (a policy named like Trellis' own is judged by them),
// and canonicalIngress of its ingress rules, which keeps admitsFromOutside's
// verdict for every tenant. Whatever a user writes in a policy, the manager
// keeps well under a kilobyte of it.
func reduceNetworkPolicy(in any) (any, error) {
	np, ok := in.(*networkingv1.NetworkPolicy)
	if !ok || isIsolationPolicy(np) {
		return in, nil
	}
	var labels map[string]string
	for _, k := range []string{setup.ManagedByLabel, partOfLabel, TenantLabel} {
		if v, ok := np.Labels[k]; ok {
			if labels == nil {
				labels = map[string]string{}
			}
			labels[k] = v
		}
	}
	np.ObjectMeta = metav1.ObjectMeta{
		Name: np.Name, Namespace: np.Namespace, UID: np.UID, ResourceVersion: np.ResourceVersion, Labels: labels,
	}
	np.Spec = networkingv1.NetworkPolicySpec{Ingress: canonicalIngress(np.Spec.Ingress)}
	return np, nil
}

// canonicalIngress reduces ingress rules to at most one rule that
// admitsFromOutside judges as it judges all of them, for every tenant:
//   - a rule admitting everyone, when some rule has no peers, some peer is an
//     ipBlock or a namespaceSelector without the tenant label in its
//     matchLabels, or two peers name different tenants (one of them is
//     foreign to any tenant);
//   - a rule admitting the namespaces of the one tenant every
//     namespaceSelector names (outside the tenant for every other tenant);
//   - a rule admitting the pods of the policy's namespace, when every peer
//     is a podSelector alone (outside the tenant for none);
//   - nothing, without ingress rules.
func canonicalIngress(rules []networkingv1.NetworkPolicyIngressRule) []networkingv1.NetworkPolicyIngressRule {
	tenant, named, podsOnly := "", false, false
	for _, rule := range rules {
		if len(rule.From) == 0 {
			return []networkingv1.NetworkPolicyIngressRule{{}}
		}
		for _, peer := range rule.From {
			switch {
			case peer.IPBlock != nil:
				return []networkingv1.NetworkPolicyIngressRule{{}}
			case peer.NamespaceSelector != nil:
				v, ok := peer.NamespaceSelector.MatchLabels[TenantLabel]
				if !ok || (named && v != tenant) {
					return []networkingv1.NetworkPolicyIngressRule{{}}
				}
				tenant, named = v, true
			default:
				podsOnly = true
			}
		}
	}
	switch {
	case named:
		return []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{TenantLabel: tenant}},
		}}}}
	case podsOnly:
		return []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
			PodSelector: &metav1.LabelSelector{},
		}}}}
	}
	return nil
}

// checkIsolation lists the NetworkPolicies of one of the tenant's namespaces
// from the cache and records those that admit ingress from outside the
// tenant. Trellis' own isolation policy is not judged: it admits the
// allowFromNamespaces by design, and a leftover of a Tenant that no longer
// exists is rewritten to this tenant's spec. Nothing is written, nothing is
// read from the API server.
func (r *Reconciler) checkIsolation(ctx context.Context, s *scope, ns string) error {
	list := &networkingv1.NetworkPolicyList{}
	if err := r.client.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("listing the NetworkPolicies of namespace %s: %w", ns, err)
	}
	var open []string
	for i := range list.Items {
		np := &list.Items[i]
		if np.Name == networkPolicyName {
			ours, err := r.ownsChild(ctx, np, s.t)
			if err != nil {
				return err
			}
			if ours {
				continue
			}
		}
		if admitsFromOutside(&np.Spec, s.t.Name) {
			open = append(open, np.Name)
		}
	}
	if len(open) > 0 {
		slices.Sort(open)
		s.obs.undoIsolation(ns, open)
	}
	return nil
}

// The messages name at most this many policies: a namespace's message must
// fit status.namespaces[].message (1024 characters; a policy name has up
// to 253), the Tenant's stays readable.
const (
	namespaceMessagePolicies = 3
	tenantMessagePolicies    = 5
)

// nameSome joins the first max names and counts the others.
func nameSome(names []string, max int) string {
	if len(names) <= max {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:max], ", "), len(names)-max)
}

// isolationNamespaceMessage is the state message of a namespace whose
// isolation its own policies undo.
func isolationNamespaceMessage(policies []string) string {
	if len(policies) == 1 {
		return "NetworkPolicy " + policies[0] + " admits ingress from outside the tenant, which undoes its network isolation; it is left untouched"
	}
	return "NetworkPolicies " + nameSome(policies, namespaceMessagePolicies) +
		" admit ingress from outside the tenant, which undoes its network isolation; they are left untouched"
}

// isolationMessage is the Tenant's message: the policies (namespace/name,
// in the spec's order of namespaces) and what to do.
func isolationMessage(namespaces []tenancyv1.TenantNamespaceStatus, undone map[string][]string) string {
	var all []string
	for _, ns := range namespaces {
		for _, p := range undone[ns.Name] {
			all = append(all, ns.Name+"/"+p)
		}
	}
	what, it, its := "NetworkPolicy "+nameSome(all, tenantMessagePolicies)+" admits", "it", "its"
	if len(all) > 1 {
		what, it, its = "NetworkPolicies "+nameSome(all, tenantMessagePolicies)+" admit", "them", "their"
	}
	return what + " ingress from outside the tenant, and NetworkPolicies add up: the network isolation is undone. " +
		"Trellis leaves " + it + " untouched: delete " + it + ", or let " + it + " admit only pods of " + its +
		" own namespace (a podSelector alone) or the tenant's namespaces (namespaceSelector.matchLabels " + TenantLabel + ": <tenant>)"
}

// networkPolicyToTenant maps a NetworkPolicy event to the Tenants it may
// matter to: Trellis' own policies by their tenant label, as every other
// child; any policy also to the Tenant whose namespace it is in (a team's
// policies carry no label), read from the cache of namespaces, which holds
// every tenant namespace. A policy outside the tenant namespaces wakes
// nobody.
func networkPolicyToTenant(namespaces client.Reader) func(context.Context, client.Object) []reconcile.Request {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		var reqs []reconcile.Request
		if o.GetLabels()[setup.ManagedByLabel] == setup.ManagedByValue {
			reqs = childToTenant(ctx, o)
		}
		ns := &corev1.Namespace{}
		if err := namespaces.Get(ctx, client.ObjectKey{Name: o.GetNamespace()}, ns); err != nil {
			return reqs // not a namespace Trellis marked (or gone)
		}
		if t := ns.Labels[TenantLabel]; t != "" {
			req := reconcile.Request{NamespacedName: client.ObjectKey{Name: t}}
			if !slices.Contains(reqs, req) {
				reqs = append(reqs, req)
			}
		}
		return reqs
	}
}

// networkPolicyChanged passes every change of Trellis' own policies (drift
// is restored), and of anyone else's only what can change a verdict: its
// ingress rules (as the cache reduced them) or its labels. A resync, or a
// change the reduction drops, passes nothing.
var networkPolicyChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		if o.GetLabels()[setup.ManagedByLabel] == setup.ManagedByValue || n.GetLabels()[setup.ManagedByLabel] == setup.ManagedByValue {
			return true
		}
		op, ok1 := o.(*networkingv1.NetworkPolicy)
		np, ok2 := n.(*networkingv1.NetworkPolicy)
		return !ok1 || !ok2 || !maps.Equal(o.GetLabels(), n.GetLabels()) ||
			!equality.Semantic.DeepEqual(op.Spec.Ingress, np.Spec.Ingress)
	},
}
