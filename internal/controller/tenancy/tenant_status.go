package tenancy

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
)

// Condition reasons of a Tenant, as documented in docs/tenant.md.
const (
	ReasonReady              = "Ready"
	ReasonAsExpected         = "AsExpected"
	ReasonNamespaceConflict  = "NamespaceConflict"
	ReasonProtectedNamespace = "ProtectedNamespace"
	ReasonRBACConflict       = "RBACConflict"
	ReasonTerminating        = "NamespaceTerminating"
)

// observation is what one reconcile found: the state of every namespace of
// the spec, in spec order, and any conflict on the cluster-wide RBAC objects.
type observation struct {
	namespaces   []tenancyv1.TenantNamespaceStatus
	rbacConflict string
}

func (o *observation) set(name string, state tenancyv1.NamespaceState, message string) {
	for i := range o.namespaces {
		if o.namespaces[i].Name == name {
			o.namespaces[i].State, o.namespaces[i].Message = state, message
			return
		}
	}
	o.namespaces = append(o.namespaces, tenancyv1.TenantNamespaceStatus{Name: name, State: state, Message: message})
}

// ready lists the namespaces that are ours and usable.
func (o *observation) ready() []string {
	var names []string
	for _, ns := range o.namespaces {
		if ns.State == tenancyv1.NamespaceReady {
			names = append(names, ns.Name)
		}
	}
	return names
}

// blocked reports whether a person must act (conflicts, protected names).
func (o *observation) blocked() bool {
	for _, ns := range o.namespaces {
		if ns.State == tenancyv1.NamespaceConflict || ns.State == tenancyv1.NamespaceProtected {
			return true
		}
	}
	return o.rbacConflict != ""
}

// computeStatus derives the whole status from what was observed.
func computeStatus(t *tenancyv1.Tenant, obs *observation) tenancyv1.TenantStatus {
	st := *t.Status.DeepCopy()
	gen := t.Generation
	st.ObservedGeneration = gen
	st.Namespaces = append([]tenancyv1.TenantNamespaceStatus(nil), obs.namespaces...)

	reason, msgs := ReasonAsExpected, []string(nil)
	for _, ns := range obs.namespaces {
		switch ns.State {
		case tenancyv1.NamespaceConflict:
			reason = ReasonNamespaceConflict
			msgs = append(msgs, ns.Message)
		case tenancyv1.NamespaceProtected:
			if reason == ReasonAsExpected {
				reason = ReasonProtectedNamespace
			}
			msgs = append(msgs, fmt.Sprintf("namespace %s %s", ns.Name, ns.Message))
		}
	}
	if obs.rbacConflict != "" {
		if reason == ReasonAsExpected {
			reason = ReasonRBACConflict
		}
		msgs = append(msgs, obs.rbacConflict)
	}
	conditions.Set(&st.Conditions, gen, conditions.Degraded, reason != ReasonAsExpected, reason, strings.Join(msgs, "; "))

	ready := len(obs.ready())
	switch {
	case reason != ReasonAsExpected:
		conditions.Set(&st.Conditions, gen, conditions.Ready, false, reason,
			fmt.Sprintf("%d of %d namespaces ready: %s", ready, len(obs.namespaces), strings.Join(msgs, "; ")))
	case ready < len(obs.namespaces):
		conditions.Set(&st.Conditions, gen, conditions.Ready, false, ReasonTerminating,
			fmt.Sprintf("%d of %d namespaces ready; waiting for a namespace being deleted", ready, len(obs.namespaces)))
	default:
		conditions.Set(&st.Conditions, gen, conditions.Ready, true, ReasonReady,
			fmt.Sprintf("%d namespaces ready, administered by %s %s", ready, t.Spec.Admin.Kind, t.Spec.Admin.Name))
	}
	return st
}

// readyValue is the value of the Ready index for a Tenant.
func readyValue(t *tenancyv1.Tenant) string {
	if c := conditions.Get(t.Status.Conditions, conditions.Ready); c != nil {
		return string(c.Status)
	}
	return string(metav1.ConditionUnknown)
}
