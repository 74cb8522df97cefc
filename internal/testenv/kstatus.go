package testenv

import (
	"context"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/yaml"
)

// KStatus is what kstatus, the library behind Flux's health checks and the
// cli-utils appliers, makes of obj: Current, InProgress, Failed or Terminating.
func KStatus(obj client.Object, scheme *runtime.Scheme) (*kstatus.Result, error) {
	gvk, err := apiutil.GVKForObject(obj, scheme)
	if err != nil {
		return nil, err
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gvk)
	return kstatus.Compute(u)
}

// KStatusOfNew creates the object given as YAML, reads it back as a GitOps
// tool would (unstructured, from the API server) and says what kstatus makes
// of it. The suites call it for kinds no controller of theirs reconciles, to
// see what a brand-new object looks like before any controller has seen it.
func KStatusOfNew(ctx context.Context, c client.Client, manifest string) (*kstatus.Result, error) {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		return nil, err
	}
	if err := c.Create(ctx, u); err != nil {
		return nil, err
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(u.GroupVersionKind())
	if err := c.Get(ctx, client.ObjectKeyFromObject(u), got); err != nil {
		return nil, err
	}
	res, err := kstatus.Compute(got)
	if delErr := c.Delete(ctx, got); err == nil {
		err = client.IgnoreNotFound(delErr)
	}
	return res, err
}

// KStatusOnServer reads obj (by its kind and key) from the API server,
// unstructured, as a GitOps tool does: with the defaults the CRD gives, which
// a typed copy would drop when empty. It returns what kstatus makes of it and
// what was read.
func KStatusOnServer(ctx context.Context, c client.Client, obj client.Object) (*kstatus.Result, *unstructured.Unstructured, error) {
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		return nil, nil, err
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(gvk)
	if err := c.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
		return nil, nil, err
	}
	res, err := kstatus.Compute(got)
	return res, got, err
}
