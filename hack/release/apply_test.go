package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// kubectlOn starts a real kube-apiserver of the pinned version (envtest),
// with apiServerArgs (key=value) added to envtest's, and returns kubectl as
// a cluster admin of it: the command's output and error. Skipped without
// the pinned binaries (make tools).
func kubectlOn(t *testing.T, apiServerArgs ...string) func(args ...string) (string, error) {
	t.Helper()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets, _ = filepath.Abs("../../bin")
	}
	for _, bin := range []string{"kube-apiserver", "etcd", "kubectl"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			t.Skipf("%s not in %s (make tools, or KUBEBUILDER_ASSETS=)", bin, assets)
		}
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
	kubeconfigPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	return func(args ...string) (string, error) {
		out, err := exec.Command(filepath.Join(assets, "kubectl"), append([]string{"--kubeconfig", kubeconfigPath}, args...)...).CombinedOutput()
		return string(out), err
	}
}

// renderedInstall is install.yaml of config (a kustomization) for the test
// release, written to a file.
func renderedInstall(t *testing.T, config string) (path string, manifests []byte) {
	t.Helper()
	manifests, err := renderInstall(kustomizeBinary(t), config, release)
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "install.yaml")
	if err := os.WriteFile(path, manifests, 0o644); err != nil {
		t.Fatal(err)
	}
	return path, manifests
}

// install.yaml installs with one plain `kubectl apply --server-side` on an
// empty cluster (a real kube-apiserver of the pinned version, from envtest):
// namespace, CRDs, RBAC, admission policies and the manager's Deployment
// running the pinned image. Applying it again changes nothing and conflicts
// with nothing.
func TestKubectlApplyInstall(t *testing.T) {
	install, manifests := renderedInstall(t, "../../config/default")
	run := kubectlOn(t)
	kubectl := func(args ...string) string {
		t.Helper()
		out, err := run(args...)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}

	applied := kubectl("apply", "--server-side", "-f", install)
	for _, want := range []string{
		"namespace/trellis-system serverside-applied",
		"customresourcedefinition.apiextensions.k8s.io/markdownviews.view.trellis.dev serverside-applied",
		"deployment.apps/trellis-controller-manager serverside-applied",
		"validatingadmissionpolicy.admissionregistration.k8s.io/",
		"mutatingadmissionpolicy.admissionregistration.k8s.io/",
	} {
		if !strings.Contains(applied, want) {
			t.Errorf("kubectl apply did not say %q:\n%s", want, applied)
		}
	}
	if got := strings.Count(applied, "\n"); got != len(mustSplit(t, manifests)) {
		t.Errorf("kubectl applied %d objects, install.yaml holds %d", got, len(mustSplit(t, manifests)))
	}
	deployment := "-n=trellis-system deployment/trellis-controller-manager"
	image := kubectl(strings.Fields("get -o=jsonpath={.spec.template.spec.containers[0].image} " + deployment)...)
	if image != managerRef.String() {
		t.Errorf("the manager's Deployment runs %q, want %q", image, managerRef)
	}
	args := kubectl(strings.Fields("get -o=jsonpath={.spec.template.spec.containers[0].args} " + deployment)...)
	if !strings.Contains(args, `"--viewer-image=`+viewerRef.String()+`"`) {
		t.Errorf("the manager's args %s do not pin the viewer %s", args, viewerRef)
	}
	generation := kubectl(strings.Fields("get -o=jsonpath={.metadata.generation} " + deployment)...)

	kubectl("apply", "--server-side", "-f", install)
	if again := kubectl(strings.Fields("get -o=jsonpath={.metadata.generation} " + deployment)...); again != generation {
		t.Errorf("applying install.yaml again changed the Deployment: generation %s, then %s", generation, again)
	}
}

// On a cluster that does not serve MutatingAdmissionPolicy (Kubernetes 1.33
// to 1.35; here the pinned API server with the two resources and their
// admission plugin turned off),
// install.yaml fails to apply, and install-without-mutating-policies.yaml
// applies every one of its objects.
func TestKubectlApplyWithoutMutatingPolicies(t *testing.T) {
	install, _ := renderedInstall(t, "../../config/default")
	without, manifests := renderedInstall(t, "../../config/default-without-mutating-policies")
	kubectl := kubectlOn(t, "runtime-config=admissionregistration.k8s.io/v1/mutatingadmissionpolicies=false,admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings=false",
		"disable-admission-plugins=MutatingAdmissionPolicy")

	if out, err := kubectl("api-resources", "--api-group=admissionregistration.k8s.io", "-o=name"); err != nil || strings.Contains(out, "mutatingadmissionpolicies") {
		t.Fatalf("the API server still serves MutatingAdmissionPolicy (%v):\n%s", err, out)
	}
	out, err := kubectl("apply", "--server-side", "-f", without)
	if err != nil {
		t.Fatalf("install-without-mutating-policies.yaml: %v\n%s", err, out)
	}
	if got, want := strings.Count(out, "\n"), len(mustSplit(t, manifests)); got != want || !strings.Contains(out, "deployment.apps/trellis-controller-manager serverside-applied") {
		t.Errorf("kubectl applied %d objects, the file holds %d:\n%s", got, want, out)
	}
	if out, err := kubectl("apply", "--server-side", "-f", install); err == nil || !strings.Contains(out, `kind "MutatingAdmissionPolicy"`) {
		t.Errorf("install.yaml on a cluster without MutatingAdmissionPolicy: %v, want it refused naming the kind:\n%s", err, out)
	}
}

func mustSplit(t *testing.T, manifests []byte) [][]byte {
	t.Helper()
	docs, err := splitDocuments(manifests)
	if err != nil {
		t.Fatal(err)
	}
	return docs
}
