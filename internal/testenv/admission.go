package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// InstallAdmission creates every object of config/admission as shipped (the
// files its kustomization.yaml lists, without the kustomize name prefix), so
// a suite runs under the admission policies `make deploy` installs. The API
// server loads a policy within about a second of its creation: a test that
// expects a refusal should retry until it sees it. On an API server that
// does not serve MutatingAdmissionPolicies (before Kubernetes 1.36, where
// they are beta and off by default), those are left out, as a user of such
// a cluster installs Trellis: the controllers then add their finalizers
// themselves.
func InstallAdmission(ctx context.Context, c client.Client) error {
	mutating, err := ServesMutatingPolicies(c)
	if err != nil {
		return err
	}
	dir := filepath.Join(RepoRoot(), "config", "admission")
	raw, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return err
	}
	var kustomization struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(raw, &kustomization); err != nil {
		return fmt.Errorf("config/admission/kustomization.yaml: %w", err)
	}
	for _, file := range kustomization.Resources {
		raw, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			return err
		}
		for _, doc := range strings.Split(string(raw), "\n---\n") {
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
				return fmt.Errorf("config/admission/%s: %w", file, err)
			}
			if !mutating && obj.GroupVersionKind().Group == mutatingPolicies.Group {
				if k := obj.GetKind(); k == "MutatingAdmissionPolicy" || k == "MutatingAdmissionPolicyBinding" {
					continue
				}
			}
			if err := c.Create(ctx, obj); err != nil {
				return fmt.Errorf("installing %s %s: %w", obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	return nil
}

// mutatingPolicies is the version of MutatingAdmissionPolicy config/admission ships.
var mutatingPolicies = schema.GroupVersionKind{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingAdmissionPolicy"}

// ServesMutatingPolicies reports whether the API server serves the
// MutatingAdmissionPolicies config/admission ships (GA in Kubernetes 1.36).
func ServesMutatingPolicies(c client.Client) (bool, error) {
	_, err := c.RESTMapper().RESTMapping(mutatingPolicies.GroupKind(), mutatingPolicies.Version)
	switch {
	case meta.IsNoMatchError(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("looking up %s: %w", mutatingPolicies, err)
	}
	return true, nil
}
