package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The memory scenario: the manager's peak RSS after a restart, with and
// without unrelated ConfigMaps and Secrets in the cluster.

// memoryScenario compares the manager's peak RSS after a restart with all the
// objects above, with and without many unrelated ConfigMaps and Secrets.
func (b *bench) memoryScenario() error {
	ctx := context.Background()
	// Peak RSS after a restart, median of three restarts (one is noisy).
	rss := func() (float64, error) {
		var samples []float64
		for range 3 {
			b.mgr.stop()
			if err := b.startManager(); err != nil {
				return 0, err
			}
			if err := waitFor(10*time.Minute, func() (bool, error) {
				r, err := b.mgr.reconciles("markdownview")
				return r >= float64(b.totalViews()), err
			}); err != nil {
				return 0, err
			}
			time.Sleep(3 * time.Second)
			v, err := b.mgr.peakRSS()
			if err != nil {
				return 0, err
			}
			samples = append(samples, v)
		}
		sort.Float64s(samples)
		log("peak RSS samples (MiB): %.1f %.1f %.1f", samples[0]/(1<<20), samples[1]/(1<<20), samples[2]/(1<<20))
		return samples[1], nil
	}
	without, err := rss()
	if err != nil {
		return err
	}
	log("creating %d unrelated ConfigMaps and Secrets of 2 KiB", b.cfg.unrelated)
	payload := strings.Repeat("x", 2048)
	if err := parallel(b.cfg.unrelated, b.cfg.workers, func(i int) error {
		if i%2 == 0 {
			return b.c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "unrelated", Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"data": payload}})
		}
		return b.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "unrelated", Name: fmt.Sprintf("s-%d", i)}, Data: map[string][]byte{"data": []byte(payload)}})
	}); err != nil {
		return err
	}
	with, err := rss()
	if err != nil {
		return err
	}
	b.add(row{Scenario: fmt.Sprintf("all of the above + %d unrelated ConfigMaps/Secrets (2 KiB)", b.cfg.unrelated), Figure: "manager peak RSS after restart (median of 3)",
		Value: with / (1 << 20), Unit: "MiB", Floor: without / (1 << 20), Ratio: with / without, Target: "≤ 1.10× without", Met: with <= 1.10*without})
	return nil
}
