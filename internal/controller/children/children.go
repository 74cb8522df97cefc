// Package children holds what every Trellis controller does with the objects
// it creates: find them without adopting foreign ones, and apply them only
// when they differ from what we want.
package children

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/internal/controller/setup"
)

// Lookup loads the object named by obj's key into obj and reports whether it
// exists. The cache holds only objects labelled managed-by=trellis, so a miss
// there is confirmed with one uncached read: an object that exists without our
// label must be seen (and then refused, not adopted), never overwritten.
func Lookup(ctx context.Context, cached client.Reader, uncached client.Reader, obj client.Object) (bool, error) {
	key := client.ObjectKeyFromObject(obj)
	err := cached.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		err = uncached.Get(ctx, key, obj)
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading %T %s: %w", obj, key, err)
	}
	return true, nil
}

// ApplyIfChanged sends desired with Server-Side Apply under Trellis' field
// manager, unless current (the configuration extracted from the live object
// for that field manager) already equals it. It reports whether it applied.
func ApplyIfChanged(ctx context.Context, c client.Client, desired runtime.ApplyConfiguration, current any, exists bool) (bool, error) {
	if exists && equality.Semantic.DeepEqual(current, desired) {
		return false, nil
	}
	if err := c.Apply(ctx, desired, client.FieldOwner(setup.FieldManager), client.ForceOwnership); err != nil {
		return false, err
	}
	return true, nil
}
