// Package operate holds the two ways a person operates any Trellis object,
// with Flux's names and semantics, which platform teams already know:
// spec.suspend, and the reconcile.fluxcd.io/requestedAt annotation that asks
// for a reconcile now (`flux reconcile` sets it on Flux's kinds; on Trellis'
// `kubectl annotate --overwrite` does).
package operate

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/trellis-dev/trellis/internal/conditions"
)

const (
	// RequestedAtAnnotation asks for a reconcile whenever its value changes,
	// whatever the value; status.lastHandledReconcileAt says which value was
	// answered. Flux's name (fluxcd/pkg meta.ReconcileRequestAnnotation).
	RequestedAtAnnotation = "reconcile.fluxcd.io/requestedAt"

	// ConditionSuspended is True while spec.suspend is.
	ConditionSuspended = conditions.Suspended
	// ReasonSuspended is the reason of Suspended, and of Ready and Stalled
	// when suspend is what keeps the object from being Ready.
	ReasonSuspended = "Suspended"

	// MaxRequestedAt bounds the annotation values answered, as the CRDs
	// bound status.lastHandledReconcileAt; a longer value asks for nothing.
	MaxRequestedAt = 256

	suspendedMessage = "spec.suspend is true: nothing is created, changed or deleted until it is false"
)

// IsSuspended reports whether spec.suspend is set and true.
func IsSuspended(suspend *bool) bool { return suspend != nil && *suspend }

// RequestedAt is the value of obj's reconcile-now annotation; "" without
// one, or with one longer than MaxRequestedAt.
func RequestedAt(obj metav1.Object) string {
	if v := obj.GetAnnotations()[RequestedAtAnnotation]; len(v) <= MaxRequestedAt {
		return v
	}
	return ""
}

// ReconcileRequested passes the updates that change the reconcile-now
// annotation; every other event is left to the predicates it is or-ed with
// (the controllers watch generation changes). Flux: predicates.ReconcileRequestedPredicate.
var ReconcileRequested = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		if e.ObjectOld == nil || e.ObjectNew == nil {
			return false
		}
		return RequestedAt(e.ObjectNew) != RequestedAt(e.ObjectOld)
	},
}

// Suspend sets the conditions of a suspended object, for generation: the
// object keeps what it has, so Ready is kept as it was; Suspended is True;
// Reconciling goes, for nothing is in progress. An object suspended before
// it was Ready is Stalled, reason Suspended: only a person resuming it moves
// it on. kstatus thus reads a suspended object Current (Ready True) or
// Failed, never InProgress for ever. The caller also sets observedGeneration:
// the spec was seen, suspend and all.
func Suspend(conds *[]metav1.Condition, generation int64) {
	conditions.Set(conds, generation, ConditionSuspended, true, ReasonSuspended, suspendedMessage)
	meta.RemoveStatusCondition(conds, conditions.Reconciling)
	if conditions.IsTrue(*conds, conditions.Ready) {
		return
	}
	if conditions.Get(*conds, conditions.Ready) == nil {
		conditions.Set(conds, generation, conditions.Ready, false, ReasonSuspended, suspendedMessage)
	}
	if !conditions.IsTrue(*conds, conditions.Stalled) {
		conditions.Set(conds, generation, conditions.Stalled, true, ReasonSuspended, suspendedMessage)
	}
}

// Resume undoes Suspend on the conditions a reconcile computes: Suspended
// goes, and so does a Stalled that only suspend caused (the reconcile's own
// summary sets Stalled again when it finds cause).
func Resume(conds *[]metav1.Condition) {
	meta.RemoveStatusCondition(conds, ConditionSuspended)
	if c := conditions.Get(*conds, conditions.Stalled); c != nil && c.Reason == ReasonSuspended {
		meta.RemoveStatusCondition(conds, conditions.Stalled)
	}
}
