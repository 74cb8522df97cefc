package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

func digestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// fakeArchive is an OCI archive of an image labelled version, as
// hack/images writes one (a layer of a few bytes, its own), and its digest.
func fakeArchive(t *testing.T, named, version string) ([]byte, string) {
	t.Helper()
	layer := []byte("the layer of " + named)
	config, _ := json.Marshal(map[string]any{"config": map[string]any{"Labels": map[string]string{versionLabel: version}}})
	manifest, _ := json.Marshal(map[string]any{
		"schemaVersion": 2,
		"config":        descriptor{MediaType: "application/vnd.oci.image.config.v1+json", Digest: digestOf(config), Size: int64(len(config))},
		"layers":        []descriptor{{MediaType: "application/vnd.oci.image.layer.v1.tar+gzip", Digest: digestOf(layer), Size: int64(len(layer))}},
	})
	index, _ := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []descriptor{{
		MediaType: "application/vnd.oci.image.manifest.v1+json", Digest: digestOf(manifest), Size: int64(len(manifest)),
		Annotations: map[string]string{"io.containerd.image.name": named},
	}}})
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, f := range []struct {
		name string
		data []byte
	}{
		{"oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{"index.json", index},
		{blobName(digestOf(manifest)), manifest},
		{blobName(digestOf(config)), config},
		{blobName(digestOf(layer)), layer},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write(f.data)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), digestOf(manifest)
}

// writeChecksums writes checksums.txt as `sha256sum` does, over every other file of dir.
func writeChecksums(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.Name() != checksumsFile {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		data, _ := os.ReadFile(filepath.Join(dir, n))
		fmt.Fprintf(&b, "%s  %s\n", strings.TrimPrefix(digestOf(data), "sha256:"), n)
	}
	if err := os.WriteFile(filepath.Join(dir, checksumsFile), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fakeDist is a release directory of version v0.1.0 that verifyDist accepts.
func fakeDist(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	managerTar, managerDigest := fakeArchive(t, "ghcr.io/trellis-dev/trellis-manager:v0.1.0", "v0.1.0")
	viewerTar, viewerDigest := fakeArchive(t, "ghcr.io/trellis-dev/trellis-viewer:v0.1.0", "v0.1.0")
	manager := "ghcr.io/trellis-dev/trellis-manager:v0.1.0@" + managerDigest
	viewer := "ghcr.io/trellis-dev/trellis-viewer:v0.1.0@" + viewerDigest
	for name, data := range map[string][]byte{
		managerArchive:             managerTar,
		viewerArchive:              viewerTar,
		imagesFile:                 []byte(managerArchive + " " + manager + "\n" + viewerArchive + " " + viewer + "\n"),
		installFile:                []byte(strings.NewReplacer("MANAGER", manager, "VIEWER", viewer).Replace(deployment) + "---\n" + mutatingPolicy),
		installWithoutMutatingFile: []byte(strings.NewReplacer("MANAGER", manager, "VIEWER", viewer).Replace(deployment)),
		"trellis-0.1.0.tgz":        fakeChart(t, "0.1.0", "v0.1.0", managerDigest, viewerDigest),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeChecksums(t, dir)
	return dir
}

// fakeChart is a packaged chart of version (appVersion app) whose values
// name the two images by these digests.
func fakeChart(t *testing.T, version, app, managerDigest, viewerDigest string) []byte {
	t.Helper()
	values := fmt.Sprintf("replicas: 2\nimage:\n  repository: ghcr.io/trellis-dev/trellis-manager\n  tag: v0.1.0\n  digest: %s\n"+
		"viewerImage:\n  repository: ghcr.io/trellis-dev/trellis-viewer\n  tag: v0.1.0\n  digest: %s\n", managerDigest, viewerDigest)
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	for _, f := range []struct{ name, data string }{
		{"trellis/Chart.yaml", fmt.Sprintf("apiVersion: v2\nname: trellis\nversion: %s\nappVersion: %q\n", version, app)},
		{"trellis/values.yaml", values},
	} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data))}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestVerifyDist(t *testing.T) {
	if err := verifyDist(fakeDist(t)); err != nil {
		t.Fatalf("a good release: %v", err)
	}
	write := func(dir, name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, tc := range map[string]struct {
		tamper  func(dir string)
		wantErr string
	}{
		"a file changed after the checksums": {func(dir string) {
			write(dir, installFile, append(must(os.ReadFile(filepath.Join(dir, installFile))), '\n'))
		}, "install.yaml: sha256"},
		"a file not in checksums.txt": {func(dir string) { write(dir, "notes.txt", []byte("x")) }, "notes.txt is not in checksums.txt"},
		"a file missing":              {func(dir string) { _ = os.Remove(filepath.Join(dir, viewerArchive)) }, "lists trellis-viewer.tar, which is missing"},
		"another image in an archive": {func(dir string) {
			other, _ := fakeArchive(t, "ghcr.io/trellis-dev/trellis-viewer:v0.1.0", "v0.1.0-other")
			write(dir, viewerArchive, other)
			writeChecksums(t, dir)
		}, "trellis-viewer.tar: holds sha256:"},
		"a chart of another version": {func(dir string) {
			write(dir, "trellis-0.1.0.tgz", fakeChart(t, "0.2.0", "v0.2.0", digestOf([]byte("m")), digestOf([]byte("v"))))
			writeChecksums(t, dir)
		}, `trellis/Chart.yaml: name "trellis", version "0.2.0", appVersion "v0.2.0"; want trellis, 0.1.0 and v0.1.0`},
		"a chart naming other images": {func(dir string) {
			write(dir, "trellis-0.1.0.tgz", fakeChart(t, "0.1.0", "v0.1.0", digestOf([]byte("m")), digestOf([]byte("v"))))
			writeChecksums(t, dir)
		}, "trellis/values.yaml: image is ghcr.io/trellis-dev/trellis-manager:v0.1.0@" + digestOf([]byte("m")) + ", images.txt says"},
		"no chart": {func(dir string) {
			_ = os.Remove(filepath.Join(dir, "trellis-0.1.0.tgz"))
			writeChecksums(t, dir)
		}, "0 Helm charts (trellis-*.tgz), want 1"},
		"a MutatingAdmissionPolicy for clusters that do not serve it": {func(dir string) {
			write(dir, installWithoutMutatingFile, must(os.ReadFile(filepath.Join(dir, installFile))))
			writeChecksums(t, dir)
		}, "install-without-mutating-policies.yaml: holds MutatingAdmissionPolicy trellis-tenant-finalizer"},
		"no install-without-mutating-policies.yaml": {func(dir string) {
			_ = os.Remove(filepath.Join(dir, installWithoutMutatingFile))
			writeChecksums(t, dir)
		}, "install-without-mutating-policies.yaml: no such file"},
		"an install-without-mutating-policies.yaml by tag": {func(dir string) {
			write(dir, installWithoutMutatingFile, []byte(strings.NewReplacer("MANAGER", "ghcr.io/trellis-dev/trellis-manager:v0.1.0", "VIEWER", "x").Replace(deployment)))
			writeChecksums(t, dir)
		}, "install-without-mutating-policies.yaml: Deployment trellis-system/trellis-controller-manager .spec.template.spec.containers[0].args[1]: x is not"},
		"an install.yaml by tag": {func(dir string) {
			write(dir, installFile, []byte(strings.NewReplacer("MANAGER", "ghcr.io/trellis-dev/trellis-manager:v0.1.0", "VIEWER", "x").Replace(deployment)))
			writeChecksums(t, dir)
		}, "Deployment trellis-system/trellis-controller-manager .spec.template.spec.containers[0].image: ghcr.io/trellis-dev/trellis-manager:v0.1.0 is not"},
	} {
		dir := fakeDist(t)
		tc.tamper(dir)
		if err := verifyDist(dir); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: error %v, want one saying %q", name, err, tc.wantErr)
		}
	}
}

func TestVerifyArchive(t *testing.T) {
	dir := t.TempDir()
	archive, digest := fakeArchive(t, "ghcr.io/trellis-dev/trellis-manager:v0.1.0", "v0.1.0")
	path := filepath.Join(dir, managerArchive)
	if err := os.WriteFile(path, archive, 0o644); err != nil {
		t.Fatal(err)
	}
	ref := reference{repository: "ghcr.io/trellis-dev/trellis-manager", tag: "v0.1.0", digest: digest}
	if err := verifyArchive(path, ref); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		ref     reference
		wantErr string
	}{
		"another registry": {reference{"example.com/trellis-manager", "v0.1.0", digest}, `names its image "ghcr.io/trellis-dev/trellis-manager:v0.1.0"`},
		"another version":  {reference{ref.repository, "v0.2.0", digest}, `names its image`},
		"another digest":   {reference{ref.repository, ref.tag, "sha256:" + strings.Repeat("0", 64)}, "holds " + digest},
	} {
		if err := verifyArchive(path, tc.ref); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: error %v, want one saying %q", name, err, tc.wantErr)
		}
	}
	// The version label is checked apart from the name.
	mislabelled, mislabelledDigest := fakeArchive(t, "ghcr.io/trellis-dev/trellis-manager:v0.1.0", "dev")
	if err := os.WriteFile(path, mislabelled, 0o644); err != nil {
		t.Fatal(err)
	}
	ref.digest = mislabelledDigest
	if err := verifyArchive(path, ref); err == nil || !strings.Contains(err.Error(), `label org.opencontainers.image.version="dev"`) {
		t.Errorf("a dev label: error %v", err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
