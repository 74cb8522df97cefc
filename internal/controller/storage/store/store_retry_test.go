package store

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/storage/storagetest"
)

func TestStoreRetry(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := map[string]struct {
		ready *metav1.Condition
		want  time.Duration
	}{
		"never checked":     {want: 5 * time.Second},
		"just went down":    {ready: &metav1.Condition{Status: metav1.ConditionFalse, LastTransitionTime: metav1.NewTime(now)}, want: 5 * time.Second},
		"down 3 s":          {ready: &metav1.Condition{Status: metav1.ConditionFalse, LastTransitionTime: metav1.NewTime(now.Add(-3 * time.Second))}, want: 5 * time.Second},
		"down 40 s":         {ready: &metav1.Condition{Status: metav1.ConditionFalse, LastTransitionTime: metav1.NewTime(now.Add(-40 * time.Second))}, want: 40 * time.Second},
		"down 4 min":        {ready: &metav1.Condition{Status: metav1.ConditionFalse, LastTransitionTime: metav1.NewTime(now.Add(-4 * time.Minute))}, want: 4 * time.Minute},
		"down for an hour":  {ready: &metav1.Condition{Status: metav1.ConditionFalse, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}, want: 5 * time.Minute},
		"up (unused, safe)": {ready: &metav1.Condition{Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-time.Hour))}, want: 5 * time.Second},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			store := storagetest.NewStore("a")
			if tt.ready != nil {
				c := *tt.ready
				c.Type, c.Reason = conditions.Ready, "StoreUnreachable"
				store.Status.Conditions = []metav1.Condition{c}
			}
			distinct := map[time.Duration]bool{}
			for range 100 {
				d := storeRetry(store, now)
				expectWithin10Percent(g, d, tt.want, "retry")
				distinct[d] = true
			}
			g.Expect(len(distinct)).To(BeNumerically(">", 50), "the back-off is jittered")
		})
	}
}

// The waits of a store that stays down double: each is as long as the
// outage so far, from 5 s up to 5 min.
func TestStoreRetryDoubles(t *testing.T) {
	g := NewWithT(t)
	down := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	store := storagetest.NewStore("a")
	store.Status.Conditions = []metav1.Condition{{Type: conditions.Ready, Status: metav1.ConditionFalse, LastTransitionTime: metav1.NewTime(down), Reason: "StoreUnreachable"}}
	now := down
	waits := make([]string, 0, 10)
	for range 10 {
		wait := storeRetry(store, now)
		waits = append(waits, fmt.Sprintf("%.0fs", wait.Seconds()))
		now = now.Add(wait)
	}
	t.Logf("waits: %v", waits)
	g.Expect(now.Sub(down)).To(BeNumerically(">", 10*time.Minute), "ten waits cover the outage quickly")
	g.Expect(now.Sub(down)).To(BeNumerically("<", 40*time.Minute))
	g.Expect(storeRetry(store, now)).To(BeNumerically("<=", time.Duration(1.1*float64(storeBackoffMax))))
}

func expectWithin10Percent(g Gomega, got, want time.Duration, what string) {
	lo := time.Duration(float64(want) * 0.9)
	hi := time.Duration(float64(want) * 1.1)
	g.ExpectWithOffset(1, got).To(BeNumerically(">=", lo-time.Nanosecond), "%s: %v below %v-10%%", what, got, want)
	g.ExpectWithOffset(1, got).To(BeNumerically("<=", hi+time.Nanosecond), "%s: %v above %v+10%%", what, got, want)
}
