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

// CountConflict counts a reconcile of controller that ended in a conflict
// and returns its requeue, after about ConflictRetry: outcome.Result ends
// every conflict with it. A conflict is the ordinary outcome of two
// writers, not a failure: returned as an error it would be logged as
// "Reconciler error" and counted in
// controller_runtime_reconcile_errors_total, which the
// TrellisReconcileErrors alert reads. controller is the name the
// controller is registered under, so both metrics carry the same label.
func CountConflict(controller string) ctrl.Result {
	conflicts.WithLabelValues(controller).Inc()
	return ctrl.Result{RequeueAfter: jitter.Duration(ConflictRetry, 0.1)}
}
