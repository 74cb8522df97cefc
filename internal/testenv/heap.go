package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"testing"
)

// LiveHeap is the Go heap in use after a full collection: what the process
// still references. (Two collections: the first may leave objects that a
// finalizer or a cleared sync.Pool released only then.)
func LiveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// MemoryObjects is how many objects a memory test drives a helper with.
const MemoryObjects = 10_000

// MemoryNames are MemoryObjects names, "<prefix>-00000" on; a memory test
// builds them before its first heap figure.
func MemoryNames(prefix string) []string {
	names := make([]string, MemoryObjects)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%05d", prefix, i)
	}
	return names
}

// HeapSlack is how far the live heap may end above where it started for a
// test to say memory came back: 5%. Two figures taken in a row differ by
// less than 1 KiB; what a test's first pass through the code allocates once
// (type and reflection caches) is up to 30 KiB; 5% of a unit test's heap is
// about 150 KiB, and what 10,000 objects left behind before issue 22 was
// 1 to 11 MiB.
func HeapSlack(start int64) int64 {
	return start / 20
}

// EventBytes is what a manager keeps of each Event it raises, for 6 to 12
// minutes: client-go's event broadcaster keeps a copy of every Event it sent,
// to fold repeats into a series, and drops it once six minutes have passed
// without one (tools/events: finishSeries). Measured at 1.5 KiB (925 KiB for
// the 600 Events of 150 StorageBuckets created and deleted; a heap profile
// puts all of the growth in that cache), so 2 KiB. A test that reads the
// heap of a running manager allows for it.
const EventBytes = 2 << 10

// ownProcessEnv marks a test binary that InOwnProcess started.
const ownProcessEnv = "TRELLIS_TEST_OWN_PROCESS"

// InOwnProcess runs t alone in a test binary of its own, which starts no API
// server (its TestMain asks OwnProcess), so that heap figures are not those
// of the manager a package's envtest suite runs beside them. In that binary
// it returns true and the test goes on; in the one that started it, it
// passes on the child's output and result and returns false, and the test
// returns.
func InOwnProcess(t *testing.T) bool {
	t.Helper()
	if OwnProcess() {
		return true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^"+t.Name()+"$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), ownProcessEnv+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("%s in its own process:\n%s", t.Name(), out)
	if err != nil {
		t.Fatalf("%s in its own process: %v", t.Name(), err)
	}
	return false
}

// OwnProcess reports whether this test binary was started by InOwnProcess:
// TestMain then starts nothing and only runs the test.
func OwnProcess() bool { return os.Getenv(ownProcessEnv) != "" }
