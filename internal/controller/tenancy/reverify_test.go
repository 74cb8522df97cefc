package tenancy

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
)

// The Reverifier is added to the manager as a leader-only runnable.
var (
	_ manager.Runnable               = &Reverifier{}
	_ manager.LeaderElectionRunnable = &Reverifier{}
)

type tenantEvent = event.TypedGenericEvent[*tenancyv1.Tenant]

// reverifyTenant is a Tenant whose Ready condition has the given status.
func reverifyTenant(name string, ready bool) *tenancyv1.Tenant {
	t := unitTenant(name, "uid-"+name, name+"-", "dev")
	conditions.Set(&t.Status.Conditions, 1, conditions.Ready, ready, "Test", "")
	return t
}

// reverifyReader is a fake cache with the Ready index the manager registers.
func reverifyReader(t *testing.T, tenants ...*tenancyv1.Tenant) client.WithWatch {
	t.Helper()
	s := runtime.NewScheme()
	if err := tenancyv1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	objs := make([]client.Object, 0, len(tenants))
	for _, tn := range tenants {
		objs = append(objs, tn)
	}
	return fake.NewClientBuilder().WithScheme(s).WithObjects(objs...).
		WithIndex(&tenancyv1.Tenant{}, tenantReadyIndex, func(o client.Object) []string {
			return []string{readyValue(o.(*tenancyv1.Tenant))}
		}).Build()
}

// startReverifier runs r.Start in the background; the returned channel gets its result.
// Its log is discarded: the list errors some tests provoke are expected.
func startReverifier(r *Reverifier) (context.CancelFunc, <-chan error) {
	quiet := log.IntoContext(context.Background(), log.Log.WithSink(log.NullLogSink{}))
	ctx, cancel := context.WithCancel(quiet)
	done := make(chan error, 1)
	go func() { done <- r.Start(ctx) }()
	return cancel, done
}

// stopReverifier cancels and expects Start to return nil within 200ms.
func stopReverifier(g Gomega, cancel context.CancelFunc, done <-chan error) {
	cancel()
	g.Eventually(done, 200*time.Millisecond, 5*time.Millisecond).Should(Receive(BeNil()), "Start did not return promptly after cancel")
}

type timedEvent struct {
	at   time.Time
	name string
}

// collect reads events until d has passed.
func collect(events <-chan tenantEvent, d time.Duration) []timedEvent {
	var got []timedEvent
	deadline := time.After(d)
	for {
		select {
		case e := <-events:
			got = append(got, timedEvent{at: time.Now(), name: e.Object.GetName()})
		case <-deadline:
			return got
		}
	}
}

func TestReverifierNeedsLeaderElection(t *testing.T) {
	g := NewWithT(t)
	g.Expect((&Reverifier{}).NeedLeaderElection()).To(BeTrue())
}

func TestReverifierSendsReadyTenantsSpreadOverInterval(t *testing.T) {
	g := NewWithT(t)
	const interval = 300 * time.Millisecond
	r := &Reverifier{
		Reader: reverifyReader(t,
			reverifyTenant("alpha", true), reverifyTenant("bravo", true),
			reverifyTenant("charlie", true), reverifyTenant("broken", false)),
		Interval: interval,
		Events:   make(chan tenantEvent),
	}
	start := time.Now()
	cancel, done := startReverifier(r)
	defer cancel()

	got := collect(r.Events, time.Second)
	stopReverifier(g, cancel, done)

	counts := map[string]int{}
	for _, e := range got {
		counts[e.name]++
	}
	g.Expect(counts).NotTo(HaveKey("broken"), "a tenant that is not Ready is never re-queued")
	g.Expect(counts).To(HaveKeyWithValue("alpha", BeNumerically(">=", 2)))
	g.Expect(counts).To(HaveKeyWithValue("bravo", BeNumerically(">=", 2)))
	g.Expect(counts).To(HaveKeyWithValue("charlie", BeNumerically(">=", 2)))
	g.Expect(counts).To(HaveLen(3))

	// About Interval/3 between sends: ~3 passes of 3 in a second, not bursts.
	g.Expect(len(got)).To(BeNumerically(">=", 7), "events: %v", got)
	g.Expect(len(got)).To(BeNumerically("<=", 12), "events: %v", got)
	g.Expect(got[0].at.Sub(start)).To(BeNumerically(">=", 30*time.Millisecond), "the first send waits its slot")
	for i := 1; i < len(got); i++ {
		gap := got[i].at.Sub(got[i-1].at)
		g.Expect(gap).To(BeNumerically(">=", 30*time.Millisecond), "gap before event %d: %v", i, got)
		g.Expect(gap).To(BeNumerically("<=", 250*time.Millisecond), "gap before event %d: %v", i, got)
	}
	mean := got[len(got)-1].at.Sub(got[0].at) / time.Duration(len(got)-1)
	g.Expect(mean).To(BeNumerically("~", interval/3, 35*time.Millisecond))

	// Every pass covers every Ready tenant once, so counts stay level.
	lo, hi := len(got), 0
	for _, c := range counts {
		lo, hi = min(lo, c), max(hi, c)
	}
	g.Expect(hi-lo).To(BeNumerically("<=", 1), "counts: %v", counts)
}

func TestReverifierCancelWhileNobodyReads(t *testing.T) {
	g := NewWithT(t)
	r := &Reverifier{
		Reader:   reverifyReader(t, reverifyTenant("alpha", true), reverifyTenant("bravo", true)),
		Interval: 20 * time.Millisecond,
		Events:   make(chan tenantEvent), // unbuffered and never read
	}
	cancel, done := startReverifier(r)
	defer cancel()

	// Long past the first slot (10ms), so Start is blocked on the send.
	g.Consistently(done, 150*time.Millisecond, 10*time.Millisecond).ShouldNot(Receive(), "Start returned before cancel")
	stopReverifier(g, cancel, done)
}

func TestReverifierCancelWhileWaiting(t *testing.T) {
	g := NewWithT(t)
	r := &Reverifier{
		Reader:   reverifyReader(t, reverifyTenant("alpha", true)),
		Interval: time.Hour,
		Events:   make(chan tenantEvent),
	}
	cancel, done := startReverifier(r)
	defer cancel()

	g.Consistently(r.Events, 100*time.Millisecond, 10*time.Millisecond).ShouldNot(Receive())
	g.Expect(done).NotTo(Receive())
	stopReverifier(g, cancel, done)
}

func TestReverifierWithoutTenants(t *testing.T) {
	for name, tenants := range map[string][]*tenancyv1.Tenant{
		"none at all":   nil,
		"none is Ready": {reverifyTenant("broken", false), reverifyTenant("fresh", false)},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := &Reverifier{Reader: reverifyReader(t, tenants...), Interval: 50 * time.Millisecond, Events: make(chan tenantEvent)}
			cancel, done := startReverifier(r)
			defer cancel()

			g.Consistently(r.Events, 250*time.Millisecond, 5*time.Millisecond).ShouldNot(Receive())
			g.Expect(done).NotTo(Receive(), "Start keeps waiting for tenants")
			stopReverifier(g, cancel, done)
		})
	}
}

// countingReader counts List calls and can fail them.
type countingReader struct {
	client.Reader
	lists atomic.Int32
	fail  bool
}

func (c *countingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.lists.Add(1)
	if c.fail {
		return context.DeadlineExceeded
	}
	return c.Reader.List(ctx, list, opts...)
}

func TestReverifierWaitsAnIntervalBetweenEmptyLists(t *testing.T) {
	for name, fail := range map[string]bool{"empty": false, "list error": true} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			reader := &countingReader{Reader: reverifyReader(t), fail: fail}
			r := &Reverifier{Reader: reader, Interval: 100 * time.Millisecond, Events: make(chan tenantEvent)}
			cancel, done := startReverifier(r)
			defer cancel()

			g.Consistently(r.Events, 350*time.Millisecond, 5*time.Millisecond).ShouldNot(Receive())
			stopReverifier(g, cancel, done)
			// One list at start and one per (jittered) interval: no busy loop.
			g.Expect(reader.lists.Load()).To(BeNumerically(">=", 3))
			g.Expect(reader.lists.Load()).To(BeNumerically("<=", 5))
		})
	}
}

func TestReverifierListsOnlyReadyTenants(t *testing.T) {
	g := NewWithT(t)
	reader := reverifyReader(t, reverifyTenant("alpha", true), reverifyTenant("broken", false))
	list := &tenancyv1.TenantList{}
	g.Expect(reader.List(context.Background(), list, client.MatchingFields{tenantReadyIndex: "True"})).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1))
	g.Expect(list.Items[0].Name).To(Equal("alpha"))
}

func TestReverifierPicksUpNewlyReadyTenants(t *testing.T) {
	g := NewWithT(t)
	reader := reverifyReader(t, reverifyTenant("alpha", true), reverifyTenant("late", false))
	r := &Reverifier{Reader: reader, Interval: 100 * time.Millisecond, Events: make(chan tenantEvent)}
	cancel, done := startReverifier(r)
	defer cancel()

	first := collect(r.Events, 250*time.Millisecond)
	g.Expect(first).NotTo(BeEmpty())
	for _, e := range first {
		g.Expect(e.name).To(Equal("alpha"))
	}

	late := &tenancyv1.Tenant{}
	g.Expect(reader.Get(context.Background(), client.ObjectKey{Name: "late"}, late)).To(Succeed())
	conditions.Set(&late.Status.Conditions, late.Generation, conditions.Ready, true, ReasonReady, "")
	g.Expect(reader.Update(context.Background(), late)).To(Succeed())

	names := map[string]bool{}
	for _, e := range collect(r.Events, 400*time.Millisecond) {
		names[e.name] = true
	}
	g.Expect(names).To(Equal(map[string]bool{"alpha": true, "late": true}))
	stopReverifier(g, cancel, done)
}
