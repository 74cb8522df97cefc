// Package jitter spreads periodic work so that many objects, or many replicas,
// do not all act in the same instant.
package jitter

import (
	"math/rand/v2"
	"time"
)

// Duration returns d scaled by a uniform factor in [1-f, 1+f]; f is clamped to [0, 1).
func Duration(d time.Duration, f float64) time.Duration {
	if f <= 0 || d <= 0 {
		return d
	}
	if f >= 1 {
		f = 0.99
	}
	return time.Duration(float64(d) * (1 - f + 2*f*rand.Float64())) // math/rand: spreading load, not security
}

// Offset returns a stable offset in [0, d) for a key, so one object keeps its
// place in the period across restarts and replicas.
func Offset(key string, d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	// FNV-1a: cheap, stable, well spread for short keys.
	h := uint64(14695981039346656037)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= 1099511628211
	}
	return time.Duration(h % uint64(d))
}
