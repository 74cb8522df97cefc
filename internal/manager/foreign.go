package manager

import (
	"fmt"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/internal/controller/setup"
)

// The cache selects the objects of a child type by Trellis' managed-by
// label, which anyone who may write such an object can set on their own. So
// that nobody can grow the manager's memory by what they put into objects
// of their own, an object no owning controller recognises as its child
// (setup.Controller.Recognise) is kept as bounded metadata only: a new
// object of the same type holding what the controllers read of an object
// that is not theirs ("it exists, and it is not ours"), and nothing else.

// maxKeptString bounds every label or annotation value and every string of
// the owner reference kept on a foreign object (a DNS subdomain's length:
// longer ones cannot name anything of Trellis'). One over it is dropped,
// which can only make the object look less like Trellis'.
const maxKeptString = 253

// recogniser is what the controllers that own a child type say about it.
type recogniser struct {
	own  []func(client.Object) bool
	keys map[string]bool
}

func (r *recogniser) add(c setup.Controller) {
	r.own = append(r.own, c.Recognise)
	if r.keys == nil {
		r.keys = map[string]bool{setup.ManagedByLabel: true}
	}
	for _, k := range c.ForeignKeys {
		r.keys[k] = true
	}
}

func (r *recogniser) recognises(obj client.Object) bool {
	for _, own := range r.own {
		if own(obj) {
			return true
		}
	}
	return false
}

// reduceForeign hands a recognised child on to the controller's own
// transform (own, which may be nil) and reduces any other object.
func reduceForeign(r *recogniser, own toolscache.TransformFunc) toolscache.TransformFunc {
	return func(in any) (any, error) {
		obj, ok := in.(client.Object)
		if !ok {
			return in, nil
		}
		if r.recognises(obj) {
			if own == nil {
				return in, nil
			}
			return own(in)
		}
		return reduce(obj, r.keys)
	}
}

// reduce returns a new object of obj's type with only its name, namespace,
// uid, resourceVersion, generation, creation and deletion timestamps, its
// controller owner reference (the API server allows one; other references
// are dropped) and the labels and annotations of keys. Nothing of it is
// larger than maxKeptString, and it holds at most len(keys) labels and as
// many annotations. Reducing it again changes nothing.
func reduce(obj client.Object, keys map[string]bool) (client.Object, error) {
	t := reflect.TypeOf(obj)
	if t.Kind() != reflect.Pointer || t.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("cache transform: %T is not a pointer to a struct", obj)
	}
	out, ok := reflect.New(t.Elem()).Interface().(client.Object)
	if !ok {
		return nil, fmt.Errorf("cache transform: a new %T is not a client.Object", obj)
	}
	out.GetObjectKind().SetGroupVersionKind(obj.GetObjectKind().GroupVersionKind())
	// Copies of the strings, so that none of them keeps a buffer of the
	// object it came from alive.
	out.SetName(strings.Clone(obj.GetName()))
	out.SetNamespace(strings.Clone(obj.GetNamespace()))
	out.SetUID(types.UID(strings.Clone(string(obj.GetUID()))))
	out.SetResourceVersion(strings.Clone(obj.GetResourceVersion()))
	out.SetGeneration(obj.GetGeneration())
	out.SetCreationTimestamp(obj.GetCreationTimestamp())
	if ts := obj.GetDeletionTimestamp(); ts != nil {
		out.SetDeletionTimestamp(ts.DeepCopy())
	}
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil && len(ref.APIVersion) <= maxKeptString &&
		len(ref.Kind) <= maxKeptString && len(ref.Name) <= maxKeptString && len(ref.UID) <= maxKeptString {
		kept := metav1.OwnerReference{
			APIVersion: strings.Clone(ref.APIVersion), Kind: strings.Clone(ref.Kind),
			Name: strings.Clone(ref.Name), UID: types.UID(strings.Clone(string(ref.UID))),
			Controller: ptr.To(true),
		}
		if ref.BlockOwnerDeletion != nil {
			kept.BlockOwnerDeletion = ptr.To(*ref.BlockOwnerDeletion)
		}
		out.SetOwnerReferences([]metav1.OwnerReference{kept})
	}
	out.SetLabels(keep(obj.GetLabels(), keys))
	out.SetAnnotations(keep(obj.GetAnnotations(), keys))
	return out, nil
}

// keep returns the entries of m whose key is in keys and whose value fits
// maxKeptString (nil when there are none).
func keep(m map[string]string, keys map[string]bool) map[string]string {
	var out map[string]string
	for k, v := range m {
		if keys[k] && len(v) <= maxKeptString {
			if out == nil {
				out = map[string]string{}
			}
			out[strings.Clone(k)] = strings.Clone(v)
		}
	}
	return out
}
