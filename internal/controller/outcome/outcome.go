// Package outcome is how a reconcile ends. Each reconciler's steps end in an
// Outcome; the kind's pure status function reads it (a failure or a block
// shows on Ready), and Result turns it into what controller-runtime gets, the
// same way for every kind. It is its own package, not part of apierr (which
// sorts API errors) or status (which writes), because an outcome is neither:
// most outcomes hold no error, and none is a write. It holds no client.
package outcome

import (
	"errors"
	"fmt"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/apierr"
)

// Kind is one of the five ways a reconcile ends.
type Kind int

const (
	// Done means nothing is left to do until something changes.
	Done Kind = iota
	// Requeue means done for now, and looked at again after a while.
	Requeue
	// Conflict means an object changed since it was read. No status is written
	// about it, and the reconcile runs again soon, with no error: two
	// writers meeting is no failure.
	Conflict
	// Blocked means a person must act (a name someone else holds, an input too
	// large, a refusal of the API server). No error: retrying changes
	// nothing, so it is shown as Stalled.
	Blocked
	// Failed means an error the work queue retries with back-off, shown as
	// Reconciling, ReconcileError.
	Failed
)

func (k Kind) String() string {
	switch k {
	case Done:
		return "Done"
	case Requeue:
		return "Requeue"
	case Conflict:
		return "Conflict"
	case Blocked:
		return "Blocked"
	case Failed:
		return "Failed"
	}
	return "Kind(?)"
}

// Outcome is how one reconcile ended. The zero value is Done.
type Outcome struct {
	kind Kind
	// after is when to look again (Requeue, and Blocked when set).
	after           time.Duration
	reason, message string
	err             error
}

// RequeueAfter is done for now, and again after d (exactly: a caller that
// wants jitter passes a jittered d).
func RequeueAfter(d time.Duration) Outcome { return Outcome{kind: Requeue, after: d} }

// RaceLost is the Conflict outcome, for a conflict found as a value rather
// than returned as an error.
func RaceLost() Outcome { return Outcome{kind: Conflict} }

// Stalled says a person must act; reason and message go on Ready and Stalled.
func Stalled(reason, message string) Outcome {
	return Outcome{kind: Blocked, reason: reason, message: message}
}

// LookAgainAfter asks a Blocked outcome to be looked at again after d: what
// blocks it can go away without an event (an object outside the cache, a
// policy or a quota changed). Other outcomes are returned unchanged.
func (o Outcome) LookAgainAfter(d time.Duration) Outcome {
	if o.kind == Blocked {
		o.after = d
	}
	return o
}

// Of is the outcome of a step that ended with err: Done for nil, Blocked for
// a Block, Conflict for an error of class apierr.Conflict (a conflict,
// wrapped or joined to nothing but conflicts), Failed for any other.
func Of(err error) Outcome {
	var b *blockError
	switch {
	case err == nil:
		return Outcome{}
	case errors.As(err, &b):
		return Stalled(b.reason, b.message)
	case apierr.Classify(err) == apierr.Conflict:
		return Outcome{kind: Conflict, err: err}
	}
	return Outcome{kind: Failed, err: err}
}

// Block is the error a step returns to stop the steps after it because a
// person must act; Of turns it into a Blocked outcome.
func Block(reason, message string) error { return &blockError{reason: reason, message: message} }

type blockError struct{ reason, message string }

func (b *blockError) Error() string { return fmt.Sprintf("blocked (%s): %s", b.reason, b.message) }

// And is the outcome when err also happened after o (a status write that
// failed): o when err is nil, otherwise the outcome of err joined to o's
// own error, which replaces o.
func (o Outcome) And(err error) Outcome {
	if err == nil {
		return o
	}
	return Of(errors.Join(o.Err(), err))
}

// Kind says how the reconcile ended.
func (o Outcome) Kind() Kind { return o.kind }

// Err is the error of a Failed outcome, nil for any other.
func (o Outcome) Err() error {
	if o.kind == Failed {
		return o.err
	}
	return nil
}

// WritesStatus says whether a status is written after o: after a conflict
// none is, since what was read is already stale.
func (o Outcome) WritesStatus() bool { return o.kind != Conflict }

// Summary is what o says on Ready, for the kind's status function: Stalled
// with its reason for Blocked, Reconciling with ReconcileError for Failed.
// Of the other outcomes it says nothing (false): the kind's observation does.
func (o Outcome) Summary() (conditions.Summary, bool) {
	switch o.kind {
	case Blocked:
		return conditions.Summary{Progress: conditions.Blocked, Reason: o.reason, Message: o.message}, true
	case Failed:
		return conditions.Summary{Progress: conditions.Working, Reason: conditions.ReasonReconcileError, Message: o.err.Error()}, true
	}
	return conditions.Summary{}, false
}

// Result is what Reconcile returns for o; controller is the name the
// controller is registered under. A Conflict is requeued after about
// apierr.ConflictRetry with no error, and counted in
// trellis_reconcile_conflicts_total{controller}, so that
// controller_runtime_reconcile_errors_total counts failures only. A Failed
// outcome asks for no RequeueAfter: the work queue's back-off decides.
func (o Outcome) Result(controller string) (ctrl.Result, error) {
	switch o.kind {
	case Requeue, Blocked:
		return ctrl.Result{RequeueAfter: o.after}, nil
	case Conflict:
		return apierr.CountConflict(controller), nil
	case Failed:
		return ctrl.Result{}, o.err
	}
	return ctrl.Result{}, nil
}
