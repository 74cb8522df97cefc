package httpload

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var lat []time.Duration
	for i := 100; i >= 1; i-- {
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	for _, tc := range []struct {
		lat  []time.Duration
		p    float64
		want time.Duration
	}{
		{lat, 50, 50 * time.Millisecond},
		{lat, 99, 99 * time.Millisecond},
		{lat, 100, 100 * time.Millisecond},
		{nil, 50, 0},
	} {
		if got := Percentile(tc.lat, tc.p); got != tc.want {
			t.Errorf("Percentile(%d latencies, %g) = %s, want %s", len(tc.lat), tc.p, got, tc.want)
		}
	}
}
