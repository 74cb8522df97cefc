package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	return waitForValidatingPolicies(ctx, c)
}

// waitForValidatingPolicies waits until the API server enforces the
// policies just installed, as a cluster's users would meet them, so that a
// test's first refusal is not one the API server has yet to load: until
// the namespace-requests policy refuses (a dry run of) a NamespaceRequest
// in a namespace of no Tenant. It is installed last, and the API server
// loads the policies of one burst together.
func waitForValidatingPolicies(ctx context.Context, c client.Client) error {
	probe := func() error {
		req := &unstructured.Unstructured{}
		req.SetAPIVersion("tenancy.trellis.dev/v1")
		req.SetKind("NamespaceRequest")
		req.SetNamespace("default")
		req.SetName("admission-probe")
		return c.Create(ctx, req, client.DryRunAll)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := probe()
		if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "namespace-requests") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("config/admission: the API server does not enforce the namespace-requests policy after 60s (a NamespaceRequest in default: %v)", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
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
