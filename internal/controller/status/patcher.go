// Package status writes the status of Trellis objects: only when it changed,
// never twice the same, and with the Events a kind declares.
package status

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

// Object is a Trellis API object with status conditions.
type Object interface {
	client.Object
	GetConditions() []metav1.Condition
}

// EventRule raises an Event when Condition enters Status, or changes its
// reason while in it. The Event carries the condition's reason and message.
type EventRule struct {
	Condition string
	Status    metav1.ConditionStatus
	// Type is corev1.EventTypeNormal or corev1.EventTypeWarning.
	Type string
	// Except lists reasons that stay out of the event stream (routine steps).
	Except []string
}

// eventAction is the action of every status Event (events.k8s.io requires one).
const eventAction = "Reconcile"

// Patcher writes the status S of objects O. It remembers the last status it
// wrote for each object until the cache has caught up with that write, so a
// reconcile that runs in between builds on what was written, not on the stale
// copy, and does not send the same status again. It forgets the write as soon
// as the cache shows the object at a resourceVersion other than those known
// to come before the write, or the object gone: at once when it follows the
// cache (FollowCache), else at the object's next Get. What it holds thus
// follows the writes the cache has not yet seen, not the objects.
type Patcher[O Object, S any] struct {
	client   client.Client
	recorder recorder.EventRecorder
	status   func(O) *S
	events   []EventRule
	saved    prometheus.Counter

	mu      sync.Mutex
	written map[types.NamespacedName]*written[O]
	// stoodIn is the cache's own status of each object Get last put a
	// remembered status on, until its Patch: had the status the reconcile
	// computed been compared with that, it would have been written again.
	stoodIn map[types.NamespacedName]S
}

// written is the status Trellis last wrote for an object (on an otherwise
// empty O: the object the API server answers a status patch with carries
// its whole spec, which may be large, and is not worth remembering), and
// the resourceVersions the cache may show that come before that write.
//
// resourceVersions are opaque: they can be compared for equality only, not
// ordered. What the patcher knows to come before its write are the version
// the write was made on and, when it wrote again before the cache showed its
// last write, the versions before and after that one. The cache of one object
// only moves forward, so once it shows any other version it has the write
// (the version the write returned, or a later one) or is at someone else's
// write from before ours, which the remembered status is no use for either:
// it would not be put on that copy, nor on any copy after it.
type written[O any] struct {
	before []string
	// after is the version the write returned ("" while it is under way).
	after string
	obj   O
}

// maxBefore bounds the versions remembered before a write: more than a few
// writes of one object while the cache shows none of them means its watch
// is broken, and the informer will list again.
const maxBefore = 8

// precedes reports whether the cache, at resourceVersion rv, has not yet seen the write.
func (w *written[O]) precedes(rv string) bool { return slices.Contains(w.before, rv) }

// NewPatcher returns a Patcher; status points into an object's status.
func NewPatcher[O Object, S any](c client.Client, rec recorder.EventRecorder, status func(O) *S, events ...EventRule) *Patcher[O, S] {
	return &Patcher[O, S]{client: c, recorder: rec, status: status, events: events,
		saved:   savedWrites.WithLabelValues(kindOf[O]()),
		written: map[types.NamespacedName]*written[O]{}, stoodIn: map[types.NamespacedName]S{}}
}

// Get reads the object from the cache into obj and, if the cache has not yet
// seen our last status write, puts that status on it; if it has, it forgets
// the write. It reports false when the object is gone (and forgets it). On
// an error its false says nothing: a read that failed is no deletion.
func (p *Patcher[O, S]) Get(ctx context.Context, key types.NamespacedName, obj O) (bool, error) {
	if err := p.client.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			p.Forget(key)
			return false, nil
		}
		return false, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	w, ok := p.written[key]
	if !ok {
		return true, nil
	}
	if !w.precedes(obj.GetResourceVersion()) {
		p.drop(key)
		return true, nil
	}
	latest := w.obj.DeepCopyObject().(O)
	p.stoodIn[key] = *p.status(obj)
	*p.status(obj) = *p.status(latest)
	return true, nil
}

// Patch writes next as obj's status when it differs from obj's, then raises
// the Events the rules ask for, except those about the conditions in told:
// the caller raises an Event of its own that says more (a bucket it created
// says so; "Healthy" besides would tell a person nothing new). It reports
// whether it wrote.
func (p *Patcher[O, S]) Patch(ctx context.Context, obj O, next S, told ...string) (bool, error) {
	key := client.ObjectKeyFromObject(obj)
	p.mu.Lock()
	cachedStatus, stoodIn := p.stoodIn[key]
	delete(p.stoodIn, key)
	p.mu.Unlock()
	if equality.Semantic.DeepEqual(*p.status(obj), next) {
		if stoodIn && !equality.Semantic.DeepEqual(cachedStatus, next) {
			p.saved.Inc()
		}
		return false, nil
	}
	before := slices.Clone(obj.GetConditions())
	patch := client.MergeFrom(obj.DeepCopyObject().(O))
	*p.status(obj) = next

	// The write is remembered before it is sent: the cache may show its
	// result before the API server's answer is read, and the watch event
	// that tells FollowCache so must find it.
	w := &written[O]{before: []string{obj.GetResourceVersion()}, obj: p.statusOnly(obj)}
	p.mu.Lock()
	prev := p.written[key]
	if prev != nil && (prev.precedes(w.before[0]) || prev.after == w.before[0]) {
		// A write on one the cache has not shown yet: what came before
		// that one comes before this one too.
		w.before = append(slices.Clone(prev.before), prev.after)
		if n := len(w.before); n > maxBefore {
			w.before = w.before[n-maxBefore:]
		}
	} else {
		prev = nil
	}
	p.written[key] = w
	p.mu.Unlock()

	err := p.client.Status().Patch(ctx, obj, patch)
	p.mu.Lock()
	if p.written[key] == w { // else the cache has shown the write already
		switch {
		case err != nil && prev != nil:
			p.written[key] = prev
		case err != nil:
			p.drop(key)
		default:
			w.after, w.obj = obj.GetResourceVersion(), p.statusOnly(obj)
		}
	}
	p.mu.Unlock()
	if err != nil {
		return false, fmt.Errorf("writing status: %w", err)
	}
	p.recordEvents(obj, before, obj.GetConditions(), told)
	return true, nil
}

// statusOnly returns a new O holding a copy of obj's status and nothing else
// (copying obj whole would copy its spec too, only to drop it).
func (p *Patcher[O, S]) statusOnly(obj O) O {
	shallow := newObject[O]()
	*p.status(shallow) = *p.status(obj)
	return shallow.DeepCopyObject().(O)
}

// newObject returns a new, empty O (O is a pointer to a struct).
func newObject[O client.Object]() O {
	var zero O
	return reflect.New(reflect.TypeOf(zero).Elem()).Interface().(O)
}

// Forget drops what is remembered of a deleted object.
func (p *Patcher[O, S]) Forget(key types.NamespacedName) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.drop(key)
}

// drop forgets the write to key; p.mu is held. When none is left, the map
// is replaced: a Go map keeps the room it grew to when its keys are deleted,
// so a burst of writes (a start-up's) would be paid for as long as the
// manager runs.
func (p *Patcher[O, S]) drop(key types.NamespacedName) {
	delete(p.written, key)
	delete(p.stoodIn, key)
	if len(p.written) == 0 {
		p.written = map[types.NamespacedName]*written[O]{}
	}
	if len(p.stoodIn) == 0 {
		p.stoodIn = map[types.NamespacedName]S{}
	}
}

// Remembered is how many writes the patcher holds, which the cache has not
// shown yet.
func (p *Patcher[O, S]) Remembered() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.written)
}

// Informers is the part of the manager's cache FollowCache needs.
type Informers interface {
	GetInformer(ctx context.Context, obj client.Object, opts ...cache.InformerGetOption) (cache.Informer, error)
}

// FollowCache makes the patcher forget a write as soon as the cache shows
// the object past it, or deleted. Without it, a write is forgotten at the
// object's next Get, and a status write starts no reconcile (the controllers
// watch generation changes), so the last status an object was given would be
// kept until its next periodic check, spec change or resync.
//
// It also keeps the kind's trellis_objects series from the same events.
func (p *Patcher[O, S]) FollowCache(ctx context.Context, informers Informers) error {
	inf, err := informers.GetInformer(ctx, newObject[O](), cache.BlockUntilSynced(false))
	if err != nil {
		return fmt.Errorf("following the cache of %T: %w", newObject[O](), err)
	}
	count := newObjectCounter(objectsGauge, kindOf[O]())
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			p.cached(obj)
			count.changed(nil, obj)
		},
		UpdateFunc: func(old, obj any) {
			p.cached(obj)
			count.changed(old, obj)
		},
		DeleteFunc: func(obj any) {
			if gone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
				obj = gone.Obj
			}
			if o, ok := obj.(client.Object); ok {
				p.Forget(client.ObjectKeyFromObject(o))
			}
			count.changed(obj, nil)
		},
	})
	return err
}

// cached forgets the write to an object the cache now shows past it.
func (p *Patcher[O, S]) cached(obj any) {
	o, ok := obj.(client.Object)
	if !ok {
		return
	}
	key := client.ObjectKeyFromObject(o)
	p.mu.Lock()
	defer p.mu.Unlock()
	if w, ok := p.written[key]; ok && !w.precedes(o.GetResourceVersion()) {
		p.drop(key)
	}
}

func (p *Patcher[O, S]) recordEvents(obj O, before, after []metav1.Condition, told []string) {
	for _, rule := range p.events {
		now := meta.FindStatusCondition(after, rule.Condition)
		if now == nil || slices.Contains(told, rule.Condition) || now.Status != rule.Status || slices.Contains(rule.Except, now.Reason) {
			continue
		}
		if was := meta.FindStatusCondition(before, rule.Condition); was != nil && was.Status == now.Status && was.Reason == now.Reason {
			continue
		}
		p.recorder.Eventf(obj, nil, rule.Type, now.Reason, eventAction, "%s", now.Message)
	}
}
