// Package conditions holds the kstatus-style condition vocabulary shared by
// every Trellis controller: one summary Ready condition computed in one place
// from the controller's own conditions.
package conditions

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types shared by the controllers.
const (
	Ready       = "Ready"
	Available   = "Available"
	Progressing = "Progressing"
	Degraded    = "Degraded"
	Healthy     = "Healthy"
)

// Set records a condition for the given generation. The transition time moves
// only when the status flips, so an unchanged condition costs no write.
func Set(conds *[]metav1.Condition, generation int64, typ string, status bool, reason, message string) {
	s := metav1.ConditionFalse
	if status {
		s = metav1.ConditionTrue
	}
	meta.SetStatusCondition(conds, metav1.Condition{
		Type:               typ,
		Status:             s,
		ObservedGeneration: generation,
		Reason:             reason,
		Message:            message,
	})
}

// IsTrue reports whether the condition of the given type is True.
func IsTrue(conds []metav1.Condition, typ string) bool {
	return meta.IsStatusConditionTrue(conds, typ)
}

// Get returns the condition of the given type, or nil.
func Get(conds []metav1.Condition, typ string) *metav1.Condition {
	return meta.FindStatusCondition(conds, typ)
}
