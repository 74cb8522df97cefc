package stores

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
)

// Access is what an ObjectStore lets one namespace do.
type Access struct {
	// use: its StorageBuckets and BucketAccesses may use the store.
	Use bool
	// adopt: its StorageBuckets may take over buckets not created for this
	// namespace, and name buckets outside the namespace's own names.
	Adopt bool
	// public: its bucket policies may grant to anyone (publicAccess Allowed,
	// and publicAccessNamespaceSelector selects it); otherwise only to the
	// keys of its own BucketAccesses.
	Public bool
}

// AccessOf reads the store's namespace selectors for a namespace with the
// given labels. An unset or empty selector selects nothing: a store is
// opened to namespaces explicitly, never by omission.
func AccessOf(store *storagev1.ObjectStore, nsLabels map[string]string) (Access, error) {
	use, err := selects(store.Spec.NamespaceSelector, nsLabels)
	if err != nil {
		return Access{}, fmt.Errorf("namespaceSelector: %w", err)
	}
	adopt, err := selects(store.Spec.AdoptionNamespaceSelector, nsLabels)
	if err != nil {
		return Access{}, fmt.Errorf("adoptionNamespaceSelector: %w", err)
	}
	public, err := selects(store.Spec.PublicAccessNamespaceSelector, nsLabels)
	if err != nil {
		return Access{}, fmt.Errorf("publicAccessNamespaceSelector: %w", err)
	}
	// Anything but Allowed is Blocked: an object the API server did not
	// default (or a value a later version adds) fails closed.
	public = public && store.Spec.PublicAccess == storagev1.PublicAccessAllowed
	return Access{Use: use, Adopt: use && adopt, Public: use && public}, nil
}

func selects(sel *metav1.LabelSelector, nsLabels map[string]string) (bool, error) {
	if sel == nil || len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0 {
		return false, nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false, err
	}
	return s.Matches(labels.Set(nsLabels)), nil
}

// ValidateSelectors reports a selector of the store that cannot be used.
func ValidateSelectors(store *storagev1.ObjectStore) error {
	_, err := AccessOf(store, nil)
	return err
}

// OwnBucketName reports whether bucket is one of the namespace's own names:
// "<namespace>-…" without "--". A name with "--" is of the form hashed
// derived names take (s3.DeriveBucketName), which may start with another
// namespace's name: acme-dev/data derives acme-dev-data--<hash>, which
// namespace acme could otherwise name first. (Namespace "team" still owns
// "team-a-…" this way, as derived names always allowed; what stops it from
// taking namespace team-a's buckets is the ownership tag, not the name.)
func OwnBucketName(namespace, bucket string) bool {
	return strings.HasPrefix(bucket, namespace+"-") && !strings.Contains(bucket, "--")
}

// NamespaceLabels reads the labels of namespaces, which the stores'
// selectors match. Not from the manager's cache: when the tenant controller
// runs, that holds only namespaces Trellis manages. Each namespace is read at
// most once per ttl, so a label change takes effect within it. What was read
// is dropped between one and two ttl later, and at once when the namespace
// is found gone: what it holds follows the namespaces read lately, not every
// namespace ever read.
type NamespaceLabels struct {
	reader client.Reader
	ttl    time.Duration
	now    func() time.Time
	// after calls f once d has passed, in a goroutine of its own
	// (time.AfterFunc; tests call f themselves).
	after func(d time.Duration, f func())

	mu   sync.Mutex
	seen map[string]labelsRead
	// sweeping: a sweep is due while seen holds anything.
	sweeping bool
}

type labelsRead struct {
	labels map[string]string
	at     time.Time
}

// NamespaceLabelsTTL is how long a namespace's labels are reused.
const NamespaceLabelsTTL = 30 * time.Second

// NewNamespaceLabels reads namespaces with reader (the API server).
func NewNamespaceLabels(reader client.Reader) *NamespaceLabels {
	return &NamespaceLabels{reader: reader, ttl: NamespaceLabelsTTL, now: time.Now, seen: map[string]labelsRead{},
		after: func(d time.Duration, f func()) { time.AfterFunc(d, f) }}
}

// Get returns the labels of the namespace obj is in. Labels read before
// obj was made are read again: they may be those of an earlier namespace
// of the name, deleted since (a namespace made again under a name is
// another, and may not have what the earlier one was given, such as a
// store's adoption leave). Creation times are in whole seconds, so a read
// in the second obj was made counts as before it.
func (n *NamespaceLabels) Get(ctx context.Context, obj client.Object) (map[string]string, error) {
	namespace := obj.GetNamespace()
	made := obj.GetCreationTimestamp().Add(time.Second)
	n.mu.Lock()
	r, ok := n.seen[namespace]
	n.mu.Unlock()
	if ok && n.now().Sub(r.at) < n.ttl && r.at.After(made) {
		return r.labels, nil
	}
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := n.reader.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		if apierrors.IsNotFound(err) {
			n.mu.Lock()
			delete(n.seen, namespace)
			n.mu.Unlock()
		}
		return nil, fmt.Errorf("reading the labels of namespace %s: %w", namespace, err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.seen[namespace] = labelsRead{labels: ns.Labels, at: n.now()}
	if !n.sweeping {
		n.sweeping = true
		n.after(n.ttl, n.sweep)
	}
	return ns.Labels, nil
}

// UID reads the namespace's UID from the API server, never from what was
// read before: a namespace deleted and made again under its name within
// the ttl is another namespace, and whose a kept bucket is, is decided by
// it (the StorageBucket check).
func (n *NamespaceLabels) UID(ctx context.Context, namespace string) (types.UID, error) {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := n.reader.Get(ctx, client.ObjectKey{Name: namespace}, ns); err != nil {
		return "", fmt.Errorf("reading the UID of namespace %s: %w", namespace, err)
	}
	return ns.UID, nil
}

// HeldIn is how many of the namespaces have their labels kept: what
// memory holds for them.
func (n *NamespaceLabels) HeldIn(namespaces map[string]bool) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	count := 0
	for ns := range n.seen {
		if namespaces[ns] {
			count++
		}
	}
	return count
}

// sweep drops the labels read a ttl ago or more, and comes back in a ttl
// while any are left.
func (n *NamespaceLabels) sweep() {
	n.mu.Lock()
	defer n.mu.Unlock()
	now := n.now()
	for namespace, r := range n.seen {
		if now.Sub(r.at) >= n.ttl {
			delete(n.seen, namespace)
		}
	}
	if len(n.seen) == 0 {
		// A Go map keeps the room it grew to when its keys are deleted.
		n.seen = map[string]labelsRead{}
		n.sweeping = false
		return
	}
	n.after(n.ttl, n.sweep)
}
