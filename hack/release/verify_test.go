package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/base64"
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

var testPlatforms = []string{"linux/amd64", "linux/arm64"}

// fakeArchive is an OCI archive of an image index labelled version, one
// image per platform, as hack/images writes one (a layer of a few bytes
// each, its own), and the index's digest.
func fakeArchive(t *testing.T, named, version string, platforms ...string) ([]byte, string) {
	t.Helper()
	if len(platforms) == 0 {
		platforms = testPlatforms
	}
	blobs := map[string][]byte{}
	add := func(data []byte) string { d := digestOf(data); blobs[blobName(d)] = data; return d }
	images := make([]descriptor, 0, len(platforms))
	for _, p := range platforms {
		goos, arch, _ := strings.Cut(p, "/")
		layer := []byte("the layer of " + named + " for " + p)
		config, _ := json.Marshal(map[string]any{"os": goos, "architecture": arch, "config": map[string]any{"Labels": map[string]string{versionLabel: version}}})
		manifest, _ := json.Marshal(map[string]any{
			"schemaVersion": 2,
			"config":        descriptor{MediaType: "application/vnd.oci.image.config.v1+json", Digest: add(config), Size: int64(len(config))},
			"layers":        []descriptor{{MediaType: "application/vnd.oci.image.layer.v1.tar+gzip", Digest: add(layer), Size: int64(len(layer))}},
		})
		images = append(images, descriptor{MediaType: ociManifestType, Digest: add(manifest), Size: int64(len(manifest)), Platform: &platform{goos, arch}})
	}
	platformIndex, _ := json.Marshal(map[string]any{"schemaVersion": 2, "mediaType": ociIndexType, "manifests": images})
	top := descriptor{MediaType: ociIndexType, Digest: add(platformIndex), Size: int64(len(platformIndex))}
	if len(images) == 1 {
		top = images[0]
	}
	top.Annotations = map[string]string{"io.containerd.image.name": named}
	index, _ := json.Marshal(map[string]any{"schemaVersion": 2, "manifests": []descriptor{top}})
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	files := []string{"oci-layout", "index.json"}
	blobs["oci-layout"], blobs["index.json"] = []byte(`{"imageLayoutVersion":"1.0.0"}`), index
	for name := range blobs {
		if strings.HasPrefix(name, "blobs/") {
			files = append(files, name)
		}
	}
	for _, name := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(blobs[name])), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		_, _ = tw.Write(blobs[name])
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), top.Digest
}

// fakeSBOM is a CycloneDX SBOM of cmd/<cmd> for platform listing modules
// ("path@version"), as cyclonedx-gomod writes one.
func fakeSBOM(cmd, platform string, modules ...string) []byte {
	goos, goarch, _ := strings.Cut(platform, "/")
	components := make([]map[string]any, 0, len(modules))
	for _, m := range modules {
		path, version, _ := strings.Cut(m, "@")
		components = append(components, map[string]any{"name": path, "version": version,
			"hashes": []map[string]string{{"alg": "SHA-256", "content": strings.Repeat("a", 64)}}})
	}
	b, _ := json.Marshal(map[string]any{
		"bomFormat": "CycloneDX",
		"metadata": map[string]any{"component": map[string]any{
			"purl": fmt.Sprintf("pkg:golang/github.com/trellis-dev/trellis@v0.0.0-20261128000000-abcdefabcdef?goarch=%s&goos=%s&type=module#cmd/%s", goarch, goos, cmd)}},
		"components": components,
	})
	return b
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
	for _, cmd := range []string{"manager", "viewer"} {
		for _, p := range testPlatforms {
			if err := os.WriteFile(filepath.Join(dir, sbomFile(cmd, p)), fakeSBOM(cmd, p, "sigs.k8s.io/yaml@v1.6.0"), 0o644); err != nil {
				t.Fatal(err)
			}
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

// fakeSignature is a sigstore bundle as `cosign sign-blob --bundle` writes
// one for a key, signing data (the signature itself is not checked here).
func fakeSignature(data []byte) []byte {
	sum := sha256.Sum256(data)
	return fmt.Appendf(nil, `{"mediaType":"application/vnd.dev.sigstore.bundle.v0.3+json", "verificationMaterial":{"publicKey":{"hint":"aGludA=="}}, `+
		`"messageSignature":{"messageDigest":{"algorithm":"SHA2_256", "digest":%q}, "signature":"c2lnbmF0dXJl"}}`,
		base64.StdEncoding.EncodeToString(sum[:]))
}

func TestVerifyDist(t *testing.T) {
	write := func(dir, name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := verifyDist(fakeDist(t), testPlatforms, ""); err != nil {
		t.Fatalf("a good release: %v", err)
	}
	signed := fakeDist(t)
	write(signed, checksumsSignature, fakeSignature(must(os.ReadFile(filepath.Join(signed, checksumsFile)))))
	if err := verifyDist(signed, testPlatforms, ""); err != nil {
		t.Fatalf("a good release with its signature: %v", err)
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
		"a signature of the chart alone": {func(dir string) {
			write(dir, "trellis-0.1.0.tgz.sigstore.json", fakeSignature(must(os.ReadFile(filepath.Join(dir, "trellis-0.1.0.tgz")))))
		}, "trellis-0.1.0.tgz.sigstore.json is not in checksums.txt"},
		"a signature of another checksums.txt": {func(dir string) {
			write(dir, checksumsSignature, fakeSignature([]byte("an older checksums.txt\n")))
		}, "checksums.txt.sigstore.json: signs sha256 "},
		"a signature that is no sigstore bundle": {func(dir string) { write(dir, checksumsSignature, []byte(`{"signature":"x"}`)) },
			"checksums.txt.sigstore.json: not a sigstore bundle"},
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
		"an image for one platform": {func(dir string) {
			amd64, _ := fakeArchive(t, "ghcr.io/trellis-dev/trellis-viewer:v0.1.0", "v0.1.0", "linux/amd64")
			write(dir, viewerArchive, amd64)
			writeChecksums(t, dir)
		}, "trellis-viewer.tar: holds sha256:"},
		"no SBOM for arm64": {func(dir string) {
			_ = os.Remove(filepath.Join(dir, sbomFile("viewer", "linux/arm64")))
			writeChecksums(t, dir)
		}, "trellis-viewer.linux-arm64.cdx.json: open"},
		"the manager's SBOM as the viewer's": {func(dir string) {
			write(dir, sbomFile("viewer", "linux/amd64"), fakeSBOM("manager", "linux/amd64", "sigs.k8s.io/yaml@v1.6.0"))
			writeChecksums(t, dir)
		}, "is not a CycloneDX SBOM of cmd/viewer for linux/amd64"},
		"the amd64 SBOM as the arm64 one": {func(dir string) {
			write(dir, sbomFile("manager", "linux/arm64"), fakeSBOM("manager", "linux/amd64", "sigs.k8s.io/yaml@v1.6.0"))
			writeChecksums(t, dir)
		}, "is not a CycloneDX SBOM of cmd/manager for linux/arm64"},
		"an SBOM of no module": {func(dir string) {
			write(dir, sbomFile("manager", "linux/arm64"), fakeSBOM("manager", "linux/arm64"))
			writeChecksums(t, dir)
		}, "lists no module"},
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
		if err := verifyDist(dir, testPlatforms, ""); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
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
	if err := verifyArchive(path, ref, testPlatforms); err != nil {
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
		if err := verifyArchive(path, tc.ref, testPlatforms); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%s: error %v, want one saying %q", name, err, tc.wantErr)
		}
	}
	// The version label is checked apart from the name.
	mislabelled, mislabelledDigest := fakeArchive(t, "ghcr.io/trellis-dev/trellis-manager:v0.1.0", "dev")
	if err := os.WriteFile(path, mislabelled, 0o644); err != nil {
		t.Fatal(err)
	}
	ref.digest = mislabelledDigest
	if err := verifyArchive(path, ref, testPlatforms); err == nil || !strings.Contains(err.Error(), `linux/amd64: label org.opencontainers.image.version="dev"`) {
		t.Errorf("a dev label: error %v", err)
	}
	// The platforms, in order.
	amd64, amd64Digest := fakeArchive(t, "ghcr.io/trellis-dev/trellis-manager:v0.1.0", "v0.1.0", "linux/amd64")
	if err := os.WriteFile(path, amd64, 0o644); err != nil {
		t.Fatal(err)
	}
	ref.digest = amd64Digest
	if err := verifyArchive(path, ref, []string{"linux/amd64"}); err != nil {
		t.Errorf("a one-platform release: %v", err)
	}
	if err := verifyArchive(path, ref, testPlatforms); err == nil || !strings.Contains(err.Error(), "holds images for linux/amd64, want linux/amd64 linux/arm64") {
		t.Errorf("an amd64 image where two platforms are wanted: error %v", err)
	}
	swapped, swappedDigest := fakeArchive(t, "ghcr.io/trellis-dev/trellis-manager:v0.1.0", "v0.1.0", "linux/arm64", "linux/amd64")
	if err := os.WriteFile(path, swapped, 0o644); err != nil {
		t.Fatal(err)
	}
	ref.digest = swappedDigest
	if err := verifyArchive(path, ref, testPlatforms); err == nil || !strings.Contains(err.Error(), "holds images for linux/arm64 linux/amd64") {
		t.Errorf("the platforms in another order: error %v", err)
	}
}

// An SBOM lists exactly the modules its binary links: this test's own
// binary, whose modules Go recorded in it, against SBOMs with and without one
// of them.
func TestVerifySBOMAgainstTheBinary(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	info, err := buildinfo.ReadFile(self)
	if err != nil || len(info.Deps) == 0 {
		t.Fatalf("the test binary records no modules (%v)", err)
	}
	modules := make([]string, 0, len(info.Deps))
	for _, d := range info.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		modules = append(modules, d.Path+"@"+d.Version)
	}
	path := filepath.Join(t.TempDir(), "sbom.json")
	for name, tc := range map[string]struct {
		modules []string
		wantErr string
	}{
		"every module":     {modules, ""},
		"one module short": {modules[1:], "they differ"},
		"one module more":  {append(append([]string(nil), modules...), "example.com/extra@v1.0.0"), "they differ"},
	} {
		if err := os.WriteFile(path, fakeSBOM("manager", "linux/amd64", tc.modules...), 0o644); err != nil {
			t.Fatal(err)
		}
		err := verifySBOM(path, "manager", "linux/amd64", self)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("%s: error %v, want %q", name, err, tc.wantErr)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
