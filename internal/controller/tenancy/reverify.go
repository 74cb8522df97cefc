package tenancy

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/jitter"
)

// Reverifier is the seed's external event source, done so it scales and stops
// cleanly: it re-queues every Ready Tenant about once per Interval, spreading
// them evenly over the interval (N tenants cost N/Interval reconciles a second,
// not N at once), with jitter. It runs only on the leader.
type Reverifier struct {
	// Reader lists Tenants from the cache through the Ready index.
	Reader   client.Reader
	Interval time.Duration
	// Events feeds the controller's source.Channel.
	Events chan event.TypedGenericEvent[*tenancyv1.Tenant]
}

// NeedLeaderElection keeps non-leaders from re-queuing work they will not do.
func (r *Reverifier) NeedLeaderElection() bool { return true }

// Start runs until ctx ends; every wait and every send also watches ctx, so it
// never holds up shutdown.
func (r *Reverifier) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithName("tenant-reverifier")
	for {
		pass := jitter.Duration(r.Interval, 0.1)
		list := &tenancyv1.TenantList{}
		if err := r.Reader.List(ctx, list, client.MatchingFields{tenantReadyIndex: "True"}); err != nil {
			logger.Error(err, "listing Ready tenants")
		}
		if len(list.Items) == 0 {
			if !sleep(ctx, pass) {
				return nil
			}
			continue
		}
		gap := pass / time.Duration(len(list.Items))
		for i := range list.Items {
			if !sleep(ctx, gap) {
				return nil
			}
			select {
			case r.Events <- event.TypedGenericEvent[*tenancyv1.Tenant]{Object: &list.Items[i]}:
			case <-ctx.Done():
				return nil
			}
		}
	}
}

// sleep waits d or until ctx ends; it reports whether to go on.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
