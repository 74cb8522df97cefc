package apierr

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/trellis-dev/trellis/internal/jitter"
)

// conflicts counts the reconciles that ended in a conflict (CountConflict).
var conflicts = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "trellis_reconcile_conflicts_total",
	Help: "Reconciles that ended in a conflict (an object changed since it was read) and were requeued without an error, by controller.",
}, []string{"controller"})

func init() {
	metrics.Registry.MustRegister(conflicts)
}

// ConflictRetry is how soon a reconcile that ended in a conflict runs again
// (±10%): about as long as the cache takes to see the write that won, which
// the next attempt must build on. An event about that write runs it sooner.
const ConflictRetry = 100 * time.Millisecond

// RequeueConflict turns an error of class Conflict (a conflict, wrapped or
// joined to nothing but conflicts) into a requeue after ConflictRetry with no
// error, and counts it in trellis_reconcile_conflicts_total{controller}. A
// Reconcile defers it first thing, with its named results. A conflict is the
// ordinary outcome of two writers, not a failure: returned as an error it
// would be logged as "Reconciler error" and counted in
// controller_runtime_reconcile_errors_total, which the TrellisReconcileErrors
// alert reads. Any other error is left as it is. controller is the name the
// controller is registered under, so both metrics carry the same label.
func RequeueConflict(controller string, result *ctrl.Result, err *error) {
	if Classify(*err) != Conflict {
		return
	}
	*result, *err = CountConflict(controller), nil
}

// CountConflict counts a reconcile of controller that ended in a conflict
// and returns its requeue, after about ConflictRetry. RequeueConflict and
// outcome.Result both end a conflict with it.
func CountConflict(controller string) ctrl.Result {
	conflicts.WithLabelValues(controller).Inc()
	return ctrl.Result{RequeueAfter: jitter.Duration(ConflictRetry, 0.1)}
}
