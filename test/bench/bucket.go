package main

import (
	"context"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
)

// The StorageBucket scenario: N buckets on one interval against a real
// versitygw; S3 requests per check, checks per second and their peak, and API
// writes while nothing changes.

func (b *bench) bucketScenario() error {
	ctx := context.Background()
	n := b.cfg.buckets
	if err := b.c.Create(ctx, &storagev1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "bench-s3"}, Spec: storagev1.ObjectStoreSpec{
		Endpoint: fmt.Sprintf("http://127.0.0.1:%d", b.s3Port), Region: "us-east-1", PathStyle: ptr.To(true),
		CredentialsSecretRef: storagev1.SecretReference{Namespace: "trellis-system", Name: "s3"},
		// A store serves only the namespaces it is opened to.
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: "buckets"}}}}); err != nil {
		return err
	}
	log("trellis: %d StorageBuckets, interval %s", n, b.cfg.bucketInterval)
	if err := parallel(n, b.cfg.workers, func(i int) error {
		return b.c.Create(ctx, &storagev1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "buckets", Name: fmt.Sprintf("b%d", i)},
			Spec: storagev1.StorageBucketSpec{StoreRef: storagev1.StoreReference{Name: "bench-s3"},
				HealthCheck: &storagev1.HealthCheck{IntervalSeconds: int32(b.cfg.bucketInterval / time.Second)}}})
	}); err != nil {
		return err
	}
	if err := waitFor(30*time.Minute, func() (bool, error) {
		list := &storagev1.StorageBucketList{}
		if err := b.c.List(ctx, list, client.InNamespace("buckets")); err != nil {
			return false, err
		}
		ok := 0
		for _, sb := range list.Items {
			if meta.IsStatusConditionTrue(sb.Status.Conditions, conditions.Ready) {
				ok++
			}
		}
		return ok >= n, nil
	}); err != nil {
		return fmt.Errorf("buckets: %w", err)
	}
	// Let the creation burst pass one interval, then sample checks per second.
	log("sampling bucket checks for %s", b.cfg.bucketWindow)
	time.Sleep(b.cfg.bucketInterval)
	w0, _ := b.mgr.writes()
	perSecond := make([]float64, 0, int(b.cfg.bucketWindow/time.Second))
	prevChecks, prevReqs, err := b.mgr.bucketCounters()
	if err != nil {
		return err
	}
	firstChecks, firstReqs := prevChecks, prevReqs
	tick := time.NewTicker(time.Second)
	for range int(b.cfg.bucketWindow / time.Second) {
		<-tick.C
		c, _, err := b.mgr.bucketCounters()
		if err != nil {
			return err
		}
		perSecond = append(perSecond, c-prevChecks)
		prevChecks = c
	}
	tick.Stop()
	lastChecks, lastReqs, _ := b.mgr.bucketCounters()
	w1, _ := b.mgr.writes()
	checks := lastChecks - firstChecks
	mean := float64(n) / b.cfg.bucketInterval.Seconds()
	maxPerSecond := 0.0
	for _, v := range perSecond {
		maxPerSecond = math.Max(maxPerSecond, v)
	}
	reqPerCheck := (lastReqs - firstReqs) / math.Max(checks, 1)
	b.add(row{Scenario: fmt.Sprintf("%d StorageBuckets, interval %s", n, b.cfg.bucketInterval), Figure: "S3 requests per check", Value: reqPerCheck, Unit: "requests", Target: "1", Met: math.Abs(reqPerCheck-1) < 0.01})
	b.add(row{Scenario: "same", Figure: "checks per second (mean over window)", Value: checks / b.cfg.bucketWindow.Seconds(), Unit: "checks/s", Floor: mean, Ratio: checks / b.cfg.bucketWindow.Seconds() / mean, Target: "≈ N/T", Met: true})
	b.add(row{Scenario: "same", Figure: "max checks in any 1 s window", Value: maxPerSecond, Unit: "checks", Floor: mean, Ratio: maxPerSecond / mean, Target: "≤ 2× N/T", Met: maxPerSecond <= 2*mean})
	b.add(row{Scenario: "same", Figure: "API writes during the window", Value: w1.total() - w0.total(), Unit: "writes", Target: "0", Met: w1.total() == w0.total()})
	return nil
}
