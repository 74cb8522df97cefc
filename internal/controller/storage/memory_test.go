package storage

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	storagebucket "github.com/trellis-dev/trellis/internal/controller/storage/bucket"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/controller/storage/sweep"
	"github.com/trellis-dev/trellis/internal/s3"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// The memory tests drive each helper the storage controllers share with
// 10,000 objects, created, used, then deleted, and read the heap after a GC
// before and after: it must come back to within testenv.HeapSlack. Each runs
// in a test binary of its own, away from the suite's manager.

// TestManagerMemoryFollowsLiveBuckets runs the suite's manager over many
// StorageBuckets, each with a policy, in a namespace of its own, on a store
// of their own: created, Healthy, then deleted with the store. What the
// controllers keep of them beside the cache (status writes, policy locks,
// namespace labels, check times, the store's request series) must then be
// gone, and the test process' heap back to within testenv.HeapSlack of
// where it was, once client-go's Event cache is allowed for (EventBytes).
// The heap here also holds the test's own client, and the other tests'
// objects go on being checked, so the counts are what tell; the heap is a
// check that nothing else grew.
//
//	TRELLIS_MEMORY_BUCKETS=300 go test -run TestManagerMemoryFollowsLiveBuckets -v ./internal/controller/storage/
func TestManagerMemoryFollowsLiveBuckets(t *testing.T) {
	if testenv.OwnProcess() {
		t.Skip("needs the suite's API server and manager")
	}
	n := 60
	if v := os.Getenv("TRELLIS_MEMORY_BUCKETS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("TRELLIS_MEMORY_BUCKETS=%q: want a positive number", v)
		}
	}
	g := NewWithT(t)
	ctx := context.Background()
	const store = "memory-s3"
	g.Expect(k8s.Create(ctx, newStore(store, credsSecret))).To(Succeed())
	bucket := func(ns string) *storagev1.StorageBucket {
		b := newBucket(ns, "data", store)
		b.Spec.DeletionPolicy = storagev1.DeletionDelete
		b.Spec.Policy = `{"Version":"2012-10-17","Statement":[{"Sid":"PublicRead","Effect":"Deny","Principal":"*",` +
			`"Action":["s3:GetObject"],"Resource":["arn:aws:s3:::` + s3.DeriveBucketName(ns, "data") + `/pub/*"]}]}`
		return b
	}
	mine := map[string]bool{} // the namespaces of this test's buckets
	round := func(count int) (namespaces []string) {
		namespaces = make([]string, count)
		for i := range namespaces {
			namespaces[i] = newNamespace(t)
			mine[namespaces[i]] = true
			g.Expect(k8s.Create(ctx, bucket(namespaces[i]))).To(Succeed())
		}
		for _, ns := range namespaces {
			g.Eventually(func(g Gomega) {
				c := meta.FindStatusCondition(getBucket(g, ns, "data").Status.Conditions, conditions.Ready)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Reason).To(Equal(storagebucket.ReasonHealthy), "%s: %s", ns, c.Message)
			}, 4*timeout, poll).Should(Succeed())
		}
		// Status writes, once the cache has them (the other tests' objects
		// are settled: a healthy bucket's check writes nothing).
		g.Eventually(remembered, timeout, poll).Should(BeZero(), "status writes the cache has shown")
		for _, ns := range namespaces {
			g.Expect(k8s.Delete(ctx, &storagev1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "data"}})).To(Succeed())
		}
		for _, ns := range namespaces {
			deleteBucket(g, ns, "data")
		}
		return namespaces
	}

	round(3) // what is paid once: connections, the store's client, informer buffers
	start := testenv.LiveHeap()
	measured := round(n)
	g.Expect(k8s.Delete(ctx, &storagev1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: store}})).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: store}, &storagev1.ObjectStore{}))
	}, timeout, poll).Should(BeTrue())

	held := func() map[string]int {
		return map[string]int{
			"status writes":    remembered(),
			"policy locks":     mgrShared.stores.PolicyLocksIn(store),
			"namespace labels": mgrShared.namespaces.HeldIn(mine),
			"check schedule":   mgrShared.schedule.HeldIn(mine),
			"store series":     seriesOf(store, stores.Requests, stores.Up, sweep.Sweeps, sweep.RevokedTotal),
		}
	}
	t.Logf("held right after %d buckets and their store were deleted: %v", n, held())
	// Namespace labels go a TTL after they were read, at the latest two.
	g.Eventually(held, 2*stores.NamespaceLabelsTTL+timeout, time.Second).Should(HaveEach(0))
	end := testenv.LiveHeap()
	events := eventsIn(g, measured)
	t.Logf("heap: %.1f MiB after a warm-up; %+d KiB after %d buckets were created and deleted, which raised %d Events",
		float64(start)/(1<<20), (end-start)>>10, n, events)
	g.Expect(end - start).To(BeNumerically("<=", testenv.HeapSlack(start)+int64(events)*testenv.EventBytes))
}

// eventsIn counts the Events about objects in the namespaces.
func eventsIn(g Gomega, namespaces []string) int {
	n := 0
	for _, ns := range namespaces {
		list := &eventsv1.EventList{}
		g.Expect(k8s.List(context.Background(), list, client.InNamespace(ns))).To(Succeed())
		n += len(list.Items)
	}
	return n
}

// remembered is how many status writes the manager's patchers hold.
func remembered() int {
	n := 0
	for _, p := range mgrShared.patchers {
		n += p.Remembered()
	}
	return n
}

// seriesOf counts the series of the collectors about a store (their label "store").
func seriesOf(store string, collectors ...prometheus.Collector) int {
	n := 0
	for _, c := range collectors {
		ch := make(chan prometheus.Metric)
		go func() {
			c.Collect(ch)
			close(ch)
		}()
		for m := range ch {
			var out dto.Metric
			if err := m.Write(&out); err != nil {
				continue
			}
			for _, l := range out.GetLabel() {
				if l.GetName() == "store" && l.GetValue() == store {
					n++
				}
			}
		}
	}
	return n
}
