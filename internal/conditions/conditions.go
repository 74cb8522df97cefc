// Package conditions holds the condition vocabulary shared by every Trellis
// controller, and the one function that turns the outcome of a reconcile into
// the three conditions GitOps tools read (kstatus): Ready, Reconciling and
// Stalled.
package conditions

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Condition types.
const (
	// Ready summarises the object: True when everything it asks for is in place.
	Ready = "Ready"
	// Reconciling is True while Trellis is still working towards the desired
	// state and expects to get there without anyone's help. kstatus reports
	// such an object InProgress.
	Reconciling = "Reconciling"
	// Stalled is True when the desired state cannot be reached until a person
	// acts (a name taken by someone else, input that cannot be served, a
	// delete that would lose data). kstatus reports such an object Failed.
	Stalled = "Stalled"
	// Suspended is True while the object's spec.suspend is: Trellis leaves
	// it as it is (internal/controller/operate).
	Suspended = "Suspended"
	// Available is True when a MarkdownView's site is served.
	Available = "Available"
	// SettingsApplied is True when the store holds the bucket settings a
	// StorageBucket declares (versioning, policy, CORS, lifecycle).
	SettingsApplied = "SettingsApplied"
)

// Reasons every kind gives, with the same meaning. A kind's own reasons are
// declared beside its status function. These strings are read by people and
// alerts: they never change.
const (
	// ReasonReady: everything the object asks for is in place.
	ReasonReady = "Ready"
	// ReasonReconcileError: the reconcile met an error it returned; the work
	// queue retries it with back-off (Reconciling).
	ReasonReconcileError = "ReconcileError"
)

// Progress is where a reconcile left an object.
type Progress int

const (
	// Done means the desired state is reached.
	Done Progress = iota
	// Working means not there yet, and getting there needs nobody's help.
	Working
	// Blocked means only a person can unblock it.
	Blocked
)

// Summary is the outcome of one reconcile, as Ready will tell it.
type Summary struct {
	Progress Progress
	// Reason and Message go on Ready, and on Reconciling or Stalled when one
	// of those is True.
	Reason  string
	Message string
}

// Summarize sets Ready, Reconciling and Stalled from s. It is the one place
// that decides them, for every kind: Ready is True exactly when s is Done;
// Reconciling and Stalled are present only while True (they are "abnormal
// true" conditions, so their absence reads as False).
func Summarize(conds *[]metav1.Condition, generation int64, s Summary) {
	Set(conds, generation, Ready, s.Progress == Done, s.Reason, s.Message)
	switch s.Progress {
	case Done:
		meta.RemoveStatusCondition(conds, Reconciling)
		meta.RemoveStatusCondition(conds, Stalled)
	case Working:
		Set(conds, generation, Reconciling, true, s.Reason, s.Message)
		meta.RemoveStatusCondition(conds, Stalled)
	case Blocked:
		Set(conds, generation, Stalled, true, s.Reason, s.Message)
		meta.RemoveStatusCondition(conds, Reconciling)
	}
}

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
