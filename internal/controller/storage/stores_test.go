package storage

import (
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/trellis-dev/trellis/internal/s3"
)

// stubClient is an s3.Client the tests tell apart by id; its methods are never called.
type stubClient struct {
	s3.Client
	id int
}

// countingBuilder builds stubClients and counts how often it was asked.
type countingBuilder struct {
	calls int
	fail  error
	last  s3.Config
}

func (b *countingBuilder) build(cfg s3.Config) (s3.Client, error) {
	b.calls++
	b.last = cfg
	if b.fail != nil {
		return nil, b.fail
	}
	return &stubClient{id: b.calls}, nil
}

func newTestStores(clock *testClock) *Stores {
	s := NewStores()
	s.now = clock.now
	return s
}

func baseStoreConfig() s3.Config {
	return s3.Config{Endpoint: "http://127.0.0.1:9000", Region: "us-east-1", PathStyle: true,
		AccessKey: "access", SecretKey: "secret-0123456789"}
}

func TestStoresSetClientRebuildsOnlyOnChange(t *testing.T) {
	tests := []struct {
		name    string
		change  func(*s3.Config)
		rebuild bool
	}{
		{name: "same config", change: func(*s3.Config) {}, rebuild: false},
		{name: "secret key", change: func(c *s3.Config) { c.SecretKey = "rotated-secret" }, rebuild: true},
		{name: "access key", change: func(c *s3.Config) { c.AccessKey = "other" }, rebuild: true},
		{name: "endpoint", change: func(c *s3.Config) { c.Endpoint = "https://s3.example.com" }, rebuild: true},
		{name: "region", change: func(c *s3.Config) { c.Region = "eu-west-1" }, rebuild: true},
		{name: "path style", change: func(c *s3.Config) { c.PathStyle = false }, rebuild: true},
		// The separators keep moved bytes from colliding.
		{name: "key bytes moved", change: func(c *s3.Config) { c.AccessKey, c.SecretKey = "accesss", "ecret-0123456789" }, rebuild: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := newTestStores(newTestClock())
			b := &countingBuilder{}
			cfg := baseStoreConfig()

			first, err := s.SetClient("store-a", cfg, b.build)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(b.calls).To(Equal(1))
			again, err := s.SetClient("store-a", cfg, b.build)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(b.calls).To(Equal(1), "the same config reuses the client")
			g.Expect(again).To(BeIdenticalTo(first))

			changed := cfg
			tt.change(&changed)
			got, err := s.SetClient("store-a", changed, b.build)
			g.Expect(err).NotTo(HaveOccurred())
			if tt.rebuild {
				g.Expect(b.calls).To(Equal(2))
				g.Expect(b.last).To(Equal(changed))
				g.Expect(got).NotTo(BeIdenticalTo(first))
				g.Expect(got.(*stubClient).id).To(Equal(2))
			} else {
				g.Expect(b.calls).To(Equal(1))
				g.Expect(got).To(BeIdenticalTo(first))
			}
			g.Expect(s.View("store-a").Client).To(BeIdenticalTo(got))

			// And it is kept from then on.
			_, err = s.SetClient("store-a", changed, b.build)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(b.calls).To(Equal(map[bool]int{true: 2, false: 1}[tt.rebuild]))
		})
	}
}

func TestStoresSetClientPerStoreAndOnError(t *testing.T) {
	g := NewWithT(t)
	s := newTestStores(newTestClock())
	b := &countingBuilder{}
	cfg := baseStoreConfig()

	a, err := s.SetClient("store-a", cfg, b.build)
	g.Expect(err).NotTo(HaveOccurred())
	other, err := s.SetClient("store-b", cfg, b.build)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.calls).To(Equal(2), "each store has its own client")
	g.Expect(other).NotTo(BeIdenticalTo(a))

	// A failed build returns the error and keeps nothing of the new config.
	b.fail = errors.New("bad endpoint")
	rotated := cfg
	rotated.SecretKey = "rotated"
	got, err := s.SetClient("store-a", rotated, b.build)
	g.Expect(err).To(MatchError("bad endpoint"))
	g.Expect(got).To(BeNil())
	g.Expect(s.View("store-a").Client).To(BeIdenticalTo(a))

	b.fail = nil
	got, err = s.SetClient("store-a", rotated, b.build)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.calls).To(Equal(4), "the new config is built again after a failure")
	g.Expect(got).NotTo(BeIdenticalTo(a))

	// A fresh store whose first build fails has no client.
	b.fail = errors.New("no")
	_, err = s.SetClient("store-c", cfg, b.build)
	g.Expect(err).To(HaveOccurred())
	g.Expect(s.View("store-c").Client).To(BeNil())
}

func TestStoresViewOfUnknownStoreIsZero(t *testing.T) {
	g := NewWithT(t)
	s := newTestStores(newTestClock())
	g.Expect(s.View("nope")).To(Equal(StoreView{}))

	s.MarkDown("other", s3.ReasonStoreUnreachable, "down")
	g.Expect(s.View("nope")).To(Equal(StoreView{}))
	g.Expect(s.View("other")).NotTo(Equal(StoreView{}))
}

func TestStoresMarkDownBacksOff(t *testing.T) {
	g := NewWithT(t)
	clock := newTestClock()
	s := newTestStores(clock)
	const store = "store-a"

	want := []time.Duration{
		5 * time.Second, 10 * time.Second, 20 * time.Second, 40 * time.Second, 80 * time.Second,
		160 * time.Second, 5 * time.Minute, 5 * time.Minute, 5 * time.Minute, 5 * time.Minute,
	}
	for i, base := range want {
		msg := fmt.Sprintf("failure %d", i+1)
		wentDown := s.MarkDown(store, s3.ReasonStoreUnreachable, msg)
		g.Expect(wentDown).To(Equal(i == 0), "failure %d: wentDown only the first time", i+1)

		v := s.View(store)
		g.Expect(v.Checked).To(BeTrue())
		g.Expect(v.Up).To(BeFalse())
		g.Expect(v.Reason).To(Equal(s3.ReasonStoreUnreachable))
		g.Expect(v.Message).To(Equal(msg))
		expectWithin10Percent(g, v.NextProbe.Sub(clock.now()), base, msg)

		// The next probe happens when it is due.
		clock.set(v.NextProbe)
	}
}

func TestStoresMarkDownReasonIsTheLatest(t *testing.T) {
	g := NewWithT(t)
	s := newTestStores(newTestClock())
	g.Expect(s.MarkDown("s", s3.ReasonStoreUnreachable, "refused")).To(BeTrue())
	g.Expect(s.MarkDown("s", s3.ReasonAccessDenied, "denied")).To(BeFalse())
	v := s.View("s")
	g.Expect(v.Reason).To(Equal(s3.ReasonAccessDenied))
	g.Expect(v.Message).To(Equal("denied"))
}

func TestStoresMarkUp(t *testing.T) {
	tests := []struct {
		name     string
		before   func(s *Stores)
		cameBack bool
	}{
		{name: "never checked", before: func(*Stores) {}, cameBack: false},
		{name: "was up", before: func(s *Stores) { s.MarkUp("s") }, cameBack: false},
		{name: "was down", before: func(s *Stores) { s.MarkDown("s", s3.ReasonStoreUnreachable, "x") }, cameBack: true},
		{
			name: "was down a long time",
			before: func(s *Stores) {
				for range 20 {
					s.MarkDown("s", s3.ReasonStoreUnreachable, "x")
				}
			},
			cameBack: true,
		},
		{name: "down then up", before: func(s *Stores) { s.MarkDown("s", "StoreUnreachable", "x"); s.MarkUp("s") }, cameBack: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			clock := newTestClock()
			s := newTestStores(clock)
			tt.before(s)

			g.Expect(s.MarkUp("s")).To(Equal(tt.cameBack))

			v := s.View("s")
			g.Expect(v).To(Equal(StoreView{Checked: true, Up: true}))
			g.Expect(s.MarkUp("s")).To(BeFalse(), "up twice is not coming back")

			// The back-off starts over after the store came back.
			g.Expect(s.MarkDown("s", s3.ReasonStoreUnreachable, "again")).To(BeTrue(), "up then down went down")
			expectWithin10Percent(g, s.View("s").NextProbe.Sub(clock.now()), storeBackoffBase, "after coming back")
		})
	}
}

func TestStoresForget(t *testing.T) {
	g := NewWithT(t)
	s := newTestStores(newTestClock())
	b := &countingBuilder{}
	cfg := baseStoreConfig()
	_, err := s.SetClient("gone", cfg, b.build)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = s.SetClient("kept", cfg, b.build)
	g.Expect(err).NotTo(HaveOccurred())
	for range 3 {
		s.MarkDown("gone", s3.ReasonStoreUnreachable, "x")
	}
	s.MarkUp("kept")

	s.Forget("gone")

	g.Expect(s.View("gone")).To(Equal(StoreView{}))
	g.Expect(s.View("kept").Up).To(BeTrue())
	g.Expect(s.View("kept").Client).NotTo(BeNil())
	// Its client is built again, and a new failure starts the back-off over.
	_, err = s.SetClient("gone", cfg, b.build)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.calls).To(Equal(3))
	g.Expect(s.MarkDown("gone", s3.ReasonStoreUnreachable, "x")).To(BeTrue())
	expectWithin10Percent(g, s.View("gone").NextProbe.Sub(s.now()), storeBackoffBase, "after Forget")
	s.Forget("never-seen")
}

func TestBackoff(t *testing.T) {
	tests := []struct {
		failures int
		want     time.Duration
	}{
		{failures: 0, want: 5 * time.Second},
		{failures: 1, want: 5 * time.Second},
		{failures: 2, want: 10 * time.Second},
		{failures: 3, want: 20 * time.Second},
		{failures: 4, want: 40 * time.Second},
		{failures: 5, want: 80 * time.Second},
		{failures: 6, want: 160 * time.Second},
		{failures: 7, want: 5 * time.Minute},
		{failures: 8, want: 5 * time.Minute},
		{failures: 100, want: 5 * time.Minute},
		{failures: 1 << 40, want: 5 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.failures), func(t *testing.T) {
			g := NewWithT(t)
			distinct := map[time.Duration]bool{}
			for range 200 {
				d := backoff(tt.failures)
				expectWithin10Percent(g, d, tt.want, "backoff")
				distinct[d] = true
			}
			g.Expect(len(distinct)).To(BeNumerically(">", 100), "the back-off is jittered")
		})
	}
}

func expectWithin10Percent(g Gomega, got, want time.Duration, what string) {
	lo := time.Duration(float64(want) * 0.9)
	hi := time.Duration(float64(want) * 1.1)
	g.ExpectWithOffset(1, got).To(BeNumerically(">=", lo-time.Nanosecond), "%s: %v below %v-10%%", what, got, want)
	g.ExpectWithOffset(1, got).To(BeNumerically("<=", hi+time.Nanosecond), "%s: %v above %v+10%%", what, got, want)
}
