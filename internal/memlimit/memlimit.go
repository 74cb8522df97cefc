// Package memlimit gives the Go runtime a soft memory limit under the
// container's, for the manager and the viewer alike.
package memlimit

import (
	"bytes"
	"os"
	"runtime/debug"
	"strconv"
)

// The Go runtime does not read the container's memory limit: left alone, it
// lets the heap grow to twice what is live before collecting, so a manager
// whose live heap is half its limit can be OOM-killed (and so can a viewer). With a soft limit
// under the container's, the collector works harder near it instead.

// memoryLimitShare is the part of the container's memory limit given to the
// Go runtime's soft limit; the rest is for what that limit does not count
// (the binary's own mapped pages, memory the kernel holds for the process).
const memoryLimitShare = 0.9

// cgroupMemoryLimitFiles are where a container sees its memory limit:
// cgroup v2, then v1.
var cgroupMemoryLimitFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// Apply sets the Go runtime's soft memory limit to 90% of the
// container's memory limit, unless GOMEMLIMIT is set (the runtime then
// already applies it) or there is no limit. It returns the limit set, 0 for
// none.
func Apply() int64 {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set {
		return 0
	}
	limit := softMemoryLimit(os.ReadFile, cgroupMemoryLimitFiles)
	if limit > 0 {
		debug.SetMemoryLimit(limit)
	}
	return limit
}

// softMemoryLimit reads the first of files that holds a limit and returns
// memoryLimitShare of it; 0 when none does ("max", or v1's "no limit",
// which is close to the largest int64).
func softMemoryLimit(read func(string) ([]byte, error), files []string) int64 {
	for _, f := range files {
		raw, err := read(f)
		if err != nil {
			continue
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(raw)), 10, 64)
		if err != nil || n <= 0 || n >= 1<<62 {
			return 0
		}
		return int64(float64(n) * memoryLimitShare)
	}
	return 0
}
