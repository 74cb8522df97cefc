package setup

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func request(name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: name}}
}

func TestDefaultRateLimit(t *testing.T) {
	g := NewWithT(t)
	g.Expect(DefaultRateLimit).To(Equal(RateLimit{
		BaseDelay: 5 * time.Millisecond,
		MaxDelay:  1000 * time.Second,
		QPS:       10,
		Burst:     100,
	}))
	g.Expect(DefaultRateLimit.Validate()).To(Succeed())
}

func TestRateLimitValidate(t *testing.T) {
	valid := RateLimit{BaseDelay: 5 * time.Millisecond, MaxDelay: time.Second, QPS: 10, Burst: 100}
	tests := []struct {
		name    string
		mutate  func(r *RateLimit)
		wantErr string // substring; empty means valid
	}{
		{name: "valid", mutate: func(*RateLimit) {}},
		{name: "max equals base", mutate: func(r *RateLimit) { r.MaxDelay = r.BaseDelay }},
		{name: "burst one", mutate: func(r *RateLimit) { r.Burst = 1 }},
		{name: "fractional qps", mutate: func(r *RateLimit) { r.QPS = 0.1 }},
		{name: "base delay zero", mutate: func(r *RateLimit) { r.BaseDelay = 0 }, wantErr: "base delay must be positive, got 0s"},
		{name: "base delay negative", mutate: func(r *RateLimit) { r.BaseDelay = -time.Millisecond }, wantErr: "base delay must be positive, got -1ms"},
		{name: "max below base", mutate: func(r *RateLimit) { r.MaxDelay = time.Millisecond }, wantErr: "max delay 1ms is below its base delay 5ms"},
		{name: "max zero", mutate: func(r *RateLimit) { r.MaxDelay = 0 }, wantErr: "is below its base delay"},
		{name: "qps zero", mutate: func(r *RateLimit) { r.QPS = 0 }, wantErr: "QPS must be positive, got 0"},
		{name: "qps negative", mutate: func(r *RateLimit) { r.QPS = -1.5 }, wantErr: "QPS must be positive, got -1.5"},
		{name: "burst zero", mutate: func(r *RateLimit) { r.Burst = 0 }, wantErr: "burst must be at least 1, got 0"},
		{name: "burst negative", mutate: func(r *RateLimit) { r.Burst = -3 }, wantErr: "burst must be at least 1, got -3"},
		{name: "zero value", mutate: func(r *RateLimit) { *r = RateLimit{} }, wantErr: "base delay must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r := valid
			tt.mutate(&r)
			err := r.Validate()
			if tt.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
		})
	}
}

func TestLimiterBacksOffPerItem(t *testing.T) {
	g := NewWithT(t)
	lim := DefaultRateLimit.Limiter()
	a, b := request("a"), request("b")

	// The burst of 100 covers these few calls, so the per-item back-off decides.
	for i, want := range []time.Duration{5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond} {
		g.Expect(lim.When(a)).To(Equal(want), "failure %d of a", i+1)
	}
	g.Expect(lim.NumRequeues(a)).To(Equal(4))

	// Another object starts at the base delay: back-off is per item.
	g.Expect(lim.When(b)).To(Equal(5 * time.Millisecond))
	g.Expect(lim.NumRequeues(b)).To(Equal(1))

	// Forget resets the item's back-off and leaves the other one alone.
	lim.Forget(a)
	g.Expect(lim.NumRequeues(a)).To(Equal(0))
	g.Expect(lim.When(a)).To(Equal(5 * time.Millisecond))
	g.Expect(lim.When(b)).To(Equal(10 * time.Millisecond))
}

func TestLimiterCapsAtMaxDelay(t *testing.T) {
	g := NewWithT(t)
	lim := RateLimit{BaseDelay: 5 * time.Millisecond, MaxDelay: 20 * time.Millisecond, QPS: 100, Burst: 100}.Limiter()
	item := request("a")

	got := make([]time.Duration, 0, 6)
	for range 6 {
		got = append(got, lim.When(item))
	}
	g.Expect(got).To(Equal([]time.Duration{
		5 * time.Millisecond, 10 * time.Millisecond, 20 * time.Millisecond,
		20 * time.Millisecond, 20 * time.Millisecond, 20 * time.Millisecond,
	}))
}

func TestLimiterOverallBucket(t *testing.T) {
	g := NewWithT(t)
	lim := RateLimit{BaseDelay: time.Millisecond, MaxDelay: time.Second, QPS: 1, Burst: 1}.Limiter()

	// The first object takes the only token: only its back-off applies.
	g.Expect(lim.When(request("a"))).To(Equal(time.Millisecond))

	// A second, distinct object has no back-off yet but must wait for the bucket (~1s at 1 QPS).
	d := lim.When(request("b"))
	g.Expect(d).To(BeNumerically(">", 500*time.Millisecond))
	g.Expect(d).To(BeNumerically("<=", time.Second))

	// And a third waits behind it.
	g.Expect(lim.When(request("c"))).To(BeNumerically(">", time.Second))
}

func TestLimiterBurstAllowsDistinctItemsWithoutBucketDelay(t *testing.T) {
	g := NewWithT(t)
	lim := RateLimit{BaseDelay: time.Millisecond, MaxDelay: time.Second, QPS: 1, Burst: 3}.Limiter()

	for _, name := range []string{"a", "b", "c"} {
		g.Expect(lim.When(request(name))).To(Equal(time.Millisecond), name)
	}
	g.Expect(lim.When(request("d"))).To(BeNumerically(">", 500*time.Millisecond))
}

func TestLimiterIsFreshEachCall(t *testing.T) {
	g := NewWithT(t)
	rl := DefaultRateLimit
	first := rl.Limiter()
	for range 3 {
		first.When(request("a"))
	}
	// Each controller gets its own limiter: no shared back-off state.
	g.Expect(rl.Limiter().When(request("a"))).To(Equal(5 * time.Millisecond))
}

func TestOptionsControllerOptions(t *testing.T) {
	g := NewWithT(t)
	o := Options{
		MaxConcurrentReconciles: 3,
		RateLimit:               RateLimit{BaseDelay: 7 * time.Millisecond, MaxDelay: time.Second, QPS: 10, Burst: 10},
		Namespace:               "ns",
		ViewerImage:             "img",
	}

	co := o.ControllerOptions()

	g.Expect(co.MaxConcurrentReconciles).To(Equal(3))
	g.Expect(co.RateLimiter).NotTo(BeNil())
	// The limiter is built from o.RateLimit.
	g.Expect(co.RateLimiter.When(request("a"))).To(Equal(7 * time.Millisecond))
	g.Expect(co.RateLimiter.When(request("a"))).To(Equal(14 * time.Millisecond))
}

func TestOptionsServes(t *testing.T) {
	route := schema.GroupVersionKind{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "HTTPRoute"}
	if (Options{}).Serves(route) {
		t.Error("nothing is served unless the manager found it")
	}
	o := Options{Served: []schema.GroupVersionKind{route}}
	if !o.Serves(route) {
		t.Error("a served type is not reported")
	}
	if o.Serves(schema.GroupVersionKind{Group: "gateway.networking.k8s.io", Version: "v1beta1", Kind: "HTTPRoute"}) {
		t.Error("another version of a served type is reported served")
	}
}
