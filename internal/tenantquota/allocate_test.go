package tenantquota

import (
	"math/rand/v2"
	"testing"

	. "github.com/onsi/gomega"
)

const u = Unknown

func q(spec, status, used int64) Quota { return Quota{Spec: spec, Status: status, Used: used, Cap: u} }

func TestAllocate(t *testing.T) {
	cases := map[string]struct {
		limit  int64
		qs     []Quota
		hard   []int64
		target []int64
		over   bool
		held   bool
	}{
		"new namespaces share the limit, leftovers to the first": {
			limit: 7, qs: []Quota{q(u, u, u), q(u, u, u), q(u, u, u)},
			hard: []int64{3, 2, 2}, target: []int64{3, 2, 2},
		},
		"settled and unchanged: nothing moves": {
			limit: 6, qs: []Quota{q(3, 3, 1), q(3, 3, 2)},
			hard: []int64{3, 3}, target: []int64{3, 3},
		},
		"usage in one namespace: it gains, the other loses at once": {
			// used 2+0, remainder 4: targets 4 and 2. The raise waits for
			// the other's lowering to be synced.
			limit: 6, qs: []Quota{q(3, 3, 2), q(3, 3, 0)},
			hard: []int64{3, 2}, target: []int64{4, 2}, held: true,
		},
		"the lowering synced: the raise follows": {
			limit: 6, qs: []Quota{q(3, 3, 2), q(2, 2, 0)},
			hard: []int64{4, 2}, target: []int64{4, 2},
		},
		"a lowering written but not synced still counts at status.hard": {
			limit: 6, qs: []Quota{q(3, 3, 2), q(2, 3, 0)},
			hard: []int64{3, 2}, target: []int64{4, 2}, held: true,
		},
		"a raise not yet synced counts at spec.hard": {
			limit: 6, qs: []Quota{q(4, 3, 2), q(2, 2, 0), q(u, u, u)},
			// used 2, remainder 4 over 3: targets 2+2, 0+1, 0+1. Slack
			// 6-4-2-0 = 0: the new namespace starts at 0.
			hard: []int64{4, 1, 0}, target: []int64{4, 1, 1}, held: true,
		},
		"usage over the limit: everyone held at usage": {
			limit: 4, qs: []Quota{q(3, 3, 3), q(3, 3, 3)},
			hard: []int64{3, 3}, target: []int64{3, 3}, over: true,
		},
		"limit lowered under usage: lowered to usage, nothing raised": {
			limit: 2, qs: []Quota{q(5, 5, 1), q(5, 5, 3), q(u, u, u)},
			hard: []int64{1, 3, 0}, target: []int64{1, 3, 0}, over: true,
		},
		"a raise up to what status.hard already allows is free": {
			limit: 6, qs: []Quota{q(2, 5, 2), q(1, 1, 0)},
			// slack 6-5-1 = 0; targets 2+2=4, 0+2=2: the first may go to
			// 4 (under its status.hard 5), the second waits.
			hard: []int64{4, 1}, target: []int64{4, 2}, held: true,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			res := Allocate(tc.limit, tc.qs)
			g.Expect(res.Hard).To(Equal(tc.hard), "hard")
			g.Expect(res.Target).To(Equal(tc.target), "target")
			g.Expect(res.Over).To(Equal(tc.over), "over")
			g.Expect(res.Held).To(Equal(tc.held), "held")
		})
	}
}

func TestTargetsWaterFillUnderCaps(t *testing.T) {
	g := NewWithT(t)
	capped := func(used, limit int64) Quota { return Quota{Spec: u, Status: u, Used: used, Cap: limit} }
	// limit 12, caps 4: usage 3, 0, 0; remainder 9 → 3 each, the first
	// capped at 4 (takes 1), the 2 left over go to the others.
	g.Expect(targets(12, []Quota{capped(3, 4), capped(0, 4), capped(0, 4)})).To(Equal([]int64{4, 4, 4}))
	// The caps leave budget unused: it stays unallocated.
	g.Expect(targets(20, []Quota{capped(0, 4), capped(0, 4)})).To(Equal([]int64{4, 4}))
	// Usage over the cap (the cap was lowered): held at the cap.
	g.Expect(targets(20, []Quota{capped(6, 4), capped(0, 4)})).To(Equal([]int64{4, 4}))
}

// world is a tenant's quotas as the API server holds them, driven by
// admission, deletions, the quota controller and Trellis' reconciles, in a
// random order. It checks after every step that the namespaces together
// never hold more than the limit.
type world struct {
	t      *testing.T
	rnd    *rand.Rand
	limit  int64
	cap    int64
	ns     []simQuota
	cached []simQuota // the cache: each quota as last seen, possibly behind
	// refusedWithRoom counts admissions refused while the tenant had room.
	refusedWithRoom, admitted int
	writes, reconciles        int
	quiet                     bool
}

type simQuota struct {
	exists       bool
	version      int
	spec, status int64 // Unknown until created / synced
	used         int64 // status.used: what admission counted
	actual       int64 // what exists; used lags it after deletions
}

func (w *world) quota(s simQuota) Quota {
	if !s.exists {
		return Quota{Spec: u, Status: u, Used: u, Cap: w.cap}
	}
	used := u
	if s.status != u {
		used = s.used
	}
	return Quota{Spec: s.spec, Status: s.status, Used: used, Cap: w.cap}
}

func (w *world) total() (actual int64) {
	for _, s := range w.ns {
		actual += s.actual
	}
	return actual
}

func (w *world) check(step string) {
	w.t.Helper()
	var eff int64
	for _, s := range w.ns {
		if s.exists {
			eff += max(s.spec, s.status, s.used, 0)
		}
	}
	if w.total() > w.limit || eff > w.limit {
		w.t.Fatalf("after %s: actual %d, effective %d over the limit %d: %+v", step, w.total(), eff, w.limit, w.ns)
	}
}

// admit creates an object of size k in namespace i, as quota admission does:
// only against a counted quota (until then nobody is bound there).
func (w *world) admit(i int, k int64) {
	s := &w.ns[i]
	if !s.exists || s.status == u || s.used+k > s.status {
		if w.total()+k <= w.limit {
			w.refusedWithRoom++
		}
		return
	}
	s.used += k
	s.actual += k
	s.version++
	w.admitted++
}

func (w *world) remove(i int, k int64) {
	s := &w.ns[i]
	k = min(k, s.actual)
	s.actual -= k // status.used goes down only when the controller counts again
}

func (w *world) sync(i int) {
	s := &w.ns[i]
	if s.exists && (s.status != s.spec || s.used != s.actual) {
		s.status, s.used = s.spec, s.actual
		s.version++
	}
}

// observe moves the cache of one quota forward to what is stored now.
func (w *world) observe(i int) { w.cached[i] = w.ns[i] }

// reconcile is the controller: a plan from the cache; with a raise in it, a
// plan again from a live read; then each write, compare-and-swap on the
// version the plan saw, with the world moving between writes.
func (w *world) reconcile() {
	w.reconciles++
	view := append([]simQuota(nil), w.cached...)
	res := w.allocate(view)
	raises := false
	for i := range view {
		if res.Hard[i] > w.quota(view[i]).Spec {
			raises = true
		}
	}
	if raises {
		view = append([]simQuota(nil), w.ns...)
		res = w.allocate(view)
	}
	for _, i := range w.rnd.Perm(len(view)) {
		seen := view[i]
		if seen.exists && res.Hard[i] == seen.spec {
			continue
		}
		if !w.quiet {
			w.step() // the world moves between the writes of a round
		}
		s := &w.ns[i]
		switch {
		case !seen.exists && s.exists: // create refused: it exists
		case seen.exists && s.version != seen.version: // conflict
		case !seen.exists:
			*s = simQuota{exists: true, version: 1, spec: res.Hard[i], status: u}
			w.writes++
		default:
			s.spec = res.Hard[i]
			s.version++
			w.writes++
		}
		w.check("a write")
	}
}

func (w *world) allocate(view []simQuota) Result {
	qs := make([]Quota, len(view))
	for i, s := range view {
		qs[i] = w.quota(s)
	}
	return Allocate(w.limit, qs)
}

// step is one random event other than a reconcile.
func (w *world) step() {
	i := w.rnd.IntN(len(w.ns))
	switch w.rnd.IntN(6) {
	case 0, 1:
		w.admit(i, 1+w.rnd.Int64N(3))
	case 2:
		w.remove(i, 1+w.rnd.Int64N(2))
	case 3:
		w.sync(i)
	default:
		w.observe(i)
	}
	w.check("an event")
}

func TestAllocateNeverOvershoots(t *testing.T) {
	for seed := range uint64(400) {
		rnd := rand.New(rand.NewPCG(seed, 26))
		n := 1 + rnd.IntN(5)
		w := &world{t: t, rnd: rnd, limit: rnd.Int64N(20), cap: u, ns: make([]simQuota, n), cached: make([]simQuota, n)}
		if rnd.IntN(3) == 0 {
			w.cap = rnd.Int64N(10)
		}
		for i := range w.ns {
			w.ns[i].spec, w.ns[i].status = u, u
			w.cached[i] = w.ns[i]
		}
		for range 300 {
			if rnd.IntN(4) == 0 {
				w.reconcile()
			} else {
				w.step()
			}
		}
		// Quiet: the quota controller and the cache catch up, reconciles
		// run. Every namespace ends at its target.
		w.quiet = true
		for range 6 {
			for i := range w.ns {
				w.sync(i)
				w.observe(i)
			}
			w.reconcile()
		}
		for i := range w.ns {
			w.sync(i)
		}
		res := w.allocate(w.ns)
		for i, s := range w.ns {
			if !s.exists || s.spec != res.Target[i] || s.status != s.spec {
				t.Fatalf("seed %d: namespace %d not settled at its target %d: %+v", seed, i, res.Target[i], s)
			}
		}
		if w.admitted == 0 && w.limit > 3 && w.cap != 0 {
			t.Fatalf("seed %d: nothing was ever admitted under a limit of %d", seed, w.limit)
		}
	}
}
