// Package apierr sorts the errors a reconcile meets into what it does about
// them. Every Trellis controller asks it, so the same refusal of the API
// server reads the same way on every kind:
//
//   - Refused: the API server will not store what the spec asks for, and
//     asking again will not change its mind (the object is invalid, or an
//     admission policy, a quota or the manager's own RBAC forbids it). Only a
//     person can fix it: the reconcile records it as Stalled, with the API
//     server's message, and looks again after setup.ForeignChildRetry (a
//     policy or a quota can change without an event).
//   - Conflict: the object changed since it was read. The reconcile writes
//     no status about it and is run again at once, with no error
//     (outcome.Result): two writers meeting is no failure.
//   - Transient: anything else (a timeout, an API server that did not
//     answer, a cache read that failed). The reconcile returns it, the work
//     queue backs off, and the status says Reconciling, ReconcileError.
//
// Whether an existing object is ours (children.NotOwnedError) is not an API
// error and is not sorted here.
package apierr

import (
	"errors"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Class is what a reconcile does about an error.
type Class int

// The classes, from the least to the most serious: an error made of several
// (errors.Join, or fmt.Errorf with several %w) is of the most serious class
// among its parts, so that a conflict joined to anything else is never
// retried silently.
const (
	// None is the class of a nil error.
	None Class = iota
	// Conflict: the object changed since it was read; run again at once
	// (CountConflict), without touching the status.
	Conflict
	// Transient: return the error; the work queue retries with back-off and
	// the status says ReconcileError.
	Transient
	// Refused: the API server refuses what the spec asks for; only a person
	// can change that (Stalled).
	Refused
)

func (c Class) String() string {
	switch c {
	case None:
		return "None"
	case Conflict:
		return "Conflict"
	case Transient:
		return "Transient"
	case Refused:
		return "Refused"
	}
	return "Class(?)"
}

// Classify returns the class of err.
func Classify(err error) Class {
	if err == nil {
		return None
	}
	if joined, ok := err.(interface{ Unwrap() []error }); ok {
		worst := None
		for _, part := range joined.Unwrap() {
			worst = max(worst, Classify(part))
		}
		return worst
	}
	if _, ok := err.(apierrors.APIStatus); !ok {
		if next := errors.Unwrap(err); next != nil {
			return Classify(next)
		}
		return Transient
	}
	switch {
	case apierrors.IsConflict(err):
		return Conflict
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		// Forbidden only until the namespace is gone; then the object is
		// made in the namespace created again, or goes with it.
		return Transient
	case apierrors.IsInvalid(err), apierrors.IsForbidden(err):
		return Refused
	}
	return Transient
}

// Message is the API server's own words for an error it returned (the
// message of its Status), or the error itself for any other.
func Message(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		if msg := status.Status().Message; msg != "" {
			return msg
		}
	}
	return err.Error()
}
