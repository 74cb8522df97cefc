package tenancy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
)

// copySourceIndex finds the Tenants that copy a source (sourceKey).
const copySourceIndex = "spec.copies.source"

// sourceSyncTimeout bounds the wait for a new watch's first list.
const sourceSyncTimeout = 10 * time.Second

var errSourcesNotStarted = errors.New("the watches of copy sources are not started yet")

// watchKey is one watch: one source, by kind, namespace and name.
type watchKey struct {
	kind            tenancyv1.CopyKind
	namespace, name string
}

func (k watchKey) resource() schema.GroupVersionResource {
	if k.kind == tenancyv1.CopySecret {
		return schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	}
	return schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
}

// sourceWatches watches the sources of the Tenants' copies, so that an edit
// of a source reaches every copy without polling: per source, one watch of
// its metadata, selected by name and cut down to its name, namespace, UID
// and resourceVersion (no data, no labels: a source costs the manager a few
// hundred bytes, whatever else its namespace holds; those who may write
// there must not grow the manager's memory). A watch is started by the first Tenant that needs it and stopped
// when the last one no longer does. Secrets are watched only where the
// manager may list them, which its own ClusterRole allows nowhere: a
// namespace's owner allows it by binding trellis-copy-source to the manager
// there. A watch refused later (the binding removed) is stopped, and its
// Tenants told.
type sourceWatches struct {
	client  metadata.Interface
	tenants client.Reader // the cache, with copySourceIndex
	events  chan event.GenericEvent

	mu      sync.Mutex
	ctx     context.Context
	watches map[watchKey]*sourceWatch
}

type sourceWatch struct {
	informer toolscache.SharedIndexInformer
	stop     context.CancelFunc
	users    map[string]bool // Tenant names
}

func newSourceWatches(c metadata.Interface, tenants client.Reader) *sourceWatches {
	return &sourceWatches{client: c, tenants: tenants, events: make(chan event.GenericEvent, 64), watches: map[watchKey]*sourceWatch{}}
}

// Start runs until the manager stops (manager.Runnable), then stops every
// watch. Reconciles run only on the leader, and so do the watches.
func (w *sourceWatches) Start(ctx context.Context) error {
	w.mu.Lock()
	w.ctx = ctx
	w.mu.Unlock()
	<-ctx.Done()
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, sw := range w.watches {
		sw.stop()
		delete(w.watches, k)
	}
	return nil
}

// NeedLeaderElection: only the leader reconciles.
func (w *sourceWatches) NeedLeaderElection() bool { return true }

// lookup returns the resourceVersion of the source key watches, starting the watch for tenant if none runs: SourceNotGranted when
// the manager may not list there, SourceNotFound when the object does not
// exist. A failed list is an error.
func (w *sourceWatches) lookup(ctx context.Context, tenant string, key watchKey) (string, tenancyv1.CopyState, error) {
	if w == nil {
		return "", "", errSourcesNotStarted
	}
	sw, granted, err := w.ensure(ctx, tenant, key)
	if err != nil || !granted {
		return "", tenancyv1.CopySourceNotGranted, err
	}
	obj, exists, err := sw.informer.GetIndexer().GetByKey(key.namespace + "/" + key.name)
	if err != nil {
		return "", "", err
	}
	if !exists {
		return "", tenancyv1.CopySourceNotFound, nil
	}
	return obj.(*metav1.PartialObjectMetadata).ResourceVersion, tenancyv1.CopyReady, nil
}

// ensure returns the watch of key, with tenant among its users, starting it
// (and waiting for its first list) if none runs.
func (w *sourceWatches) ensure(ctx context.Context, tenant string, key watchKey) (*sourceWatch, bool, error) {
	w.mu.Lock()
	if sw, ok := w.watches[key]; ok {
		sw.users[tenant] = true
		w.mu.Unlock()
		return sw, true, nil
	}
	runCtx := w.ctx
	w.mu.Unlock()
	if runCtx == nil {
		return nil, false, errSourcesNotStarted
	}
	// Asked first, so that a namespace that did not allow it costs one
	// refused list, and no watch that fails forever.
	if granted, err := w.mayList(ctx, key); err != nil || !granted {
		return nil, false, err
	}
	byName := func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", key.name).String()
	}
	informer := metadatainformer.NewFilteredMetadataInformer(w.client, key.resource(), key.namespace, 0, toolscache.Indexers{}, byName).Informer()
	if err := informer.SetTransform(cutSource); err != nil {
		return nil, false, err
	}
	watchCtx, stop := context.WithCancel(runCtx)
	sw := &sourceWatch{informer: informer, stop: stop, users: map[string]bool{tenant: true}}
	if err := informer.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *toolscache.Reflector, err error) {
		toolscache.DefaultWatchErrorHandler(ctx, r, err)
		if apierrors.IsForbidden(err) {
			w.refused(key, sw)
		}
	}); err != nil {
		stop()
		return nil, false, err
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.changed(key, o) },
		UpdateFunc: func(_, o any) { w.changed(key, o) },
		DeleteFunc: func(o any) { w.changed(key, o) },
	}); err != nil {
		stop()
		return nil, false, err
	}
	go informer.RunWithContext(watchCtx)
	syncCtx, cancel := context.WithTimeout(ctx, sourceSyncTimeout)
	defer cancel()
	if !toolscache.WaitForCacheSync(syncCtx.Done(), informer.HasSynced) {
		stop()
		return nil, false, fmt.Errorf("the watch of the %s of namespace %s, copy sources, did not sync", key.resource().Resource, key.namespace)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if other, ok := w.watches[key]; ok { // started meanwhile by another reconcile
		stop()
		other.users[tenant] = true
		return other, true, nil
	}
	w.watches[key] = sw
	return sw, true, nil
}

// mayList asks the API server whether the manager may list the objects of
// key: for Secrets, whether the namespace's owner allows it.
func (w *sourceWatches) mayList(ctx context.Context, key watchKey) (bool, error) {
	_, err := w.client.Resource(key.resource()).Namespace(key.namespace).List(ctx, metav1.ListOptions{Limit: 1})
	switch {
	case apierrors.IsForbidden(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("listing the %s of namespace %s, copy sources: %w", key.resource().Resource, key.namespace, err)
	}
	return true, nil
}

// stillGranted asks again, before a source is read, whether the manager may
// list the objects of key: a watch the API server allowed runs on after the
// owner removed the binding, until it times out (5 to 10 minutes), and the
// manager's own right to get any Secret by name must not stand in for the
// owner's consent meanwhile. A refused watch is stopped, and its Tenants
// told.
func (w *sourceWatches) stillGranted(ctx context.Context, key watchKey) (bool, error) {
	granted, err := w.mayList(ctx, key)
	if err != nil || granted {
		return granted, err
	}
	w.mu.Lock()
	sw := w.watches[key]
	w.mu.Unlock()
	if sw != nil {
		w.refused(key, sw)
	}
	return false, nil
}

// keepOnly leaves tenant among the users of the watches of needed only,
// and stops the watches nobody uses any more.
func (w *sourceWatches) keepOnly(tenant string, needed []watchKey) {
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	keep := map[watchKey]bool{}
	for _, k := range needed {
		keep[k] = true
	}
	for k, sw := range w.watches {
		if keep[k] {
			continue
		}
		delete(sw.users, tenant)
		if len(sw.users) == 0 {
			sw.stop()
			delete(w.watches, k)
		}
	}
}

// refused stops a watch the API server no longer allows, and tells its
// Tenants, which then find the source not granted.
func (w *sourceWatches) refused(key watchKey, sw *sourceWatch) {
	w.mu.Lock()
	if w.watches[key] != sw {
		w.mu.Unlock()
		return
	}
	delete(w.watches, key)
	sw.stop()
	users := make([]string, 0, len(sw.users))
	for u := range sw.users {
		users = append(users, u)
	}
	w.mu.Unlock()
	for _, u := range users {
		w.tell(u)
	}
}

// changed tells the Tenants that copy an object of the watch that it
// changed (or appeared, or went).
func (w *sourceWatches) changed(key watchKey, o any) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	obj, ok := o.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	list := &tenancyv1.TenantList{}
	ctx := context.Background()
	if err := w.tenants.List(ctx, list, client.MatchingFields{copySourceIndex: string(key.kind) + "/" + key.namespace + "/" + obj.Name}); err != nil {
		log.FromContext(ctx).Error(err, "mapping a copy source to its Tenants", "namespace", key.namespace, "name", obj.Name)
		return
	}
	for i := range list.Items {
		w.tell(list.Items[i].Name)
	}
}

func (w *sourceWatches) tell(tenant string) {
	w.mu.Lock()
	ctx := w.ctx
	w.mu.Unlock()
	if ctx == nil {
		return
	}
	select {
	case w.events <- event.GenericEvent{Object: &tenancyv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: tenant}}}:
	case <-ctx.Done():
	}
}

// cutSource keeps of a source what lookup reads: its name, namespace, UID
// and resourceVersion.
func cutSource(in any) (any, error) {
	obj, ok := in.(*metav1.PartialObjectMetadata)
	if !ok {
		return in, nil
	}
	return &metav1.PartialObjectMetadata{TypeMeta: obj.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: obj.Name, Namespace: obj.Namespace, UID: obj.UID, ResourceVersion: obj.ResourceVersion,
	}}, nil
}

// sourceKeys are the values of copySourceIndex for a Tenant.
func sourceKeys(o client.Object) []string {
	t, ok := o.(*tenancyv1.Tenant)
	if !ok {
		return nil
	}
	out := make([]string, 0, len(t.Spec.Copies))
	for _, c := range t.Spec.Copies {
		if isInline(c) {
			continue
		}
		out = append(out, sourceKey(c))
	}
	return out
}
