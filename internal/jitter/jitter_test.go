package jitter

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

const samples = 1000

func TestDurationStaysInRange(t *testing.T) {
	tests := []struct {
		d time.Duration
		f float64
	}{
		{d: time.Second, f: 0.1},
		{d: time.Minute, f: 0.5},
		{d: 300 * time.Millisecond, f: 0.9},
		{d: time.Hour, f: 0.01},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v±%v", tt.d, tt.f), func(t *testing.T) {
			g := NewWithT(t)
			lo := time.Duration(float64(tt.d) * (1 - tt.f))
			hi := time.Duration(float64(tt.d) * (1 + tt.f))
			distinct := map[time.Duration]bool{}
			below, above := 0, 0
			var sum float64
			for range samples {
				got := Duration(tt.d, tt.f)
				g.Expect(got).To(BeNumerically(">=", lo))
				g.Expect(got).To(BeNumerically("<=", hi))
				distinct[got] = true
				if got < tt.d {
					below++
				} else if got > tt.d {
					above++
				}
				sum += float64(got)
			}
			g.Expect(len(distinct)).To(BeNumerically(">", samples/2), "Duration varies")
			// Uniform over the whole range: both sides are used, about equally,
			// and the extremes are approached.
			g.Expect(below).To(BeNumerically(">", samples/4))
			g.Expect(above).To(BeNumerically(">", samples/4))
			mean := sum / samples
			g.Expect(mean).To(BeNumerically("~", float64(tt.d), 0.1*tt.f*float64(tt.d)+1))
			minSeen, maxSeen := hi, lo
			for d := range distinct {
				minSeen, maxSeen = min(minSeen, d), max(maxSeen, d)
			}
			span := hi - lo
			g.Expect(minSeen - lo).To(BeNumerically("<", span/10))
			g.Expect(hi - maxSeen).To(BeNumerically("<", span/10))
		})
	}
}

func TestDurationWithoutJitter(t *testing.T) {
	tests := []struct {
		d time.Duration
		f float64
	}{
		{d: time.Second, f: 0},
		{d: time.Second, f: -0.5},
		{d: time.Minute, f: -1},
		{d: 0, f: 0.5},
		{d: -time.Second, f: 0.5},
		{d: 0, f: 2},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v±%v", tt.d, tt.f), func(t *testing.T) {
			g := NewWithT(t)
			for range 100 {
				g.Expect(Duration(tt.d, tt.f)).To(Equal(tt.d))
			}
		})
	}
}

func TestDurationClampsLargeFactor(t *testing.T) {
	for _, f := range []float64{0.99, 1, 1.5, 100} {
		for _, d := range []time.Duration{time.Millisecond, time.Second, time.Hour} {
			t.Run(fmt.Sprintf("%v±%v", d, f), func(t *testing.T) {
				g := NewWithT(t)
				distinct := map[time.Duration]bool{}
				for range samples {
					got := Duration(d, f)
					g.Expect(got).To(BeNumerically(">", 0), "a positive period never becomes zero or negative")
					// f is clamped to 0.99: the shortest period is d/100, never near 0.
					g.Expect(got).To(BeNumerically(">=", d/200))
					g.Expect(got).To(BeNumerically("<", 2*d))
					distinct[got] = true
				}
				g.Expect(len(distinct)).To(BeNumerically(">", 1))
			})
		}
	}
}

func TestOffsetIsStable(t *testing.T) {
	g := NewWithT(t)
	for _, d := range []time.Duration{time.Second, time.Minute, 7 * time.Nanosecond} {
		for _, key := range []string{"", "a", "team-a", "some/namespaced-name", "ünïcode"} {
			first := Offset(key, d)
			for range 10 {
				g.Expect(Offset(key, d)).To(Equal(first), "key %q, d %v", key, d)
			}
		}
	}
	// Pinned values: an offset must survive restarts and new versions, or every
	// object moves its place in the period after an upgrade.
	g.Expect(Offset("", time.Hour)).To(Equal(time.Duration(14695981039346656037 % uint64(time.Hour))))
	g.Expect(Offset("a", 1<<62)).To(Equal(time.Duration(0xaf63dc4c8601ec8c % (1 << 62))))
}

func TestOffsetInRange(t *testing.T) {
	g := NewWithT(t)
	for _, d := range []time.Duration{time.Nanosecond, 3 * time.Nanosecond, time.Second, 10 * time.Minute} {
		for i := range samples {
			got := Offset(fmt.Sprintf("tenant-%d", i), d)
			g.Expect(got).To(BeNumerically(">=", 0))
			g.Expect(got).To(BeNumerically("<", d))
		}
	}
	for _, d := range []time.Duration{0, -time.Second} {
		g.Expect(Offset("tenant-1", d)).To(Equal(time.Duration(0)))
	}
}

func TestOffsetSpreadsKeys(t *testing.T) {
	for _, format := range []string{"tenant-%d", "ns-%03d/obj", "%d"} {
		t.Run(format, func(t *testing.T) {
			g := NewWithT(t)
			const buckets = 10
			d := 10 * time.Minute
			counts := make([]int, buckets)
			distinct := map[time.Duration]bool{}
			for i := range samples {
				off := Offset(fmt.Sprintf(format, i), d)
				counts[off/(d/buckets)]++
				distinct[off] = true
			}
			for b, c := range counts {
				g.Expect(c).To(BeNumerically(">=", 50), "bucket %d: %v", b, counts)
				g.Expect(c).To(BeNumerically("<=", 150), "bucket %d: %v", b, counts)
			}
			g.Expect(len(distinct)).To(BeNumerically(">", samples-10), "different keys land on different offsets")
		})
	}
}
