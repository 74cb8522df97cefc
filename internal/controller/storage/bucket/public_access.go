package bucket

import (
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
)

// Block Public Access must hold whatever came before it: a bucket made
// public while its store allowed it, a spec.policy removed (which leaves the
// store's statements as they are), a bucket adopted with its policy. So
// while the store blocks public access for the bucket's namespace, a check
// takes out of the bucket's policy in the store every statement that grants
// beyond the namespace's keys (s3.RestrictPrincipals), and keeps the rest:
//
//   - a bucket whose spec.policy is refused: at each check, as the policy is
//     read then anyway;
//   - a bucket with no spec.policy: at its first check after the manager
//     starts, and after its generation, the store's public-access fields or
//     the namespace's standing changed; a bucket with an accepted
//     spec.policy has its user statements replaced by the spec's anyway.
//
// A change of the store's public-access fields re-checks at once the
// settled buckets checked since the manager started; the others, and a
// namespace's change of standing, wait for their next due check.

// ReasonPublicAccessRemoved is the Warning Event of statements taken out of
// a bucket's policy in the store.
const ReasonPublicAccessRemoved = "PublicAccessRemoved"

// publicAccessGuards remembers, per bucket, the rule under which its policy
// was last checked.
type publicAccessGuards struct {
	mu   sync.Mutex
	last map[types.NamespacedName]guardKey
}

// guardKey is what decides whom a bucket's policy may grant to.
type guardKey struct {
	uid        types.UID
	generation int64
	// store is the store's UID and public-access fields (storeRule).
	store string
	// public: the store lets the namespace grant to anyone.
	public bool
}

func newPublicAccessGuards() *publicAccessGuards {
	return &publicAccessGuards{last: map[types.NamespacedName]guardKey{}}
}

// storeRule identifies a store's public-access fields.
func storeRule(store *storagev1.ObjectStore) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s/%s", store.UID, store.Spec.PublicAccess)
	if sel := store.Spec.PublicAccessNamespaceSelector; sel != nil {
		fmt.Fprintf(&b, "/%v", sel.String())
	}
	return b.String()
}

func keyOf(b *storagev1.StorageBucket, store *storagev1.ObjectStore, public bool) guardKey {
	return guardKey{uid: b.UID, generation: b.Generation, store: storeRule(store), public: public}
}

// due reports whether the bucket's policy must be checked under key.
func (g *publicAccessGuards) due(name types.NamespacedName, key guardKey) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	last, ok := g.last[name]
	return !ok || last != key
}

// storeChanged reports whether the store's public-access fields changed
// since the bucket was last checked; false when it was not checked since
// the manager started (its next due check sees to it).
func (g *publicAccessGuards) storeChanged(b *storagev1.StorageBucket, store *storagev1.ObjectStore) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	last, ok := g.last[types.NamespacedName{Namespace: b.Namespace, Name: b.Name}]
	return ok && last.uid == b.UID && last.store != storeRule(store)
}

// checked records that the bucket's policy holds under key.
func (g *publicAccessGuards) checked(name types.NamespacedName, key guardKey) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.last[name] = key
}

// forget drops a deleted bucket; an empty map is replaced, as a Go map keeps
// the room it grew to.
func (g *publicAccessGuards) forget(name types.NamespacedName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.last, name)
	if len(g.last) == 0 {
		g.last = map[types.NamespacedName]guardKey{}
	}
}
