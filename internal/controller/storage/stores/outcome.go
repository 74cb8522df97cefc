package stores

import (
	"context"
	"errors"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/apierr"
	"github.com/trellis-dev/trellis/internal/controller/status"
)

// The end every storage reconcile shares: the ObjectStore, StorageBucket and
// BucketAccess reconciles each defer Finish right after reading their
// object, so every exit, an error included, writes the status computed from
// what it observed.

// Outcome is what every storage reconcile records beside its kind's own
// observation.
type Outcome struct {
	// Failed is the error the reconcile ends with (a conflict aside): the
	// status says Reconciling, ReconcileError.
	Failed error
	// Released: the finalizer is gone, and the object may be gone with it;
	// no status is written.
	Released bool
	// Done are Events about what was done in the store.
	Done []Action
	// Told are conditions whose status Events this reconcile's own Events
	// already tell (status.Patcher.Patch).
	Told []string
}

// Did records an Event about something done in the store.
func (o *Outcome) Did(typ, reason, action, format string, args ...any) {
	o.Done = append(o.Done, Action{Type: typ, Reason: reason, Action: action, Message: fmt.Sprintf(format, args...)})
}

// Summary is the summary of a reconcile that failed, or the one it found.
func (o *Outcome) Summary(found *conditions.Summary) *conditions.Summary {
	if o.Failed != nil {
		return &conditions.Summary{Progress: conditions.Working, Reason: conditions.ReasonReconcileError, Message: o.Failed.Error()}
	}
	return found
}

// Finish ends a reconcile; the reconciles defer it, with their named
// results. Unless the object was let go, the status compute derives from
// what was observed is written, only when it differs from the object's (the
// error the reconcile ends with goes in as ReconcileError), and the Events
// of the kind's EventRules are raised; then those about what was done in
// the store. A conflict is returned as it is, with no status about it, for
// the reconcile's apierr.RequeueConflict to run it again. A reconcile that
// ends with an error asks for no RequeueAfter: the work queue's back-off
// decides.
func Finish[O status.Object, S any](ctx context.Context, p *status.Patcher[O, S], rec recorder.EventRecorder,
	obj O, o *Outcome, result *ctrl.Result, err *error, compute func() S) {
	defer func() {
		Raise(rec, obj, o.Done)
		if *err != nil {
			*result = ctrl.Result{}
		}
	}()
	if o.Released {
		return
	}
	switch apierr.Classify(*err) {
	case apierr.None:
	case apierr.Conflict:
		return
	default:
		o.Failed = *err
	}
	if _, perr := p.Patch(ctx, obj, compute(), o.Told...); perr != nil {
		*err = errors.Join(*err, perr)
	}
}
