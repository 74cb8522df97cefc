// Package statusmemo remembers the last status each controller wrote, so a
// reconcile that runs before the cache has caught up with that write builds
// on what it wrote, instead of on the stale copy, and does not send it again.
package statusmemo

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// Memo maps an object (by namespace and name) to the status written last and
// the resourceVersion the object had just before that write.
type Memo struct {
	mu sync.Mutex
	m  map[types.NamespacedName]entry
}

type entry struct {
	rvBefore string
	status   any
}

// Latest returns the status last written for the object if the cached copy
// (at cachedRV) is still the version from before that write, i.e. stale.
func (m *Memo) Latest(key types.NamespacedName, cachedRV string) (any, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.m[key]
	if !ok || e.rvBefore != cachedRV {
		return nil, false
	}
	return e.status, true
}

// Wrote records a status write; status must not be modified afterwards.
func (m *Memo) Wrote(key types.NamespacedName, rvBefore string, status any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[types.NamespacedName]entry{}
	}
	m.m[key] = entry{rvBefore: rvBefore, status: status}
}

// Forget drops a deleted object.
func (m *Memo) Forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, key)
}
