// Package status writes the status of Trellis objects: only when it changed,
// never twice the same, and with the Events a kind declares.
package status

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"sync"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
// copy, and does not send the same status again.
type Patcher[O Object, S any] struct {
	client   client.Client
	recorder recorder.EventRecorder
	status   func(O) *S
	events   []EventRule

	mu      sync.Mutex
	written map[types.NamespacedName]written[O]
}

// written is the status Trellis last wrote for an object (on an otherwise
// empty O: the object the API server answers a status patch with carries
// its whole spec, which may be large, and is not worth remembering), and
// the resourceVersion the object had just before that write.
type written[O any] struct {
	rvBefore string
	obj      O
}

// NewPatcher returns a Patcher; status points into an object's status.
func NewPatcher[O Object, S any](c client.Client, rec recorder.EventRecorder, status func(O) *S, events ...EventRule) *Patcher[O, S] {
	return &Patcher[O, S]{client: c, recorder: rec, status: status, events: events, written: map[types.NamespacedName]written[O]{}}
}

// Get reads the object from the cache into obj and, if the cache has not yet
// seen our last status write, puts that status on it. It reports false when
// the object is gone (and forgets it).
func (p *Patcher[O, S]) Get(ctx context.Context, key types.NamespacedName, obj O) (bool, error) {
	if err := p.client.Get(ctx, key, obj); err != nil {
		if apierrors.IsNotFound(err) {
			p.Forget(key)
			return false, nil
		}
		return false, err
	}
	p.mu.Lock()
	w, ok := p.written[key]
	p.mu.Unlock()
	if ok && w.rvBefore == obj.GetResourceVersion() {
		latest := w.obj.DeepCopyObject().(O)
		*p.status(obj) = *p.status(latest)
	}
	return true, nil
}

// Patch writes next as obj's status when it differs from obj's, then raises
// the Events the rules ask for. It reports whether it wrote.
func (p *Patcher[O, S]) Patch(ctx context.Context, obj O, next S) (bool, error) {
	if equality.Semantic.DeepEqual(*p.status(obj), next) {
		return false, nil
	}
	before := slices.Clone(obj.GetConditions())
	rvBefore := obj.GetResourceVersion()
	patch := client.MergeFrom(obj.DeepCopyObject().(O))
	*p.status(obj) = next
	if err := p.client.Status().Patch(ctx, obj, patch); err != nil {
		return false, fmt.Errorf("writing status: %w", err)
	}
	statusOnly := newObject[O]()
	*p.status(statusOnly) = *p.status(obj.DeepCopyObject().(O))
	p.mu.Lock()
	p.written[client.ObjectKeyFromObject(obj)] = written[O]{rvBefore: rvBefore, obj: statusOnly}
	p.mu.Unlock()
	p.recordEvents(obj, before, obj.GetConditions())
	return true, nil
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
	delete(p.written, key)
}

func (p *Patcher[O, S]) recordEvents(obj O, before, after []metav1.Condition) {
	for _, rule := range p.events {
		now := meta.FindStatusCondition(after, rule.Condition)
		if now == nil || now.Status != rule.Status || slices.Contains(rule.Except, now.Reason) {
			continue
		}
		if was := meta.FindStatusCondition(before, rule.Condition); was != nil && was.Status == now.Status && was.Reason == now.Reason {
			continue
		}
		p.recorder.Eventf(obj, nil, rule.Type, now.Reason, eventAction, "%s", now.Message)
	}
}
