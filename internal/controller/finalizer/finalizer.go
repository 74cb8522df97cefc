// Package finalizer adds and removes the finalizers Trellis puts on its
// objects, with one patch each, and never loses another party's finalizer.
package finalizer

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Ensure adds name to obj's finalizers unless it is there; it reports whether
// it wrote. The patch carries obj's resourceVersion: a JSON merge patch
// replaces the whole list, so a concurrent change by someone else must make
// it fail (and be retried), not be overwritten.
func Ensure(ctx context.Context, c client.Client, obj client.Object, name string) (bool, error) {
	if controllerutil.ContainsFinalizer(obj, name) {
		return false, nil
	}
	patch := client.MergeFromWithOptions(obj.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
	controllerutil.AddFinalizer(obj, name)
	if err := c.Patch(ctx, obj, patch); err != nil {
		return false, fmt.Errorf("adding finalizer %s: %w", name, err)
	}
	return true, nil
}

// Remove takes name out of obj's finalizers, if it is there. An object
// already gone is not an error.
func Remove(ctx context.Context, c client.Client, obj client.Object, name string) error {
	if !controllerutil.ContainsFinalizer(obj, name) {
		return nil
	}
	patch := client.MergeFromWithOptions(obj.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(obj, name)
	if err := c.Patch(ctx, obj, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing finalizer %s: %w", name, err)
	}
	return nil
}
