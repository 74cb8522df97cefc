package bucket

import (
	"runtime"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	"github.com/trellis-dev/trellis/internal/testenv"
)

// The memory tests drive each helper the storage controllers share with
// 10,000 objects, created, used, then deleted, and read the heap after a GC
// before and after: it must come back to within testenv.HeapSlack. Each runs
// in a test binary of its own, away from the suite's manager.

func TestMemoryScheduleFollowsBuckets(t *testing.T) {
	if !testenv.InOwnProcess(t) {
		return
	}
	g := NewWithT(t)
	clock := newTestClock()
	s := newTestSchedule(clock)
	names := testenv.MemoryNames("bucket")
	keys := make([]types.NamespacedName, testenv.MemoryObjects)
	for i, name := range names {
		keys[i] = types.NamespacedName{Namespace: "team", Name: name}
	}

	start := testenv.LiveHeap()
	for i, key := range keys {
		uid := names[i]
		s.Wait(key, uid, time.Minute)
		s.Checked(key, uid, time.Minute)
	}
	for _, key := range keys {
		s.Forget(key)
	}
	end := testenv.LiveHeap()
	left := len(s.next)
	runtime.KeepAlive(names) // the test's own inputs are in every figure
	runtime.KeepAlive(keys)

	t.Logf("heap: %d KiB at the start, %+d KiB after %d buckets were scheduled and deleted (%d left)",
		start>>10, (end-start)>>10, testenv.MemoryObjects, left)
	g.Expect(left).To(BeZero())
	g.Expect(end - start).To(BeNumerically("<=", testenv.HeapSlack(start)))
}
