package storage

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
type Schedule struct {
	mu      sync.Mutex
	now     func() time.Time
	next    map[types.NamespacedName]time.Time
	pending map[types.NamespacedName]bool
}

// NewSchedule returns an empty schedule.
func NewSchedule() *Schedule {
	return &Schedule{now: time.Now, next: map[types.NamespacedName]time.Time{}, pending: map[types.NamespacedName]bool{}}
}

// Due reports whether the bucket's check is due now, and if so marks it
// pending (for the reconcile to take) and pushes its next time a full interval
// out, so the next ticks do not enqueue it again before the check is done.
func (s *Schedule) Due(key types.NamespacedName, uid string, interval time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	next, ok := s.next[key]
	if !ok {
		s.next[key] = nextOnPhase(now, jitter.Offset(uid, interval), interval, 0)
		return false
	}
	if now.Before(next) {
		return false
	}
	s.next[key] = now.Add(interval)
	s.pending[key] = true
	return true
}

// MarkPending asks for a check at the next reconcile (a bucket event, a store
// that came back).
func (s *Schedule) MarkPending(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending[key] = true
}

// Take reports whether a check was asked for, and clears the request. A
// bucket the schedule has not seen yet gets its spread offset.
func (s *Schedule) Take(key types.NamespacedName, uid string, interval time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.next[key]; !ok {
		s.next[key] = nextOnPhase(s.now(), jitter.Offset(uid, interval), interval, 0)
	}
	p := s.pending[key]
	delete(s.pending, key)
	return p
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

// Forget drops a deleted bucket.
func (s *Schedule) Forget(key types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.next, key)
	delete(s.pending, key)
}
