package stores

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/outcome"
	"github.com/trellis-dev/trellis/internal/controller/status"
)

// The end every storage reconcile shares: the ObjectStore, StorageBucket and
// BucketAccess reconciles each defer Finish once they have read their
// object, so every exit, an error included, writes the status computed from
// what it observed and how it ended.

// Observed is what every storage reconcile records beside its kind's own
// observation.
type Observed struct {
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
func (o *Observed) Did(typ, reason, action, format string, args ...any) {
	o.Done = append(o.Done, Action{Type: typ, Reason: reason, Action: action, Message: fmt.Sprintf(format, args...)})
}

// Summary is what Ready says after a reconcile that ended with out and
// found what found says: what out says when it says anything (a failure),
// else found; nil when neither says anything (nothing is written).
func Summary(out outcome.Outcome, found *conditions.Summary) *conditions.Summary {
	if s, ok := out.Summary(); ok {
		return &s
	}
	return found
}

// Finish is the outcome a storage reconcile that ended with out ends with;
// the reconciles defer it. Unless the object was let go, or out is a
// conflict (what was read is stale), the status compute derives from what
// was observed and from out is written, only when it differs from the
// object's, and the Events of the kind's EventRules are raised; a status
// write that fails makes the outcome a failure. Then, whatever the outcome,
// the Events about what was done in the store are raised.
func Finish[O status.Object, S any](ctx context.Context, p *status.Patcher[O, S], rec recorder.EventRecorder,
	obj O, seen *Observed, out outcome.Outcome, compute func(outcome.Outcome) S) outcome.Outcome {
	defer Raise(rec, obj, seen.Done)
	if seen.Released || !out.WritesStatus() {
		return out
	}
	_, err := p.Patch(ctx, obj, compute(out), seen.Told...)
	return out.And(err)
}
