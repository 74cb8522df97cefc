package children

import (
	"context"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Outcome says what CreateOrSync did.
type Outcome int

const (
	// Unchanged means the child already was as wanted; nothing was written.
	Unchanged Outcome = iota
	// Created means the child did not exist and was created.
	Created
	// Updated means the child existed, was ours, and was patched back to what is wanted.
	Updated
)

// Child describes one object CreateOrSync keeps: how to recognise it as ours
// and how to bring a live copy back to what is wanted.
type Child[T client.Object] struct {
	// Kind names the child in errors and status messages.
	Kind string
	// Live is an empty object of the child's type; it is filled with the
	// child as found (or created).
	Live T
	// Desired is the whole object as it is created: name, marks, spec.
	Desired T
	// Owns reports whether a live object carries the marks that make it
	// ours. Deciding may read other objects; a read that fails is an error,
	// never a "not ours": a failed cache read must not be shown to a person
	// as a name someone else holds.
	Owns func(live T) (bool, error)
	// Sync changes live where it differs from what is wanted, in the fields
	// the controller keeps, and reports whether it changed anything.
	Sync func(live T) bool
	// ExpectExists says an earlier reconcile created the child: a cache miss
	// then more likely means the cache is behind than that the child is gone,
	// so the API server is read before anything is created.
	ExpectExists bool
	// BeforeCreate and BeforeUpdate, if set, run just before the child is
	// created, or patched once Owns has found it ours: what must be recorded
	// before the child is as wanted is recorded there. An error stops the
	// write and is returned.
	BeforeCreate, BeforeUpdate func(context.Context) error
}

// CreateOrSync keeps a child that carries marks instead of an owner
// reference. A child found in the cache is patched only when Sync changes
// it. On a cache miss it is created straight away, without a confirming
// read: the API server refuses a create whose name is taken, and only then
// is the object read, uncached, to tell "ours, the cache is behind" from
// "someone else's" (a NotOwnedError: never adopted, never overwritten). So
// the creation path costs one write and no read.
func CreateOrSync[T client.Object](ctx context.Context, c Clients, ch Child[T]) (Outcome, error) {
	key := client.ObjectKeyFromObject(ch.Desired)
	err := c.Cached.Get(ctx, key, ch.Live)
	switch {
	case apierrors.IsNotFound(err) && ch.ExpectExists:
		err = c.Uncached.Get(ctx, key, ch.Live)
		if apierrors.IsNotFound(err) {
			return create(ctx, c, ch, key)
		}
	case apierrors.IsNotFound(err):
		return create(ctx, c, ch, key)
	}
	if err != nil {
		return Unchanged, fmt.Errorf("reading %s %s: %w", ch.Kind, key, err)
	}
	return syncLive(ctx, c, ch)
}

func create[T client.Object](ctx context.Context, c Clients, ch Child[T], key client.ObjectKey) (Outcome, error) {
	if ch.BeforeCreate != nil {
		if err := ch.BeforeCreate(ctx); err != nil {
			return Unchanged, fmt.Errorf("before creating %s %s: %w", ch.Kind, key, err)
		}
	}
	obj := ch.Desired.DeepCopyObject().(T)
	err := c.Cached.Create(ctx, obj)
	if err == nil {
		// Hand the created object back through Live, as a read would.
		reflect.ValueOf(ch.Live).Elem().Set(reflect.ValueOf(obj).Elem())
		return Created, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return Unchanged, fmt.Errorf("creating %s %s: %w", ch.Kind, key, err)
	}
	if err := c.Uncached.Get(ctx, key, ch.Live); err != nil {
		// Gone again in between: the next reconcile creates it.
		return Unchanged, fmt.Errorf("reading %s %s after a create refused as existing: %w", ch.Kind, key, err)
	}
	return syncLive(ctx, c, ch)
}

func syncLive[T client.Object](ctx context.Context, c Clients, ch Child[T]) (Outcome, error) {
	owns, err := ch.Owns(ch.Live)
	if err != nil {
		return Unchanged, fmt.Errorf("telling whether %s %s is ours: %w", ch.Kind, ch.Live.GetName(), err)
	}
	if !owns {
		return Unchanged, &NotOwnedError{Kind: ch.Kind, Name: ch.Live.GetName()}
	}
	before := ch.Live.DeepCopyObject().(T)
	if !ch.Sync(ch.Live) {
		return Unchanged, nil
	}
	if ch.BeforeUpdate != nil {
		if err := ch.BeforeUpdate(ctx); err != nil {
			return Unchanged, fmt.Errorf("before updating %s %s: %w", ch.Kind, ch.Live.GetName(), err)
		}
	}
	if err := c.Cached.Patch(ctx, ch.Live, client.MergeFrom(before)); err != nil {
		return Unchanged, fmt.Errorf("updating %s %s: %w", ch.Kind, ch.Live.GetName(), err)
	}
	return Updated, nil
}

// DeleteOwned deletes the child named by obj if the cache holds it and owns
// says it is ours; the cache holds every child the controller marked, so an
// object outside it is never ours to delete. The delete carries the UID
// seen, so an object re-created in between is left alone. It reports
// whether it deleted; owns failing is an error (nothing is deleted).
func DeleteOwned[T client.Object](ctx context.Context, c Clients, kind string, obj T, owns func(T) (bool, error)) (bool, error) {
	if err := c.Cached.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		return false, client.IgnoreNotFound(err)
	}
	if !obj.GetDeletionTimestamp().IsZero() {
		return false, nil
	}
	if ours, err := owns(obj); err != nil || !ours {
		if err != nil {
			return false, fmt.Errorf("telling whether %s %s is ours: %w", kind, obj.GetName(), err)
		}
		return false, nil
	}
	uid := obj.GetUID()
	if err := c.Cached.Delete(ctx, obj, client.Preconditions{UID: &uid}); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
			return false, nil
		}
		return false, fmt.Errorf("deleting %s %s: %w", kind, obj.GetName(), err)
	}
	return true, nil
}
