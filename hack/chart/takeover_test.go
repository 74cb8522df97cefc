package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// clusterTools starts a kube-apiserver of the pinned version (envtest), with
// apiServerArgs (key=value) added to envtest's, and returns a runner of the
// pinned tools (kubectl, helm) as a cluster admin of it: their output and
// error.
func clusterTools(t *testing.T, apiServerArgs ...string) func(stdin []byte, name string, args ...string) (string, error) {
	t.Helper()
	assets, err := filepath.Abs("../../bin")
	if err != nil {
		t.Fatal(err)
	}
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	for _, arg := range apiServerArgs {
		k, v, _ := strings.Cut(arg, "=")
		env.ControlPlane.GetAPIServer().Configure().Append(k, v)
	}
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
	return func(stdin []byte, name string, args ...string) (string, error) {
		cmd := exec.Command(tool(t, name), append([]string{"--kubeconfig", path}, args...)...)
		if stdin != nil {
			cmd.Stdin = strings.NewReader(string(stdin))
		}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}

// TestTakeOverMakeDeploy: on an API server of the pinned version (envtest),
// `helm install --take-ownership --force-conflicts` over what make deploy
// applied adopts every object without changing the manager Deployment's
// spec, so the manager's pods keep running (its generation moves all the
// same: a Deployment's counts its annotations too, and Helm adds its own)
// (docs/operations.md, "Migrate from make deploy"). The e2e suite runs the
// same on the real node with the samples (TestHelmChartTakesOverUninstallsAndInstalls).
func TestTakeOverMakeDeploy(t *testing.T) {
	tools := clusterTools(t)
	run := func(stdin []byte, name string, args ...string) string {
		t.Helper()
		out, err := tools(stdin, name, args...)
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return out
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

// TestInstallWithoutMutatingPolicies: on an API server that does not serve
// MutatingAdmissionPolicy (Kubernetes 1.33 to 1.35; here the pinned one with
// the two resources and their admission plugin turned off), the chart installs with
// admissionPolicies.mutating.enabled=false, every object but the
// MutatingAdmissionPolicies, and not with the default.
func TestInstallWithoutMutatingPolicies(t *testing.T) {
	tools := clusterTools(t, "runtime-config=admissionregistration.k8s.io/v1/mutatingadmissionpolicies=false,admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings=false",
		"disable-admission-plugins=MutatingAdmissionPolicy")
	if out, err := tools(nil, "helm", "install", "trellis", chartDir, "-n", "trellis-system", "--create-namespace"); err == nil || !strings.Contains(out, `kind "MutatingAdmissionPolicy"`) {
		t.Errorf("helm install with the policies: %v, want it refused naming the kind:\n%s", err, out)
	}
	out, err := tools(nil, "helm", "upgrade", "--install", "trellis", chartDir, "-n", "trellis-system", "--create-namespace", "--set", "admissionPolicies.mutating.enabled=false")
	if err != nil || !strings.Contains(out, "STATUS: deployed") {
		t.Fatalf("helm install without the policies: %v\n%s", err, out)
	}
	manifest, err := tools(nil, "helm", "get", "manifest", "trellis", "-n", "trellis-system")
	if err != nil {
		t.Fatal(err)
	}
	want := kustomizeOverlay(t, "../../config/default-without-mutating-policies")
	if got := byName(t, []byte(manifest)); !reflect.DeepEqual(keys(got), keys(want)) {
		t.Errorf("the release holds\n  %v\nwant\n  %v", keys(got), keys(want))
	}
}
