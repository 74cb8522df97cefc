// Package children holds what every Trellis controller does with the objects
// it creates: find them without ever adopting foreign ones, create them, and
// apply them only when they differ from what is wanted.
package children

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/internal/controller/setup"
)

// Clients are the two ways to read a child: the cache, which holds only
// objects labelled managed-by=trellis, and the API server, which also sees
// objects that exist without that label.
type Clients struct {
	Cached   client.Client
	Uncached client.Reader
}

// NotOwnedError says a child's name is taken by an object the owner does not
// control. Trellis never adopts such an object: it reports it and waits.
type NotOwnedError struct {
	Kind string
	Name string
}

func (e *NotOwnedError) Error() string {
	return fmt.Sprintf("%s %s already exists and was not created by Trellis for this object, which never adopts what it did not create; delete or rename it", e.Kind, e.Name)
}

// IsNotOwned reports whether err is (or wraps) a NotOwnedError.
func IsNotOwned(err error) bool {
	var e *NotOwnedError
	return errors.As(err, &e)
}

// Lookup loads the object named by obj's key into obj and reports whether it
// exists. A cache miss is confirmed with one uncached read: an object that
// exists without our label must be seen (and then refused, not adopted),
// never overwritten.
func Lookup(ctx context.Context, c Clients, obj client.Object) (bool, error) {
	key := client.ObjectKeyFromObject(obj)
	err := c.Cached.Get(ctx, key, obj)
	if apierrors.IsNotFound(err) {
		err = c.Uncached.Get(ctx, key, obj)
	}
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading %T %s: %w", obj, key, err)
	}
	return true, nil
}

// LookupOwned is Lookup that also refuses an object owner does not control,
// with a NotOwnedError.
func LookupOwned(ctx context.Context, c Clients, owner metav1.Object, kind string, obj client.Object) (bool, error) {
	exists, err := Lookup(ctx, c, obj)
	if err != nil || !exists {
		return exists, err
	}
	if !metav1.IsControlledBy(obj, owner) {
		return true, &NotOwnedError{Kind: kind, Name: obj.GetName()}
	}
	return true, nil
}

// Extractor returns the configuration a field manager applied to live, as
// the client-go Extract<Kind> functions do.
type Extractor[T client.Object, A runtime.ApplyConfiguration] func(live T, fieldManager string) (A, error)

// ApplyOwned brings the child named by desired to desired with Server-Side
// Apply under Trellis' field manager. live is filled with the current object
// when it exists (the caller may read its status; a child read from the cache
// is trimmed by TrimApplied and has no spec). The request is skipped when the
// configuration Trellis applied last, extracted from live (or its hash, which
// the cache keeps instead), already equals desired: drift in a field we own
// moves that field to another manager, so it shows up as a difference and is
// applied back. It reports whether it wrote.
func ApplyOwned[T client.Object, A runtime.ApplyConfiguration](ctx context.Context, c Clients, owner metav1.Object, kind string, live T, desired A, extract Extractor[T, A]) (applied bool, err error) {
	exists, err := LookupOwned(ctx, c, owner, kind, live)
	if err != nil {
		return false, err
	}
	if exists {
		same, err := alreadyApplied(live, desired, extract)
		if err != nil {
			return false, fmt.Errorf("extracting %s %s: %w", kind, live.GetName(), err)
		}
		if same {
			return false, nil
		}
	}
	if err := c.Cached.Apply(ctx, desired, client.FieldOwner(setup.FieldManager), client.ForceOwnership); err != nil {
		return false, fmt.Errorf("applying %s %s: %w", kind, live.GetName(), err)
	}
	return true, nil
}

// OwnerReference is the controller reference a child of owner carries, for
// apply configurations (gvk names owner's kind: typed objects read from the
// cache carry no TypeMeta).
func OwnerReference(owner metav1.Object, gvk schema.GroupVersionKind) *metav1ac.OwnerReferenceApplyConfiguration {
	return metav1ac.OwnerReference().
		WithAPIVersion(gvk.GroupVersion().String()).
		WithKind(gvk.Kind).
		WithName(owner.GetName()).
		WithUID(owner.GetUID()).
		WithController(true).
		WithBlockOwnerDeletion(true)
}
