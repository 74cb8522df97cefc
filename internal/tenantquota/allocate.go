// Package tenantquota splits a tenant-wide limit over the ResourceQuotas of
// the tenant's namespaces so that, whatever order the quota controller and
// admission see things in, the namespaces together can never admit more
// than the limit.
//
// The API server's quota admission checks a request against a quota's
// status.hard, and counts it into status.used with an optimistic lock on
// the quota: within one namespace that is exact. status.hard is copied from
// spec.hard later, by kube-controller-manager's quota controller. So what a
// namespace may still come to hold, at any instant, is
//
//	effective = max(status.hard, spec.hard, status.used)
//
// (status.hard now; spec.hard once the controller copies it; used when it
// is already above both). Allocate keeps Σ effective ≤ limit: it lowers a
// spec.hard at once (never a risk), and raises one only out of the slack,
// limit − Σ effective, counted before any of its own writes. A lowered
// quota thus frees budget only once the quota controller has copied it to
// status.hard, and the writes of one Allocate are safe in any subset and
// any order.
//
// The package knows nothing of Kubernetes clients: it works on integers, one
// resource at a time (Allocate), and on ResourceLists (Plan).
package tenantquota

// Unknown marks a value that is not there: a quota that does not exist or
// does not name the resource, a status the quota controller has not written.
const Unknown int64 = -1

// Quota is what is known of one namespace's ResourceQuota, for one resource.
// Values are whole units (milli-units for CPU); Unknown where absent.
type Quota struct {
	// Spec is spec.hard.
	Spec int64
	// Status is status.hard: what admission enforces now.
	Status int64
	// Used is status.used.
	Used int64
	// Cap is the per-namespace limit the tenant also sets (quota.hard);
	// Unknown for none.
	Cap int64
}

// effective is the most the namespace may come to hold: status.hard,
// spec.hard (status.hard once synced) or what it already uses, whichever is
// largest. Unknown counts as nothing: a quota whose status is not written
// yet enforces nothing, so the caller must keep anyone from creating in a
// namespace until its quota is counted.
func (q Quota) effective() int64 {
	return max(q.Status, q.Spec, q.Used, 0)
}

func (q Quota) used() int64 { return max(q.Used, 0) }

// Result is what Allocate decided for one resource.
type Result struct {
	// Hard is the new spec.hard of each namespace, in the order given.
	Hard []int64
	// Target is what each namespace would get once every lowered quota is
	// synced: its usage and its share of the remainder.
	Target []int64
	// Over says the namespaces together already use more than the limit:
	// every namespace is held at its usage.
	Over bool
	// Held says some namespace is below its target because the budget it
	// needs is still counted elsewhere (a lowered quota not yet synced).
	Held bool
}

// Allocate splits limit over the namespaces (given in name order). The
// target of a namespace is its usage plus an equal share of what the
// namespaces do not use (whole units; the first namespaces get one more
// while there are leftovers), capped by its per-namespace limit; what a
// capped namespace cannot take is split among the others. A target below
// the current spec.hard is written at once; one above it only as far as the
// slack allows, in name order.
func Allocate(limit int64, qs []Quota) Result {
	res := Result{Hard: make([]int64, len(qs)), Target: targets(limit, qs)}
	var used int64
	for _, q := range qs {
		used += q.used()
	}
	res.Over = used > limit
	slack := limit
	for _, q := range qs {
		slack -= q.effective()
	}
	for i, q := range qs {
		t := res.Target[i]
		if q.Spec != Unknown && t <= q.Spec {
			res.Hard[i] = t
			continue
		}
		// A raise: free up to what the namespace may hold anyway, then out
		// of the slack.
		e := q.effective()
		grant := min(t, e+max(slack, 0))
		if q.Spec != Unknown {
			grant = max(grant, q.Spec)
		}
		slack -= max(grant-e, 0)
		res.Hard[i] = grant
		if grant < t {
			res.Held = true
		}
	}
	return res
}

// targets are usage plus an equal share of the remainder, water-filled
// under the per-namespace caps; with usage at or over the limit, usage.
func targets(limit int64, qs []Quota) []int64 {
	out := make([]int64, len(qs))
	remainder := limit
	for i, q := range qs {
		out[i] = q.used()
		if q.Cap != Unknown {
			out[i] = min(out[i], q.Cap)
		}
		remainder -= q.used()
	}
	open := make([]int, 0, len(qs))
	for i, q := range qs {
		if q.Cap == Unknown || out[i] < q.Cap {
			open = append(open, i)
		}
	}
	for remainder > 0 && len(open) > 0 {
		base, extra := remainder/int64(len(open)), remainder%int64(len(open))
		next := open[:0:0]
		for k, i := range open {
			give := base
			if int64(k) < extra {
				give++
			}
			if c := qs[i].Cap; c != Unknown && out[i]+give >= c {
				give = c - out[i]
			} else {
				next = append(next, i)
			}
			out[i] += give
			remainder -= give
		}
		if len(next) == len(open) {
			break // nobody capped: all of the remainder is given
		}
		open = next
	}
	return out
}
