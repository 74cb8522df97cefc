package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var (
	managerRef = reference{repository: "ghcr.io/trellis-dev/trellis-manager", tag: "v0.1.0", digest: "sha256:" + strings.Repeat("a", 64)}
	viewerRef  = reference{repository: "ghcr.io/trellis-dev/trellis-viewer", tag: "v0.1.0", digest: "sha256:" + strings.Repeat("b", 64)}
	release    = []image{{archive: managerArchive, ref: managerRef}, {archive: viewerArchive, ref: viewerRef}}
)

// kustomizeBinary is the pinned kustomize (make kustomize), or $KUSTOMIZE.
func kustomizeBinary(t *testing.T) string {
	t.Helper()
	k := os.Getenv("KUSTOMIZE")
	if k == "" {
		k, _ = filepath.Abs("../../bin/kustomize")
	}
	if _, err := os.Stat(k); err != nil {
		t.Skipf("no kustomize (make kustomize, or KUSTOMIZE=): %v", err)
	}
	return k
}

func TestParseReference(t *testing.T) {
	digest := "@sha256:" + strings.Repeat("0", 64)
	for in, want := range map[string]reference{
		"ghcr.io/trellis-dev/trellis-manager:v0.1.0" + digest: {"ghcr.io/trellis-dev/trellis-manager", "v0.1.0", digest[1:]},
		"localhost:5000/trellis-viewer:v1.2.3-rc.1" + digest:  {"localhost:5000/trellis-viewer", "v1.2.3-rc.1", digest[1:]},
	} {
		got, err := parseReference(in)
		if err != nil || got != want || got.String() != in {
			t.Errorf("parseReference(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, in := range []string{
		"ghcr.io/trellis-dev/trellis-manager:v0.1.0",           // no digest
		"ghcr.io/trellis-dev/trellis-manager" + digest,         // no tag
		"localhost:5000/trellis-manager" + digest,              // a port is no tag
		"ghcr.io/trellis-dev/trellis-manager:v0.1.0@sha256:ab", // a short digest
		"ghcr.io/trellis-dev/trellis-manager:" + digest,        // an empty tag
		"trellis-manager:dev",
	} {
		if got, err := parseReference(in); err == nil {
			t.Errorf("parseReference(%q) = %+v, want an error", in, got)
		}
	}
}

func TestParseImages(t *testing.T) {
	good := "trellis-manager.tar " + managerRef.String() + "\ntrellis-viewer.tar " + viewerRef.String() + "\n"
	images, err := parseImages([]byte(good))
	if err != nil || len(images) != 2 || find(images, managerArchive) != managerRef || find(images, viewerArchive) != viewerRef {
		t.Fatalf("parseImages = %+v, %v", images, err)
	}
	for name, bad := range map[string]string{
		"no viewer":       "trellis-manager.tar " + managerRef.String() + "\n",
		"unpinned":        "trellis-manager.tar " + managerRef.named() + "\ntrellis-viewer.tar " + viewerRef.String() + "\n",
		"listed twice":    good + "trellis-viewer.tar " + viewerRef.String() + "\n",
		"a path":          "dist/trellis-manager.tar " + managerRef.String() + "\ntrellis-viewer.tar " + viewerRef.String() + "\n",
		"a missing field": good + "trellis-pause.tar\n",
	} {
		if _, err := parseImages([]byte(bad)); err == nil {
			t.Errorf("%s: parseImages accepted it", name)
		}
	}
}

// install.yaml is config/default with two values changed, the manager's image
// and its --viewer-image flag, both pinned; the same images render the same bytes.
func TestRenderInstall(t *testing.T) {
	k := kustomizeBinary(t)
	pinned, err := renderInstall(k, "../../config/default", release)
	if err != nil {
		t.Fatal(err)
	}
	again, err := renderInstall(k, "../../config/default", release)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(pinned, again) {
		t.Error("two renderings of the same images differ")
	}
	if err := verifyInstall(pinned, release); err != nil {
		t.Error(err)
	}
	plain, err := kustomizeBuild(k, "../../config/default")
	if err != nil {
		t.Fatal(err)
	}
	got, want := strings.Split(string(pinned), "\n"), strings.Split(string(plain), "\n")
	if len(got) != len(want) {
		t.Fatalf("install.yaml has %d lines, kustomize build config/default %d", len(got), len(want))
	}
	var changed []string
	for i := range got {
		if got[i] != want[i] {
			changed = append(changed, strings.TrimSpace(got[i]))
		}
	}
	wantChanged := []string{"- --viewer-image=" + viewerRef.String(), "image: " + managerRef.String()}
	if strings.Join(changed, "\n") != strings.Join(wantChanged, "\n") {
		t.Errorf("changed lines:\n%s\nwant:\n%s", strings.Join(changed, "\n"), strings.Join(wantChanged, "\n"))
	}
}

// install-without-mutating-policies.yaml is install.yaml without its
// MutatingAdmissionPolicies and their bindings, every other object the same.
func TestRenderInstallWithoutMutatingPolicies(t *testing.T) {
	k := kustomizeBinary(t)
	full, err := renderInstall(k, "../../config/default", release)
	if err != nil {
		t.Fatal(err)
	}
	without, err := renderInstall(k, "../../config/default-without-mutating-policies", release)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(full), "kind: MutatingAdmissionPolicy\n") {
		t.Fatal("install.yaml has no MutatingAdmissionPolicy to leave out")
	}
	if err := verifyWithoutMutatingPolicies(full, without); err != nil {
		t.Error(err)
	}
}

// A MutatingAdmissionPolicy left in, an object missing or one that differs
// is refused.
func TestVerifyWithoutMutatingPolicies(t *testing.T) {
	pinned := strings.NewReplacer("MANAGER", managerRef.String(), "VIEWER", viewerRef.String()).Replace(deployment)
	full := pinned + "---\n" + mutatingPolicy
	if err := verifyWithoutMutatingPolicies([]byte(full), []byte(pinned)); err != nil {
		t.Errorf("install.yaml without its policy: %v", err)
	}
	for name, tc := range map[string]struct{ without, wantErr string }{
		"the policy left in": {full, "holds MutatingAdmissionPolicy trellis-tenant-finalizer"},
		"the Deployment missing": {"apiVersion: v1\nkind: Namespace\nmetadata:\n  name: trellis-system\n",
			"want install.yaml's objects but its MutatingAdmissionPolicies"},
		"the Deployment changed": {strings.Replace(pinned, "--leader-elect", "--leader-elect=false", 1),
			"Deployment trellis-system/trellis-controller-manager differs from install.yaml's"},
	} {
		if err := verifyWithoutMutatingPolicies([]byte(full), []byte(tc.without)); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: error %v, want one saying %q", name, err, tc.wantErr)
		}
	}
}

const mutatingPolicy = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: trellis-tenant-finalizer
spec:
  failurePolicy: Ignore
`

const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: trellis-controller-manager
  namespace: trellis-system
spec:
  template:
    spec:
      containers:
      - name: manager
        image: MANAGER
        args:
        - --leader-elect
        - --viewer-image=VIEWER
`

func TestFindManager(t *testing.T) {
	site, err := findManager([]byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n---\n" + deployment))
	if err != nil {
		t.Fatal(err)
	}
	want := managerSite{apiVersion: "apps/v1", kind: "Deployment", namespace: "trellis-system", name: "trellis-controller-manager",
		container: 0, arg: 1, image: "MANAGER", viewerArg: "--viewer-image=VIEWER"}
	if site != want {
		t.Errorf("findManager = %+v, want %+v", site, want)
	}
	if _, err := findManager([]byte(deployment + "---\n" + deployment)); err == nil {
		t.Error("two managers: no error")
	}
	if _, err := findManager([]byte("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: x\n")); err == nil {
		t.Error("no manager: no error")
	}
}

func TestVerifyInstall(t *testing.T) {
	pinned := strings.NewReplacer("MANAGER", managerRef.String(), "VIEWER", viewerRef.String())
	if err := verifyInstall([]byte(pinned.Replace(deployment)), release); err != nil {
		t.Errorf("pinned: %v", err)
	}
	initContainer := "      initContainers:\n      - name: init\n        image: IMAGE\n"
	for name, tc := range map[string]struct{ manifests, wantErr string }{
		"manager by tag": {strings.NewReplacer("MANAGER", managerRef.named(), "VIEWER", viewerRef.String()).Replace(deployment),
			"Deployment trellis-system/trellis-controller-manager .spec.template.spec.containers[0].image: " + managerRef.named() + " is not one of the release's images"},
		"viewer by tag": {strings.NewReplacer("MANAGER", managerRef.String(), "VIEWER", viewerRef.named()).Replace(deployment),
			"args[1]: " + viewerRef.named() + " is not"},
		"another digest": {strings.NewReplacer("MANAGER", managerRef.String(), "VIEWER", strings.Replace(viewerRef.String(), "bbbb", "cccc", 1)).Replace(deployment),
			"is not one of the release's images"},
		"viewer never named": {strings.NewReplacer("MANAGER", managerRef.String(), "--viewer-image=VIEWER", "--leader-elect").Replace(deployment),
			"names no " + viewerRef.String()},
		"an init container of another image": {pinned.Replace(deployment) + strings.Replace(initContainer, "IMAGE", "busybox", 1),
			".spec.template.spec.initContainers[0].image: busybox is not"},
	} {
		err := verifyInstall([]byte(tc.manifests), release)
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: error %v, want one saying %q", name, err, tc.wantErr)
		}
	}
}
