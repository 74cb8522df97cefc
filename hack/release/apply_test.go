package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// install.yaml installs with one plain `kubectl apply --server-side` on an
// empty cluster (a real kube-apiserver of the pinned version, from envtest):
// namespace, CRDs, RBAC, admission policies and the manager's Deployment
// running the pinned image. Applying it again changes nothing and conflicts
// with nothing. Skipped without the pinned binaries (make tools).
func TestKubectlApplyInstall(t *testing.T) {
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets, _ = filepath.Abs("../../bin")
	}
	for _, bin := range []string{"kube-apiserver", "etcd", "kubectl"} {
		if _, err := os.Stat(filepath.Join(assets, bin)); err != nil {
			t.Skipf("%s not in %s (make tools, or KUBEBUILDER_ASSETS=)", bin, assets)
		}
	}
	manifests, err := renderInstall(kustomizeBinary(t), "../../config/default", release)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	install := filepath.Join(dir, "install.yaml")
	if err := os.WriteFile(install, manifests, 0o644); err != nil {
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
	kubeconfigPath := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfigPath, kubeconfig, 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(filepath.Join(assets, "kubectl"), append([]string{"--kubeconfig", kubeconfigPath}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
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

func mustSplit(t *testing.T, manifests []byte) [][]byte {
	t.Helper()
	docs, err := splitDocuments(manifests)
	if err != nil {
		t.Fatal(err)
	}
	return docs
}
