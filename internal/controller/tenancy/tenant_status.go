package tenancy

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
)

// Condition reasons of a Tenant, as documented in docs/tenant.md.
const (
	ReasonReady              = "Ready"
	ReasonReconcileError     = "ReconcileError"
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
	// failed is an error the reconcile returned (it is retried with back-off).
	failed error
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
	meta.RemoveStatusCondition(&st.Conditions, "Degraded") // written by earlier versions
	conditions.Summarize(&st.Conditions, gen, summarize(t, obs))
	return st
}

// summarize says where the tenant stands: blocked by names or RBAC objects
// someone else holds, waiting for a namespace to finish terminating, or ready.
func summarize(t *tenancyv1.Tenant, obs *observation) conditions.Summary {
	reason, msgs := "", []string(nil)
	for _, ns := range obs.namespaces {
		switch ns.State {
		case tenancyv1.NamespaceConflict:
			reason = ReasonNamespaceConflict
			msgs = append(msgs, ns.Message)
		case tenancyv1.NamespaceProtected:
			if reason == "" {
				reason = ReasonProtectedNamespace
			}
			msgs = append(msgs, fmt.Sprintf("namespace %s %s", ns.Name, ns.Message))
		}
	}
	if obs.rbacConflict != "" {
		if reason == "" {
			reason = ReasonRBACConflict
		}
		msgs = append(msgs, obs.rbacConflict)
	}
	ready := len(obs.ready())
	switch {
	case reason != "":
		return conditions.Summary{Progress: conditions.Blocked, Reason: reason,
			Message: fmt.Sprintf("%d of %d namespaces ready: %s", ready, len(obs.namespaces), strings.Join(msgs, "; "))}
	case obs.failed != nil:
		return conditions.Summary{Progress: conditions.Working, Reason: ReasonReconcileError, Message: obs.failed.Error()}
	case ready < len(obs.namespaces):
		return conditions.Summary{Progress: conditions.Working, Reason: ReasonTerminating,
			Message: fmt.Sprintf("%d of %d namespaces ready; waiting for a namespace being deleted", ready, len(obs.namespaces))}
	}
	return conditions.Summary{Progress: conditions.Done, Reason: ReasonReady,
		Message: fmt.Sprintf("%d namespaces ready, administered by %s %s", ready, t.Spec.Admin.Kind, t.Spec.Admin.Name)}
}
