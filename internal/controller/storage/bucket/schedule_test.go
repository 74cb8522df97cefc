package bucket

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trellis-dev/trellis/internal/jitter"
)

// testClock is a clock the test moves by hand.
type testClock struct{ t time.Time }

// epochAligned is a whole number of days since the Unix epoch, so it is at
// phase 0 of every interval that divides a day (10s, 1m, 90s, 24h, ...).
var epochAligned = time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)

func newTestClock() *testClock { return &testClock{t: epochAligned} }

func (c *testClock) now() time.Time          { return c.t }
func (c *testClock) advance(d time.Duration) { c.t = c.t.Add(d) }
func (c *testClock) set(t time.Time)         { c.t = t }

func newTestSchedule(clock *testClock) *Schedule {
	s := NewSchedule()
	s.now = clock.now
	return s
}

// due reports whether the bucket's check is due now.
func due(s *Schedule, key types.NamespacedName, uid string, interval time.Duration) bool {
	return s.Wait(key, uid, interval) == 0
}

func bucketKey(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: "team-a", Name: name}
}

// expectAfter checks that next is d after now, within the schedule's ±2% jitter.
func expectAfter(g Gomega, now, next time.Time, d time.Duration, what string) {
	got := next.Sub(now)
	lo := time.Duration(float64(d) * 0.98)
	hi := time.Duration(float64(d) * 1.02)
	g.ExpectWithOffset(1, got).To(BeNumerically(">=", lo-time.Nanosecond), "%s: %v is not %v-2%%", what, got, d)
	g.ExpectWithOffset(1, got).To(BeNumerically("<=", hi+time.Nanosecond), "%s: %v is not %v+2%%", what, got, d)
}

// phaseDistance is how far t is from the bucket's phase in the period.
func phaseDistance(t time.Time, offset, interval time.Duration) time.Duration {
	d := (time.Duration(t.UnixNano())%interval - offset + interval) % interval
	return min(d, interval-d)
}

func TestScheduleFirstSeenIsPlacedOnItsPhase(t *testing.T) {
	tests := []struct {
		uid      string
		interval time.Duration
		// start is where in the period the bucket is first seen.
		start time.Duration
	}{
		{uid: "0b8a6c7e-1d2f-4a3b-9c4d-5e6f7a8b9c0d", interval: time.Minute},
		{uid: "f47ac10b-58cc-4372-a567-0e02b2c3d479", interval: 10 * time.Second},
		{uid: "6ba7b810-9dad-11d1-80b4-00c04fd430c8", interval: 24 * time.Hour},
		{uid: "x", interval: 90 * time.Second},
		{uid: "0b8a6c7e-1d2f-4a3b-9c4d-5e6f7a8b9c0d", interval: time.Minute, start: 17 * time.Second},
		{uid: "f47ac10b-58cc-4372-a567-0e02b2c3d479", interval: 10 * time.Second, start: 9 * time.Second},
		{uid: "6ba7b810-9dad-11d1-80b4-00c04fd430c8", interval: 24 * time.Hour, start: 23 * time.Hour},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%v/at %v", tt.uid, tt.interval, tt.start), func(t *testing.T) {
			g := NewWithT(t)
			clock := newTestClock()
			clock.advance(tt.start)
			start := clock.now()
			s := newTestSchedule(clock)
			key := bucketKey("b")
			offset := jitter.Offset(tt.uid, tt.interval)
			g.Expect(offset).To(BeNumerically(">", 0), "pick a uid whose offset is not 0")
			// Time from start to the bucket's phase in the period.
			untilPhase := (offset - tt.start%tt.interval + tt.interval) % tt.interval
			g.Expect(untilPhase).To(BeNumerically(">", 0), "pick a start that is not on the phase")

			wait := s.Wait(key, tt.uid, tt.interval)
			g.Expect(wait).To(BeNumerically(">", 0), "first seen: not due yet")
			next := s.next[key]
			expectAfter(g, start, next, untilPhase, "first seen")
			g.Expect(wait).To(Equal(next.Sub(start)), "Wait says how long until the check")
			g.Expect(s.Wait(key, tt.uid, tt.interval)).To(Equal(wait), "asking again does not move a placed bucket")

			// A second replica (or a restart) places the bucket on the same phase.
			other := newTestSchedule(clock)
			g.Expect(due(other, key, tt.uid, tt.interval)).To(BeFalse())
			expectAfter(g, start, other.next[key], untilPhase, "other replica")

			clock.set(next.Add(-time.Nanosecond))
			g.Expect(due(s, key, tt.uid, tt.interval)).To(BeFalse(), "just before its time")
			clock.set(next)
			g.Expect(due(s, key, tt.uid, tt.interval)).To(BeTrue(), "at its time")
			clock.set(next.Add(tt.interval))
			g.Expect(due(s, key, tt.uid, tt.interval)).To(BeTrue(), "still due until it is checked")
		})
	}
}

func TestScheduleCheckNow(t *testing.T) {
	g := NewWithT(t)
	clock := newTestClock()
	s := newTestSchedule(clock)
	const uid, interval = "f47ac10b-58cc-4372-a567-0e02b2c3d479", time.Minute
	key, other := bucketKey("b"), bucketKey("other")
	g.Expect(due(s, key, uid, interval)).To(BeFalse())
	g.Expect(due(s, other, uid, interval)).To(BeFalse())

	s.CheckNow(key)
	g.Expect(due(s, key, uid, interval)).To(BeTrue(), "a bucket event makes the check due at once")
	g.Expect(due(s, other, uid, interval)).To(BeFalse(), "another bucket is untouched")

	s.Checked(key, uid, interval)
	g.Expect(due(s, key, uid, interval)).To(BeFalse(), "checked: back on its phase")

	// A bucket not seen before can be asked for too.
	fresh := bucketKey("fresh")
	s.CheckNow(fresh)
	g.Expect(due(s, fresh, uid, interval)).To(BeTrue())
}

// Checked puts the next check on the bucket's phase, at least half an
// interval away, whenever the check happened.
func TestScheduleCheckedReturnsToThePhase(t *testing.T) {
	const interval = time.Minute
	tests := []struct {
		name string
		// at is when the check finished, relative to the bucket's phase.
		at   time.Duration
		want time.Duration
	}{
		{name: "on its phase", at: 0, want: time.Minute},
		{name: "a little late", at: 2 * time.Second, want: 58 * time.Second},
		{name: "late", at: 10 * time.Second, want: 50 * time.Second},
		{name: "just under half late", at: 29 * time.Second, want: 31 * time.Second},
		{name: "over half late skips a period", at: 31 * time.Second, want: 89 * time.Second},
		{name: "a little early skips a period", at: -time.Second, want: 61 * time.Second},
		{name: "early", at: -40 * time.Second, want: 40 * time.Second},
		{name: "periods later", at: 5*time.Minute + 10*time.Second, want: 50 * time.Second},
	}
	uids := []string{"0b8a6c7e-1d2f-4a3b-9c4d-5e6f7a8b9c0d", "f47ac10b-58cc-4372-a567-0e02b2c3d479", "x"}
	for _, tt := range tests {
		for _, uid := range uids {
			t.Run(tt.name+"/"+uid, func(t *testing.T) {
				g := NewWithT(t)
				clock := newTestClock()
				s := newTestSchedule(clock)
				key := bucketKey("b")
				offset := jitter.Offset(uid, interval)
				phase := clock.now().Add(offset)

				clock.set(phase.Add(tt.at))
				checkedAt := clock.now()
				s.Checked(key, uid, interval)
				next := s.next[key]

				expectAfter(g, checkedAt, next, tt.want, "next check")
				g.Expect(phaseDistance(next, offset, interval)).To(BeNumerically("<=", time.Duration(float64(tt.want)*0.02)+time.Nanosecond),
					"the next check is on the bucket's phase")
				lo := time.Duration(float64(tt.want) * 0.98)
				hi := time.Duration(float64(tt.want) * 1.02)
				clock.set(checkedAt.Add(lo - time.Millisecond))
				g.Expect(due(s, key, uid, interval)).To(BeFalse(), "before the next check")
				clock.set(checkedAt.Add(hi + time.Millisecond))
				g.Expect(due(s, key, uid, interval)).To(BeTrue(), "at the next check")
			})
		}
	}
}

func TestScheduleCheckedIsJittered(t *testing.T) {
	g := NewWithT(t)
	clock := newTestClock()
	s := newTestSchedule(clock)
	const uid, interval = "0b8a6c7e-1d2f-4a3b-9c4d-5e6f7a8b9c0d", time.Minute
	key := bucketKey("b")
	clock.advance(jitter.Offset(uid, interval)) // on its phase: the next check is an interval out
	distinct := map[time.Duration]bool{}
	var sum time.Duration
	const n = 200
	for range n {
		s.Checked(key, uid, interval)
		d := s.next[key].Sub(clock.now())
		expectAfter(g, clock.now(), s.next[key], interval, "next check")
		distinct[d] = true
		sum += d
	}
	g.Expect(len(distinct)).To(BeNumerically(">", n/2), "equal phases do not stay aligned")
	g.Expect(sum/n).To(BeNumerically("~", interval, interval/100), "the jitter is centred")
}

func TestScheduleForget(t *testing.T) {
	g := NewWithT(t)
	clock := newTestClock()
	s := newTestSchedule(clock)
	key, kept := bucketKey("gone"), bucketKey("kept")
	const uid, interval = "0b8a6c7e-1d2f-4a3b-9c4d-5e6f7a8b9c0d", time.Minute

	for _, k := range []types.NamespacedName{key, kept} {
		s.CheckNow(k)
	}
	g.Expect(due(s, key, uid, interval)).To(BeTrue())

	s.Forget(key)

	g.Expect(s.next).NotTo(HaveKey(key))
	g.Expect(due(s, kept, uid, interval)).To(BeTrue(), "another bucket is untouched")
	// Seen again, it is a new bucket: placed on its phase, not due at once.
	g.Expect(due(s, key, uid, interval)).To(BeFalse())
	expectAfter(g, clock.now(), s.next[key], jitter.Offset(uid, interval), "placed again")
	// Forgetting an unknown bucket is harmless.
	s.Forget(bucketKey("never-seen"))
}

// N buckets at interval T cost about N/T checks per second and never a burst,
// whether the manager just started (every bucket first seen at once) or every
// bucket was just checked at once (buckets created together, a store that came
// back): this is what keeps a thousand buckets cheap.
//
// A bucket's phase depends only on its UID (fixed here), but the ±2% jitter
// moves each check by up to a second or so, so a given second holds about a
// Poisson number of checks. With 1000 buckets (16.7/s) "at most twice the
// mean" (33) would then fail in about one run in a hundred by chance alone, so
// a second may hold the larger of twice the mean and mean + 6 standard
// deviations: 41/s for 1000 buckets, twice the mean (333/s) for 10000.
func TestScheduleSpreadsChecksEvenly(t *testing.T) {
	for _, tt := range []struct {
		buckets int
		// together: every bucket is checked at the start, as after an outage.
		together bool
	}{{1000, false}, {1000, true}, {10000, false}, {10000, true}} {
		name := fmt.Sprintf("%d buckets, restart", tt.buckets)
		if tt.together {
			name = fmt.Sprintf("%d buckets, checked together", tt.buckets)
		}
		t.Run(name, func(t *testing.T) {
			testScheduleSpread(t, tt.buckets, tt.together)
		})
	}
}

func testScheduleSpread(t *testing.T, buckets int, together bool) {
	g := NewWithT(t)
	const (
		interval = 60 * time.Second
		seconds  = 180
	)
	clock := newTestClock()
	clock.advance(12345 * time.Millisecond) // anywhere in the period
	start := clock.now()
	s := newTestSchedule(clock)

	rng := rand.New(rand.NewPCG(1, 2))
	keys := make([]types.NamespacedName, buckets)
	uids := make([]string, buckets)
	for i := range buckets {
		keys[i] = types.NamespacedName{Namespace: fmt.Sprintf("ns-%d", i%37), Name: fmt.Sprintf("bucket-%d", i)}
		uids[i] = fmt.Sprintf("%08x-%04x-4%03x-%04x-%012x",
			rng.Uint32(), rng.Uint32()&0xffff, rng.Uint32()&0xfff, 0x8000|rng.Uint32()&0x3fff, rng.Uint64()&0xffffffffffff)
	}
	if together {
		for i, key := range keys {
			s.CheckNow(key)
			g.Expect(due(s, key, uids[i], interval)).To(BeTrue())
			s.Checked(key, uids[i], interval)
		}
	}

	perSecond := make([]int, seconds)
	checks := make([]int, buckets)
	last := make([]int, buckets)
	for sec := range seconds {
		clock.set(start.Add(time.Duration(sec) * time.Second))
		for i, key := range keys {
			if !due(s, key, uids[i], interval) {
				continue
			}
			s.Checked(key, uids[i], interval)
			if checks[i] > 0 {
				g.Expect(sec-last[i]).To(BeNumerically(">=", 50), "bucket %d checked again too soon", i)
				g.Expect(sec-last[i]).To(BeNumerically("<=", 70), "bucket %d waited too long", i)
			} else {
				g.Expect(sec).To(BeNumerically("<=", 2*interval.Seconds()), "bucket %d first checked late", i)
			}
			perSecond[sec]++
			checks[i]++
			last[i] = sec
		}
	}

	want := float64(buckets) / interval.Seconds()
	bound := max(2*want, want+6*math.Sqrt(want))
	// Checks start at once after a restart, half an interval out after a
	// check of all (Checked keeps half an interval between checks).
	first := 1
	if together {
		first = 30
	}
	windows := []struct {
		name     string
		from, to int
	}{
		{"first interval", first, first + 60},
		{"second interval", first + 60, first + 120},
		{"rest", first + 120, seconds},
	}
	for _, w := range windows {
		total, peak := 0, 0
		for _, n := range perSecond[w.from:w.to] {
			total += n
			peak = max(peak, n)
		}
		mean := float64(total) / float64(w.to-w.from)
		t.Logf("%s: mean %.1f/s (want %.1f), peak %d/s (bound %.1f)", w.name, mean, want, peak, bound)
		g.Expect(mean).To(BeNumerically("~", want, want*0.1), w.name)
		g.Expect(float64(peak)).To(BeNumerically("<=", bound), w.name)
	}
	g.Expect(perSecond[0]).To(Equal(0), "nothing is due at the first sight of a bucket")
}
