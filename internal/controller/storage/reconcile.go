package storage

import (
	"context"
	"errors"
	"fmt"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/apierr"
	"github.com/trellis-dev/trellis/internal/controller/status"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
)

// The end every storage reconcile shares: the ObjectStore, StorageBucket and
// BucketAccess reconciles each defer finish right after reading their
// object, so every exit, an error included, writes the status computed from
// what it observed.

// The names the three controllers are registered under: the controller
// label of controller-runtime's metrics and trellis_reconcile_conflicts_total.
const (
	storeController  = "objectstore"
	bucketController = "storagebucket"
	accessController = "bucketaccess"
)

// outcome is what every storage reconcile records beside its kind's own
// observation.
type outcome struct {
	// failed is the error the reconcile ends with (a conflict aside): the
	// status says Reconciling, ReconcileError.
	failed error
	// released: the finalizer is gone, and the object may be gone with it;
	// no status is written.
	released bool
	// done are Events about what was done in the store.
	done []stores.Action
	// told are conditions whose status Events this reconcile's own Events
	// already tell (status.Patcher.Patch).
	told []string
}

// did records an Event about something done in the store.
func (o *outcome) did(typ, reason, action, format string, args ...any) {
	o.done = append(o.done, stores.Action{Type: typ, Reason: reason, Action: action, Message: fmt.Sprintf(format, args...)})
}

// summary is the summary of a reconcile that failed, or the one it found.
func (o *outcome) summary(found *conditions.Summary) *conditions.Summary {
	if o.failed != nil {
		return &conditions.Summary{Progress: conditions.Working, Reason: stores.ReasonReconcileError, Message: o.failed.Error()}
	}
	return found
}

// finish ends a reconcile; the reconciles defer it, with their named
// results. Unless the object was let go, the status compute derives from
// what was observed is written, only when it differs from the object's (the
// error the reconcile ends with goes in as ReconcileError), and the Events
// of the kind's EventRules are raised; then those about what was done in
// the store. A conflict is returned as it is, with no status about it, for
// the reconcile's apierr.RequeueConflict to run it again. A reconcile that
// ends with an error asks for no RequeueAfter: the work queue's back-off
// decides.
func finish[O status.Object, S any](ctx context.Context, p *status.Patcher[O, S], rec recorder.EventRecorder,
	obj O, o *outcome, result *ctrl.Result, err *error, compute func() S) {
	defer func() {
		stores.Raise(rec, obj, o.done)
		if *err != nil {
			*result = ctrl.Result{}
		}
	}()
	if o.released {
		return
	}
	switch apierr.Classify(*err) {
	case apierr.None:
	case apierr.Conflict:
		return
	default:
		o.failed = *err
	}
	if _, perr := p.Patch(ctx, obj, compute(), o.told...); perr != nil {
		*err = errors.Join(*err, perr)
	}
}
