package bucket

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/trellis-dev/trellis/internal/jitter"
)

// Schedule keeps, in memory only, when each bucket's next health check is
// due, so a thousand healthy buckets cost no API writes for their timing.
// Every bucket has a stable phase in its interval (a hash of its UID): its
// checks fall there, so N buckets at interval T give about N/T checks per
// second, whether they were created together or the manager just restarted.
// The reconciler asks it how long to wait and returns that as RequeueAfter.
type Schedule struct {
	mu   sync.Mutex
	now  func() time.Time
	next map[types.NamespacedName]time.Time
}

// NewSchedule returns an empty schedule.
func NewSchedule() *Schedule {
	return &Schedule{now: time.Now, next: map[types.NamespacedName]time.Time{}}
}

// Wait returns how long until the bucket's check is due (0: now). A bucket
// the schedule has not seen yet (new, or after a restart) is first due at its
// phase, not at once, so a restart does not bunch every check together.
func (s *Schedule) Wait(key types.NamespacedName, uid string, interval time.Duration) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	next, ok := s.next[key]
	if !ok {
		next = nextOnPhase(now, jitter.Offset(uid, interval), interval, 0)
		s.next[key] = next
	}
	return max(next.Sub(now), 0)
}

// CheckNow makes the bucket due at once (a bucket event asked for it).
func (s *Schedule) CheckNow(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next[key] = s.now()
}

// Checked records a finished check. The next one falls on the bucket's own
// phase in the period (its stable offset), at least half an interval away, so
// buckets created together, or checked together after an outage or an event,
// spread out again instead of staying bunched.
func (s *Schedule) Checked(key types.NamespacedName, uid string, interval time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next[key] = nextOnPhase(s.now(), jitter.Offset(uid, interval), interval, interval/2)
}

// nextOnPhase is the first time at least minGap after now whose position in
// the period is offset (±2% jitter, so equal offsets do not stay aligned).
func nextOnPhase(now time.Time, offset, interval, minGap time.Duration) time.Time {
	d := (offset - time.Duration(now.UnixNano())%interval + interval) % interval
	for d < minGap {
		d += interval
	}
	return now.Add(jitter.Duration(d, 0.02))
}

// Forget drops a deleted bucket. When none is left, the map is replaced: a
// Go map keeps the room it grew to when its keys are deleted.
func (s *Schedule) Forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.next, key)
	if len(s.next) == 0 {
		s.next = map[types.NamespacedName]time.Time{}
	}
}

// HeldIn is how many buckets in the namespaces have a check time kept.
func (s *Schedule) HeldIn(namespaces map[string]bool) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for key := range s.next {
		if namespaces[key.Namespace] {
			n++
		}
	}
	return n
}
