package children

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/internal/controller/setup"
)

// AppliedHashAnnotation is where the cache keeps, on a child Trellis applies,
// the hash of the configuration Trellis last applied to it (TrimApplied). Its
// key holds a space, which the API server refuses in an annotation key: an
// object that carries it was trimmed by this process and came from no one
// else. It is never written back (an apply sends the desired configuration,
// not the cached object).
const AppliedHashAnnotation = "trellis.dev/applied-sha256 (cached)"

// TrimApplied returns the cache transform of a child type that Trellis keeps
// with ApplyOwned: it replaces the child's managedFields by the hash of what
// Trellis applied to it (extracted from Trellis' managedFields entry, as
// ApplyOwned would at every reconcile) under AppliedHashAnnotation, and then
// lets drop clear what the controller never reads of the object (its spec:
// ApplyOwned needs only the hash). Applied to a trimmed object it changes
// nothing.
func TrimApplied[T client.Object, A runtime.ApplyConfiguration](extract Extractor[T, A], drop func(T)) toolscache.TransformFunc {
	return func(in any) (any, error) {
		obj, ok := in.(T)
		if !ok {
			return in, nil
		}
		if _, trimmed := obj.GetAnnotations()[AppliedHashAnnotation]; trimmed {
			return obj, nil
		}
		applied, err := extract(obj, setup.FieldManager)
		if err != nil {
			return nil, fmt.Errorf("cache transform: extracting what Trellis applied to %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
		}
		hash, err := appliedHash(applied)
		if err != nil {
			return nil, fmt.Errorf("cache transform: %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
		}
		annotations := obj.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[AppliedHashAnnotation] = hash
		obj.SetAnnotations(annotations)
		obj.SetManagedFields(nil)
		if drop != nil {
			drop(obj)
		}
		return obj, nil
	}
}

// appliedHash is the SHA-256 of an apply configuration's JSON: what the
// apply request would send. Two configurations with the same JSON ask the
// API server for the same thing.
func appliedHash(applied any) (string, error) {
	raw, err := json.Marshal(applied)
	if err != nil {
		return "", fmt.Errorf("encoding an apply configuration: %w", err)
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:]), nil
}

// alreadyApplied reports whether desired is what Trellis last applied to
// live: by the hash the cache keeps of a trimmed child, or, for an object
// read around the cache, by extracting it from live's managedFields.
func alreadyApplied[T client.Object, A runtime.ApplyConfiguration](live T, desired A, extract Extractor[T, A]) (bool, error) {
	want, err := appliedHash(desired)
	if err != nil {
		return false, err
	}
	if have, trimmed := live.GetAnnotations()[AppliedHashAnnotation]; trimmed {
		return have == want, nil
	}
	current, err := extract(live, setup.FieldManager)
	if err != nil {
		return false, err
	}
	have, err := appliedHash(current)
	if err != nil {
		return false, err
	}
	return have == want, nil
}
