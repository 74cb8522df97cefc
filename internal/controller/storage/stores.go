package storage

import (
	"crypto/sha256"
	"sync"
	"time"

	"github.com/trellis-dev/trellis/internal/jitter"
	"github.com/trellis-dev/trellis/internal/s3"
)

// Back-off of the store-level check while a store is down.
const (
	storeBackoffBase = 5 * time.Second
	storeBackoffMax  = 5 * time.Minute
)

// Stores is what the manager knows of each ObjectStore: a client built from
// its current credentials, and whether it answers. It lets one store-level
// check stand for all of a store's buckets: while a store is down, bucket
// reconciles read its state here instead of each sending requests to it.
type Stores struct {
	mu    sync.Mutex
	now   func() time.Time
	state map[string]*storeState
}

type storeState struct {
	client    s3.Client
	configSum [32]byte // of endpoint, region, path style and keys; never the keys themselves
	// checked is false until the first store-level check finished.
	checked   bool
	up        bool
	reason    s3.Reason
	message   string
	failures  int
	nextProbe time.Time
}

// StoreView is a copy of a store's state for one reconcile.
type StoreView struct {
	Client    s3.Client
	Checked   bool
	Up        bool
	Reason    s3.Reason
	Message   string
	NextProbe time.Time
}

// NewStores returns an empty tracker.
func NewStores() *Stores {
	return &Stores{now: time.Now, state: map[string]*storeState{}}
}

// SetClient keeps the store's client, rebuilding it only when the
// configuration (including credentials) changed.
func (s *Stores) SetClient(store string, cfg s3.Config, build func(s3.Config) (s3.Client, error)) (s3.Client, error) {
	sum := sha256.Sum256([]byte(cfg.Endpoint + "\x00" + cfg.Region + "\x00" + boolString(cfg.PathStyle) + "\x00" + cfg.AccessKey + "\x00" + cfg.SecretKey))
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.get(store)
	if st.client != nil && st.configSum == sum {
		return st.client, nil
	}
	c, err := build(cfg)
	if err != nil {
		return nil, err
	}
	st.client, st.configSum = c, sum
	return c, nil
}

// View returns the store's state.
func (s *Stores) View(store string) StoreView {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.state[store]
	if !ok {
		return StoreView{}
	}
	return StoreView{Client: st.client, Checked: st.checked, Up: st.up, Reason: st.reason, Message: st.message, NextProbe: st.nextProbe}
}

// MarkUp records a successful check; it reports whether the store was down before.
func (s *Stores) MarkUp(store string) (cameBack bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.get(store)
	cameBack = st.checked && !st.up
	st.checked, st.up, st.reason, st.message, st.failures, st.nextProbe = true, true, "", "", 0, time.Time{}
	return cameBack
}

// MarkDown records a failed check and schedules the next store-level probe
// with exponential back-off; it reports whether the store was up before.
func (s *Stores) MarkDown(store string, reason s3.Reason, message string) (wentDown bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.get(store)
	wentDown = !st.checked || st.up
	st.checked, st.up, st.reason, st.message = true, false, reason, message
	st.failures++
	st.nextProbe = s.now().Add(backoff(st.failures))
	return wentDown
}

// Forget drops a deleted store.
func (s *Stores) Forget(store string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.state, store)
}

func (s *Stores) get(store string) *storeState {
	st, ok := s.state[store]
	if !ok {
		st = &storeState{}
		s.state[store] = st
	}
	return st
}

// backoff is base·2^(n-1), capped, with ±10% jitter.
func backoff(failures int) time.Duration {
	d := storeBackoffBase
	for i := 1; i < failures && d < storeBackoffMax; i++ {
		d *= 2
	}
	return jitter.Duration(min(d, storeBackoffMax), 0.1)
}

func boolString(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
