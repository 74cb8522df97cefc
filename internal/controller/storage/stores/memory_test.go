package stores

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/internal/testenv"
)

// The memory tests drive each helper the storage controllers share with
// 10,000 objects, created, used, then deleted, and read the heap after a GC
// before and after: it must come back to within testenv.HeapSlack. Each runs
// in a test binary of its own, away from the suite's manager.

func TestMemoryPolicyLocksFollowEditsUnderWay(t *testing.T) {
	if !testenv.InOwnProcess(t) {
		return
	}
	const held = 100 // edits under way at once
	g := NewWithT(t)
	s := newTestStores(&secretsReader{}, &countingBuilder{})
	buckets := testenv.MemoryNames("bucket")
	unlocks := make([]func(), testenv.MemoryObjects)

	start := testenv.LiveHeap()
	for i, bucket := range buckets {
		unlocks[i] = s.LockPolicy(fmt.Sprintf("store-%d", i%10), bucket)
		if i >= held {
			unlocks[i-held]()
			unlocks[i-held] = nil
		}
	}
	during := s.policyLocksHeld()
	for i := testenv.MemoryObjects - held; i < testenv.MemoryObjects; i++ {
		unlocks[i]()
		unlocks[i] = nil
	}
	end := testenv.LiveHeap()
	after := s.policyLocksHeld()
	runtime.KeepAlive(buckets) // the test's own inputs are in every figure
	runtime.KeepAlive(unlocks)

	t.Logf("heap: %d KiB at the start, %+d KiB after %d buckets' policies were edited (%d locks left)",
		start>>10, (end-start)>>10, testenv.MemoryObjects, after)
	g.Expect(during).To(Equal(held), "a lock for each edit under way")
	g.Expect(after).To(BeZero(), "no lock once no edit is under way")
	g.Expect(end - start).To(BeNumerically("<=", testenv.HeapSlack(start)))
}

// A bucket's lock stays while anyone waits for it.
func TestPolicyLockOutlivesItsHolderWhileAWaiterIsLeft(t *testing.T) {
	g := NewWithT(t)
	s := newTestStores(&secretsReader{}, &countingBuilder{})
	unlock := s.LockPolicy("a", "bucket")
	got := make(chan func())
	go func() { got <- s.LockPolicy("a", "bucket") }()
	g.Eventually(func() int {
		s.locksMu.Lock()
		defer s.locksMu.Unlock()
		return s.policyLocks["a/bucket"].users
	}).Should(Equal(2))
	unlock()
	var second func()
	g.Eventually(got).Should(Receive(&second))
	g.Expect(s.policyLocksHeld()).To(Equal(1))

	// Taken again while held: the same lock, so this one waits.
	third := make(chan func())
	go func() { third <- s.LockPolicy("a", "bucket") }()
	g.Consistently(third, 100*time.Millisecond).ShouldNot(Receive())
	second()
	var last func()
	g.Eventually(third).Should(Receive(&last))
	last()
	g.Expect(s.policyLocksHeld()).To(BeZero())
}

// namespacesReader serves every namespace with its name label, except those
// in gone, and counts reads.
type namespacesReader struct {
	client.Reader
	gone  map[string]bool
	reads int
}

func (r *namespacesReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.reads++
	if r.gone[key.Name] {
		return apierrors.NewNotFound(metav1.SchemeGroupVersion.WithResource("namespaces").GroupResource(), key.Name)
	}
	obj.SetName(key.Name)
	obj.SetLabels(map[string]string{"kubernetes.io/metadata.name": key.Name, "team": "storage"})
	return nil
}

// sweeps runs what NamespaceLabels asked to run later, when the test says.
type sweeps struct{ due []func() }

func (s *sweeps) after(_ time.Duration, f func()) { s.due = append(s.due, f) }

func (s *sweeps) run() {
	due := s.due
	s.due = nil
	for _, f := range due {
		f()
	}
}

func TestMemoryNamespaceLabelsExpire(t *testing.T) {
	if !testenv.InOwnProcess(t) {
		return
	}
	g := NewWithT(t)
	ctx := context.Background()
	clock := newTestClock()
	sw := &sweeps{}
	n := NewNamespaceLabels(&namespacesReader{})
	n.now, n.after = clock.now, sw.after
	namespaces := testenv.MemoryNames("team")

	start := testenv.LiveHeap()
	for _, ns := range namespaces {
		_, err := n.Get(ctx, in(ns))
		g.Expect(err).NotTo(HaveOccurred())
	}
	read := len(n.seen)
	clock.advance(NamespaceLabelsTTL)
	sw.run()
	end := testenv.LiveHeap()
	left, pending := len(n.seen), len(sw.due)
	runtime.KeepAlive(namespaces) // the test's own inputs are in every figure

	t.Logf("heap: %d KiB at the start, %+d KiB a TTL after %d namespaces were read (%d entries left)",
		start>>10, (end-start)>>10, testenv.MemoryObjects, left)
	g.Expect(read).To(Equal(testenv.MemoryObjects))
	g.Expect(left).To(BeZero(), "expired labels are dropped")
	g.Expect(pending).To(BeZero(), "no sweep is due when nothing is left")
	g.Expect(end - start).To(BeNumerically("<=", testenv.HeapSlack(start)))
}

func TestNamespaceLabelsAreDroppedWhenExpiredOrGone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	clock := newTestClock()
	sw := &sweeps{}
	reader := &namespacesReader{gone: map[string]bool{}}
	n := NewNamespaceLabels(reader)
	n.now, n.after = clock.now, sw.after

	_, err := n.Get(ctx, in("old"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sw.due).To(HaveLen(1), "a sweep is due once something is kept")
	clock.advance(NamespaceLabelsTTL / 2)
	_, err = n.Get(ctx, in("new"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sw.due).To(HaveLen(1), "one sweep at a time")

	clock.advance(NamespaceLabelsTTL / 2)
	sw.run()
	g.Expect(n.seen).To(HaveLen(1), "only what has expired")
	g.Expect(n.seen).To(HaveKey("new"))
	g.Expect(sw.due).To(HaveLen(1), "another sweep for what is left")

	// A namespace found gone is dropped at once.
	reader.gone["new"] = true
	clock.advance(NamespaceLabelsTTL / 2) // "new" has expired: it is read again
	_, err = n.Get(ctx, in("new"))
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	g.Expect(n.seen).To(BeEmpty())
	sw.run()
	g.Expect(sw.due).To(BeEmpty(), "no sweep is due when nothing is left")
	g.Expect(reader.reads).To(Equal(3))
}

// policyLocksHeld is how many buckets' policy locks exist: held, or waited for.
func (s *Clients) policyLocksHeld() int {
	s.locksMu.Lock()
	defer s.locksMu.Unlock()
	return len(s.policyLocks)
}
