package outcome

import (
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/apierr"
	"github.com/trellis-dev/trellis/internal/testenv"
)

var (
	configMaps  = schema.GroupResource{Resource: "configmaps"}
	conflict    = apierrors.NewConflict(configMaps, "c", errors.New("the object has been modified"))
	unavailable = apierrors.NewServiceUnavailable("etcd is down")
	refused     = apierrors.NewForbidden(configMaps, "c", errors.New("exceeded quota"))
)

// TestResult: every outcome becomes the same (ctrl.Result, error) for every
// controller; only a Failed outcome is an error, and only a Conflict is
// counted as one.
func TestResult(t *testing.T) {
	const controller = "test-outcome"
	cases := map[string]struct {
		out      Outcome
		kind     Kind
		requeue  time.Duration // exact, unless conflict
		conflict bool          // again after about apierr.ConflictRetry, counted
		err      error
		summary  *conditions.Summary
	}{
		"the zero value is done":        {out: Outcome{}, kind: Done},
		"no error is done":              {out: Of(nil), kind: Done},
		"requeue after d":               {out: RequeueAfter(time.Hour), kind: Requeue, requeue: time.Hour},
		"a race lost, found as a value": {out: RaceLost(), kind: Conflict, conflict: true},
		"a conflict":                    {out: Of(conflict), kind: Conflict, conflict: true},
		"a conflict, wrapped":           {out: Of(fmt.Errorf("applying Service s: %w", conflict)), kind: Conflict, conflict: true},
		"conflicts joined":              {out: Of(errors.Join(conflict, conflict)), kind: Conflict, conflict: true},
		"a conflict beside an outage is a failure": {out: Of(errors.Join(conflict, unavailable)), kind: Failed,
			err:     errors.Join(conflict, unavailable),
			summary: &conditions.Summary{Progress: conditions.Working, Reason: conditions.ReasonReconcileError, Message: errors.Join(conflict, unavailable).Error()}},
		"an outage": {out: Of(unavailable), kind: Failed, err: unavailable,
			summary: &conditions.Summary{Progress: conditions.Working, Reason: conditions.ReasonReconcileError, Message: unavailable.Error()}},
		"a refusal the kind did not sort is a failure": {out: Of(refused), kind: Failed, err: refused,
			summary: &conditions.Summary{Progress: conditions.Working, Reason: conditions.ReasonReconcileError, Message: refused.Error()}},
		"a person must act": {out: Stalled("TooLarge", "too large"), kind: Blocked,
			summary: &conditions.Summary{Progress: conditions.Blocked, Reason: "TooLarge", Message: "too large"}},
		"a person must act, looked at again": {out: Stalled("Taken", "taken").LookAgainAfter(time.Minute), kind: Blocked, requeue: time.Minute,
			summary: &conditions.Summary{Progress: conditions.Blocked, Reason: "Taken", Message: "taken"}},
		"a step blocked": {out: Of(fmt.Errorf("step: %w", Block("Taken", "taken"))), kind: Blocked,
			summary: &conditions.Summary{Progress: conditions.Blocked, Reason: "Taken", Message: "taken"}},
		"look again applies to blocks only": {out: RaceLost().LookAgainAfter(time.Minute), kind: Conflict, conflict: true},
		"a status write failed after a block": {out: Stalled("Taken", "taken").LookAgainAfter(time.Minute).And(unavailable), kind: Failed,
			err: unavailable, summary: &conditions.Summary{Progress: conditions.Working, Reason: conditions.ReasonReconcileError, Message: unavailable.Error()}},
		"a status write failed after a failure": {out: Of(refused).And(unavailable), kind: Failed, err: errors.Join(refused, unavailable),
			summary: &conditions.Summary{Progress: conditions.Working, Reason: conditions.ReasonReconcileError, Message: errors.Join(refused, unavailable).Error()}},
		"a status write in conflict": {out: RequeueAfter(time.Hour).And(conflict), kind: Conflict, conflict: true},
		"nothing else happened":      {out: RequeueAfter(time.Hour).And(nil), kind: Requeue, requeue: time.Hour},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			before, err := testenv.Counter("trellis_reconcile_conflicts_total", "controller", controller)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(tc.out.Kind()).To(Equal(tc.kind))
			res, rerr := tc.out.Result(controller)
			after, err := testenv.Counter("trellis_reconcile_conflicts_total", "controller", controller)
			g.Expect(err).NotTo(HaveOccurred())
			if tc.err != nil {
				g.Expect(rerr).To(MatchError(tc.err.Error()))
				g.Expect(tc.out.Err()).To(MatchError(tc.err.Error()))
			} else {
				g.Expect(rerr).NotTo(HaveOccurred())
				g.Expect(tc.out.Err()).NotTo(HaveOccurred())
			}
			if tc.conflict {
				g.Expect(res.RequeueAfter).To(BeNumerically("~", apierr.ConflictRetry, apierr.ConflictRetry/10))
				g.Expect(after - before).To(Equal(1.0))
				g.Expect(tc.out.WritesStatus()).To(BeFalse(), "what was read is stale")
			} else {
				g.Expect(res).To(Equal(ctrl.Result{RequeueAfter: tc.requeue}))
				g.Expect(after - before).To(BeZero())
				g.Expect(tc.out.WritesStatus()).To(BeTrue())
			}
			summary, says := tc.out.Summary()
			if tc.summary == nil {
				g.Expect(says).To(BeFalse())
				return
			}
			g.Expect(says).To(BeTrue())
			g.Expect(summary).To(Equal(*tc.summary))
		})
	}
}
