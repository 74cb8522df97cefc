// Copies (spec.copies): a Secret or ConfigMap of a source namespace, or an
// object given inline (inline.go), kept in every namespace of the tenant.
// Part of the second step (tenant_children.go): planCopies looks at each
// item's source, copyWrites keep the copies of one namespace, and a new
// namespace gets them before its admins are bound.

package tenancy

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/controller/children"
)

// CopyOfAnnotation is on every copy: the kind, namespace and name of its
// source (<kind>/<namespace>/<name>), or "inline". With the tenant label,
// which only those who may change Tenants may put on an object of a kind
// Trellis copies (the tenant-copies and tenant-guardrails admission
// policies), it is what makes an object a copy.
const CopyOfAnnotation = "tenancy.trellis.dev/copy-of"

// ReasonCopySourceUnavailable is the reason of a Tenant whose copy's source
// is missing, is a Secret in a namespace whose owner did not let the
// manager read it, or is in a namespace made again since the copies were
// made (SourceReplaced).
const ReasonCopySourceUnavailable = "CopySourceUnavailable"

// copyKey names an item of spec.copies, and the copies made from it.
func copyKey(kind tenancyv1.CopyKind, name string) string { return string(kind) + "/" + name }

// sourceKey names an item's source, as the Tenant index and the annotation do.
func sourceKey(c tenancyv1.TenantCopy) string {
	return string(c.Kind) + "/" + c.From.Namespace + "/" + c.From.Name
}

// copyPlan is what one item of spec.copies needs this reconcile.
type copyPlan struct {
	item tenancyv1.TenantCopy
	// source is the source as read, nil when it is not to be copied (not
	// available, or nothing to write).
	source client.Object
	// version is the source's resourceVersion; recorded the version the
	// last status says every ready namespace holds.
	version, recorded string
	// origin is the source namespace the copies are made from.
	origin  sourceOrigin
	state   tenancyv1.CopyState
	message string
}

// sourceOrigin is the source namespace an item's copies are made from, as
// status.copies records it: a namespace is its UID, not its name.
type sourceOrigin struct {
	namespace string
	uid       types.UID
	// generation is the Tenant's first generation that copies from it.
	generation int64
}

// pending says whether the origin recorded for an item whose source is in
// namespace from is one found in place of the namespace copied from, that
// the spec has not changed since.
func (o sourceOrigin) pending(from string, generation int64) bool {
	return o.uid != "" && o.namespace == from && generation < o.generation
}

// judgeOrigin decides whether an item whose source is in namespace from may
// be copied from the namespace of that name found now (uid) at the
// Tenant's generation, and returns the origin to record. A namespace is
// trusted by its name only the first time: none recorded (a new item, or a
// status lost) or the item moved to another namespace, whose source its
// editor was just checked for. One found in place of the recorded one was
// deleted and made again, perhaps by someone who may only create
// namespaces: it is trusted from the next change of the spec, which checks
// again that its editor may get every source (tenant-copy-rights).
func judgeOrigin(recorded sourceOrigin, from string, uid types.UID, generation int64) (sourceOrigin, bool) {
	switch {
	case recorded.uid == "" || recorded.namespace != from:
		return sourceOrigin{namespace: from, uid: uid, generation: generation}, true
	case recorded.uid != uid:
		return sourceOrigin{namespace: from, uid: uid, generation: generation + 1}, false
	}
	return recorded, !recorded.pending(from, generation)
}

// due says whether the copy of p in namespace ns must be written: the
// source is available, and the namespace does not hold this version yet as
// far as the last status of this very spec says (a namespace new to the
// tenant, a spec changed, a source edited).
func (p copyPlan) due(s *scope, ns string) bool {
	if p.state != tenancyv1.CopyReady || (p.item.From.Namespace == ns && p.item.From.Name == p.item.Name) {
		return false // the source itself is no copy
	}
	return !s.settled || !s.wasReady[ns] || p.recorded != p.version
}

// planCopies looks up each item's source in its watch
// (no API read while it is unchanged), and reads it from the API server
// only when some ready namespace needs a write. The watches the tenant no
// longer needs are stopped.
func (r *Reconciler) planCopies(ctx context.Context, s *scope, ready []string) error {
	recorded := map[string]tenancyv1.TenantCopyStatus{}
	for _, c := range s.t.Status.Copies {
		recorded[copyKey(c.Kind, c.Name)] = c
	}
	needed := make([]watchKey, 0, len(s.t.Spec.Copies))
	s.copies = make([]copyPlan, 0, len(s.t.Spec.Copies))
	for _, item := range s.t.Spec.Copies {
		rec := recorded[copyKey(item.Kind, item.Name)]
		p := copyPlan{item: item, recorded: rec.SourceResourceVersion,
			origin: sourceOrigin{namespace: rec.SourceNamespace, uid: types.UID(rec.SourceNamespaceUID), generation: rec.SourceNamespaceGeneration}}
		if isInline(item) {
			version, err := inlineVersion(item)
			if err != nil {
				return err
			}
			p.version, p.state, p.origin = version, tenancyv1.CopyReady, sourceOrigin{}
			s.copies = append(s.copies, p)
			continue
		}
		key := watchKey{kind: item.Kind, namespace: item.From.Namespace, name: item.From.Name}
		needed = append(needed, key)
		version, state, err := r.sources.lookup(ctx, s.t.Name, key)
		if err != nil {
			return err
		}
		p.version, p.state = version, state
		if state == tenancyv1.CopyReady && p.origin.pending(item.From.Namespace, s.t.Generation) {
			p.state = tenancyv1.CopySourceReplaced
		}
		p.message = stateMessage(item, p.state)
		if slices.ContainsFunc(ready, func(ns string) bool { return p.due(s, ns) }) {
			if item.Kind == tenancyv1.CopySecret {
				// The watch that said it was granted may have outlived
				// the owner's binding.
				granted, err := r.sources.stillGranted(ctx, key)
				if err != nil {
					return err
				}
				if !granted {
					p.state, p.message = tenancyv1.CopySourceNotGranted, stateMessage(item, tenancyv1.CopySourceNotGranted)
					s.copies = append(s.copies, p)
					continue
				}
			}
			source, err := r.readSource(ctx, item)
			if err != nil {
				return err
			}
			// The namespace is read after the source: one of the same UID
			// then held the source when it was read (a name is not taken
			// again while its namespace exists).
			var uid types.UID
			if source != nil {
				if uid, err = r.namespaceUID(ctx, item.From.Namespace); err != nil {
					return err
				}
			}
			if source == nil || uid == "" {
				p.state, p.message = tenancyv1.CopySourceNotFound, stateMessage(item, tenancyv1.CopySourceNotFound)
				s.copies = append(s.copies, p)
				continue
			}
			origin, trusted := judgeOrigin(p.origin, item.From.Namespace, uid, s.t.Generation)
			p.origin = origin
			if !trusted {
				// Nothing of the new namespace reaches a copy; the copies
				// keep what they hold.
				p.state, p.message = tenancyv1.CopySourceReplaced, stateMessage(item, tenancyv1.CopySourceReplaced)
				s.copies = append(s.copies, p)
				continue
			}
			p.source, p.version = source, source.GetResourceVersion()
		}
		s.copies = append(s.copies, p)
	}
	r.sources.keepOnly(s.t.Name, needed)
	return nil
}

// stateMessage explains an item's state other than Ready.
func stateMessage(item tenancyv1.TenantCopy, state tenancyv1.CopyState) string {
	switch state {
	case tenancyv1.CopySourceNotFound:
		return fmt.Sprintf("%s %s/%s does not exist", item.Kind, item.From.Namespace, item.From.Name)
	case tenancyv1.CopySourceNotGranted:
		return fmt.Sprintf("the manager may not read the Secrets of namespace %s: its owner binds the ClusterRole trellis-copy-source to the manager there to allow it", item.From.Namespace)
	case tenancyv1.CopySourceReplaced:
		return fmt.Sprintf("namespace %s was deleted and made again since the copies were made from it: the copies keep what they hold, and nothing is copied from the new namespace "+
			"until the Tenant's spec changes (remove and re-add the item, or edit the spec), which checks again that its editor may get %s %s/%s", item.From.Namespace, item.Kind, item.From.Namespace, item.From.Name)
	}
	return ""
}

// readSource reads an item's source from the API server (Secrets are never
// cached, and the cache holds no ConfigMap it did not label); nil when it
// is gone.
func (r *Reconciler) readSource(ctx context.Context, item tenancyv1.TenantCopy) (client.Object, error) {
	var obj client.Object = &corev1.ConfigMap{}
	if item.Kind == tenancyv1.CopySecret {
		obj = &corev1.Secret{}
	}
	err := r.apiReader.Get(ctx, client.ObjectKey{Namespace: item.From.Namespace, Name: item.From.Name}, obj)
	if err != nil {
		if client.IgnoreNotFound(err) == nil {
			return nil, nil
		}
		return nil, fmt.Errorf("reading the source of copy %s: %w", copyKey(item.Kind, item.Name), err)
	}
	return obj, nil
}

// namespaceUID reads the UID of a source namespace from the API server (the
// cache holds only the namespaces Trellis marked); empty when it is gone.
func (r *Reconciler) namespaceUID(ctx context.Context, name string) (types.UID, error) {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	if err := r.apiReader.Get(ctx, client.ObjectKey{Name: name}, ns); err != nil {
		if client.IgnoreNotFound(err) == nil {
			return "", nil
		}
		return "", fmt.Errorf("reading namespace %s, a copy source's: %w", name, err)
	}
	return ns.UID, nil
}

// copyWrites are the writes that keep, in one namespace, the copies due
// there, and delete those of the items the spec dropped.
func (r *Reconciler) copyWrites(s *scope, ns string) []write {
	writes := make([]write, 0, len(s.copies))
	for _, p := range s.copies {
		if (p.source == nil && !isInline(p.item)) || !p.due(s, ns) {
			continue
		}
		writes = append(writes, func(ctx context.Context) (found, error) {
			var f found
			var err error
			switch src := p.source.(type) {
			case nil:
				f, err = r.writeInline(ctx, s, p.item, ns)
			case *corev1.Secret:
				f, err = ensureChildWith(ctx, r, r.copyClients, s, "Secret", &corev1.Secret{}, desiredSecretCopy(s.t, p.item, src, ns), syncSecretCopy, s.wasReady[ns])
			case *corev1.ConfigMap:
				f, err = ensureChildWith(ctx, r, r.copyClients, s, "ConfigMap", &corev1.ConfigMap{}, desiredConfigMapCopy(s.t, p.item, src, ns), syncConfigMapCopy, s.wasReady[ns])
			}
			if f.conflict != "" || len(f.refused) > 0 {
				f.copiesUndone = []string{copyKey(p.item.Kind, p.item.Name)}
			}
			return f, err
		})
	}
	for _, key := range droppedCopies(s.t) {
		writes = append(writes, r.removeCopy(s, ns, key))
	}
	return writes
}

// removeCopy deletes a copy in ns if it is the tenant's (ownsCopy).
func (r *Reconciler) removeCopy(s *scope, ns string, c tenancyv1.TenantCopyStatus) write {
	return func(ctx context.Context) (found, error) {
		obj := emptyCopy(c.Kind)
		obj.SetNamespace(ns)
		obj.SetName(c.Name)
		_, err := children.DeleteOwned(ctx, r.copyClients, string(c.Kind), obj, func(o client.Object) (bool, error) { return r.ownsCopy(ctx, o, s.t) })
		return found{namespace: ns}, err
	}
}

// removeCopies deletes the copies of the tenant in a namespace it gives
// up: those the spec asks for and those the last status recorded. A
// NetworkPolicy or LimitRange given inline is a restriction, and stays
// (releasing never loosens anything, as with the guardrails); the
// tenant-guardrails policy keeps protecting it by its tenant label.
func (r *Reconciler) removeCopies(ctx context.Context, s *scope, ns string) error {
	kept := map[string]tenancyv1.TenantCopyStatus{}
	for _, c := range s.t.Status.Copies {
		kept[copyKey(c.Kind, c.Name)] = c
	}
	for _, c := range s.t.Spec.Copies {
		kept[copyKey(c.Kind, c.Name)] = tenancyv1.TenantCopyStatus{Kind: c.Kind, Name: c.Name}
	}
	for _, key := range slices.Sorted(maps.Keys(kept)) {
		if restricts(kept[key].Kind) {
			continue
		}
		if _, err := r.removeCopy(s, ns, kept[key])(ctx); err != nil {
			return err
		}
	}
	return nil
}

// droppedCopies are the copies the last status recorded whose item the spec
// no longer has.
func droppedCopies(t *tenancyv1.Tenant) []tenancyv1.TenantCopyStatus {
	var out []tenancyv1.TenantCopyStatus
	for _, c := range t.Status.Copies {
		if !slices.ContainsFunc(t.Spec.Copies, func(i tenancyv1.TenantCopy) bool { return i.Kind == c.Kind && i.Name == c.Name }) {
			out = append(out, c)
		}
	}
	return out
}

// ownsCopy: a copy is the tenant's child (ownsChild: Trellis' label and a
// tenant label, which only those who may change Tenants may put on a Secret
// or ConfigMap) that says it is a copy.
func (r *Reconciler) ownsCopy(ctx context.Context, obj client.Object, t *tenancyv1.Tenant) (bool, error) {
	if obj.GetAnnotations()[CopyOfAnnotation] == "" {
		return false, nil
	}
	return r.ownsChild(ctx, obj, t)
}

// copyStatuses are the items' states as planned, with the namespace each
// copies from, their versions kept only
// where every write of the item went through (undone: the items a write
// found blocked), so that a blocked copy is tried again.
func copyStatuses(plans []copyPlan, undone map[string]bool) []tenancyv1.TenantCopyStatus {
	out := make([]tenancyv1.TenantCopyStatus, 0, len(plans))
	for _, p := range plans {
		st := tenancyv1.TenantCopyStatus{Kind: p.item.Kind, Name: p.item.Name, State: p.state, Message: p.message,
			SourceNamespace: p.origin.namespace, SourceNamespaceUID: string(p.origin.uid), SourceNamespaceGeneration: p.origin.generation}
		if p.state == tenancyv1.CopyReady && !undone[copyKey(p.item.Kind, p.item.Name)] {
			st.SourceResourceVersion = p.version
		}
		out = append(out, st)
	}
	return out
}

// copyMeta is a copy's metadata: the tenant's marks and where it comes from.
func copyMeta(t *tenancyv1.Tenant, item tenancyv1.TenantCopy, ns string) metav1.ObjectMeta {
	m := childMeta(t, ns, item.Name)
	m.Annotations = map[string]string{CopyOfAnnotation: sourceKey(item)}
	if isInline(item) {
		m.Annotations[CopyOfAnnotation] = inlineCopyOf
	}
	return m
}

// desiredSecretCopy is the copy of a source Secret in one namespace: its
// type and data, the tenant's marks. The source's own labels and
// annotations are not copied (they may say what the copy is not, such as a
// ServiceAccount's name).
func desiredSecretCopy(t *tenancyv1.Tenant, item tenancyv1.TenantCopy, src *corev1.Secret, ns string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: copyMeta(t, item, ns), Type: src.Type, Data: cloneBytes(src.Data)}
}

// desiredConfigMapCopy is the copy of a source ConfigMap in one namespace.
func desiredConfigMapCopy(t *tenancyv1.Tenant, item tenancyv1.TenantCopy, src *corev1.ConfigMap, ns string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: copyMeta(t, item, ns), Data: maps.Clone(src.Data), BinaryData: cloneBytes(src.BinaryData)}
}

// syncCopyOf puts the marks and the source annotation back on a copy.
func syncCopyOf(live, desired client.Object, t *tenancyv1.Tenant) bool {
	changed := syncMarks(live, t)
	want := desired.GetAnnotations()[CopyOfAnnotation]
	if a := live.GetAnnotations(); a[CopyOfAnnotation] != want {
		if a == nil {
			a = map[string]string{}
		}
		a[CopyOfAnnotation] = want
		live.SetAnnotations(a)
		changed = true
	}
	return changed
}

// syncSecretCopy brings a copy back to its source's type and data. A type
// that changed is refused by the API server (it is immutable) and reported.
func syncSecretCopy(live, desired *corev1.Secret, t *tenancyv1.Tenant) bool {
	changed := syncCopyOf(live, desired, t)
	if live.Type != desired.Type {
		live.Type, changed = desired.Type, true
	}
	if !maps.EqualFunc(live.Data, desired.Data, slices.Equal) {
		live.Data, changed = cloneBytes(desired.Data), true
	}
	return changed
}

// syncConfigMapCopy brings a copy back to its source's data.
func syncConfigMapCopy(live, desired *corev1.ConfigMap, t *tenancyv1.Tenant) bool {
	changed := syncCopyOf(live, desired, t)
	if !maps.Equal(live.Data, desired.Data) {
		live.Data, changed = maps.Clone(desired.Data), true
	}
	if !maps.EqualFunc(live.BinaryData, desired.BinaryData, slices.Equal) {
		live.BinaryData, changed = cloneBytes(desired.BinaryData), true
	}
	return changed
}

// cloneBytes copies a Secret's or ConfigMap's binary data, values included:
// a copy shares nothing with the object read.
func cloneBytes(in map[string][]byte) map[string][]byte {
	if in == nil {
		return nil
	}
	out := make(map[string][]byte, len(in))
	for k, v := range in {
		out[k] = slices.Clone(v)
	}
	return out
}

// readThrough is a client whose reads go to the API server: copies are
// read around the cache, which holds no Secret and no whole ConfigMap of
// a tenant's.
type readThrough struct {
	client.Client
	reader client.Reader
}

func (c readThrough) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return c.reader.Get(ctx, key, obj, opts...)
}
