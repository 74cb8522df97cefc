package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// TestTakeOverMakeDeploy: on an API server of the pinned version (envtest),
// `helm install --take-ownership --force-conflicts` over what make deploy
// applied adopts every object without changing the manager Deployment's
// spec, so the manager's pods keep running (its generation moves all the
// same: a Deployment's counts its annotations too, and Helm adds its own)
// (docs/operations.md, "Migrate from make deploy"). The e2e suite runs the
// same on the real node with the samples (TestHelmChartTakesOverUninstallsAndInstalls).
func TestTakeOverMakeDeploy(t *testing.T) {
	assets, err := filepath.Abs("../../bin")
	if err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	if _, err := env.Start(); err != nil {
		_ = env.Stop()
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	admin, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	run := func(stdin []byte, name string, args ...string) string {
		t.Helper()
		cmd := exec.Command(tool(t, name), append([]string{"--kubeconfig", path}, args...)...)
		if stdin != nil {
			cmd.Stdin = strings.NewReader(string(stdin))
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	config, err := kustomizeBuild(tool(t, "kustomize"), "../../config/default")
	if err != nil {
		t.Fatal(err)
	}
	run(config, "kubectl", "apply", "--server-side", "-f", "-")
	get := func(what string) string {
		return run(nil, "kubectl", "-n", "trellis-system", "get", "deployment", "trellis-controller-manager", "-o", "jsonpath="+what)
	}
	before := get("{.spec}")
	installed := run(nil, "helm", "install", "trellis", "../../charts/trellis", "-n", "trellis-system", "--take-ownership", "--force-conflicts")
	if !strings.Contains(installed, "STATUS: deployed") {
		t.Fatalf("helm install:\n%s", installed)
	}
	if after := get("{.spec}"); after != before {
		t.Errorf("the take-over changed the Deployment's spec:\nbefore: %s\nafter:  %s", before, after)
	}
	if got := get("{.metadata.labels.app\\.kubernetes\\.io/managed-by} {.metadata.annotations.meta\\.helm\\.sh/release-name}"); got != "Helm trellis" {
		t.Errorf("the Deployment after the take-over: managed-by and release %q, want Helm's", got)
	}
	// Every object of config/default is the release's now.
	manifest := run(nil, "helm", "get", "manifest", "trellis", "-n", "trellis-system")
	if got, want := strings.Count(manifest, "\nkind: "), strings.Count(string(config), "\nkind: "); got != want || got == 0 {
		t.Errorf("the release holds %d objects, config/default %d", got, want)
	}
}
