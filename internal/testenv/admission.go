package testenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// InstallAdmission creates every object of config/admission as shipped (the
// files its kustomization.yaml lists, without the kustomize name prefix), so
// a suite runs under the admission policies `make deploy` installs. The API
// server loads a policy within about a second of its creation: a test that
// expects a refusal should retry until it sees it.
func InstallAdmission(ctx context.Context, c client.Client) error {
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
			if err := c.Create(ctx, obj); err != nil {
				return fmt.Errorf("installing %s %s: %w", obj.GetKind(), obj.GetName(), err)
			}
		}
	}
	return nil
}
