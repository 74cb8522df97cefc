package main

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

const testRef = "docker.io/library/trellis-manager:dev"

func testSpec(binary string) spec { return platformSpec("linux/amd64", binary) }

func platformSpec(platform, binary string) spec {
	p, err := v1.ParsePlatform(platform)
	if err != nil {
		panic(err)
	}
	return spec{
		platform:   *p,
		binary:     []byte(binary),
		entrypoint: "/manager",
		labels:     map[string]string{"org.opencontainers.image.title": "trellis-manager", "org.opencontainers.image.revision": "abc"},
	}
}

func archive(t *testing.T, s spec) ([]byte, v1.Hash) {
	t.Helper()
	img, err := build(s)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	d, err := writeOCIArchive(&b, img, testRef)
	if err != nil {
		t.Fatal(err)
	}
	return b.Bytes(), d
}

// The same inputs give byte-identical archives and the same digest; a
// different binary gives a different digest.
func TestSameSourceSameDigest(t *testing.T) {
	a1, d1 := archive(t, testSpec("binary one"))
	a2, d2 := archive(t, testSpec("binary one"))
	if d1 != d2 {
		t.Errorf("digests differ: %s vs %s", d1, d2)
	}
	if !bytes.Equal(a1, a2) {
		t.Error("archives differ byte for byte")
	}
	if _, d3 := archive(t, testSpec("binary two")); d3 == d1 {
		t.Error("a different binary gave the same digest")
	}
}

// The image runs the entrypoint as 65532 on linux/amd64, with the labels.
func TestImageConfig(t *testing.T) {
	img, err := build(testSpec("x"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.OS != "linux" || cfg.Architecture != "amd64" {
		t.Errorf("platform %s/%s, want linux/amd64", cfg.OS, cfg.Architecture)
	}
	if cfg.Config.User != "65532:65532" {
		t.Errorf("user %q", cfg.Config.User)
	}
	if !reflect.DeepEqual(cfg.Config.Entrypoint, []string{"/manager"}) {
		t.Errorf("entrypoint %q", cfg.Config.Entrypoint)
	}
	if cfg.Config.Labels["org.opencontainers.image.revision"] != "abc" {
		t.Errorf("labels %v", cfg.Config.Labels)
	}
	if !cfg.Created.Equal(epoch) {
		t.Errorf("created %s, want the epoch", cfg.Created)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.MediaType != "application/vnd.oci.image.manifest.v1+json" || len(m.Layers) != 1 {
		t.Errorf("manifest %s with %d layers, want one OCI layer", m.MediaType, len(m.Layers))
	}
}

// The layer holds exactly the base files and the binary: no shell, owned by
// root, time stamps at the epoch, the binary executable.
func TestLayerContents(t *testing.T) {
	img, err := build(testSpec("the binary"))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]*tar.Header{}
	var names []string
	tr := tar.NewReader(bytes.NewReader(layerOf(t, img)))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got[h.Name], names = h, append(names, h.Name)
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(epoch) {
			t.Errorf("%s: uid %d gid %d mtime %s", h.Name, h.Uid, h.Gid, h.ModTime)
		}
		if h.Name == "manager" {
			b, _ := io.ReadAll(tr)
			if string(b) != "the binary" || h.Mode != 0o755 {
				t.Errorf("manager: %q mode %o", b, h.Mode)
			}
		}
	}
	want := []string{"etc/", "etc/group", "etc/passwd", "etc/ssl/", "etc/ssl/certs/", "etc/ssl/certs/ca-certificates.crt", "manager"}
	if !reflect.DeepEqual(names, want) {
		t.Errorf("layer holds %q, want %q", names, want)
	}
}

// The CA bundle is the Mozilla set as parseable PEM certificates.
func TestCACertificates(t *testing.T) {
	rest, n := caCertificates(), 0
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			t.Fatalf("certificate %d: %v", n, err)
		}
		n++
	}
	if n < 50 || len(bytes.TrimSpace(rest)) != 0 {
		t.Errorf("%d certificates and %d bytes of something else, want the Mozilla set alone", n, len(rest))
	}
}

// rootfs (the Dockerfile's source) writes the same files with the same
// modes as the image's layer.
func TestRootFSMatchesLayer(t *testing.T) {
	dir := t.TempDir()
	if err := writeRootFS(dir); err != nil {
		t.Fatal(err)
	}
	for _, f := range baseFiles() {
		fi, err := os.Stat(filepath.Join(dir, f.name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.IsDir() != f.dir || int64(fi.Mode().Perm()) != f.mode {
			t.Errorf("%s: dir %v mode %o, want dir %v mode %o", f.name, fi.IsDir(), fi.Mode().Perm(), f.dir, f.mode)
		}
		if !f.dir {
			b, _ := os.ReadFile(filepath.Join(dir, f.name))
			if !bytes.Equal(b, f.data) {
				t.Errorf("%s differs", f.name)
			}
		}
	}
}

// The archive's index names the image for containerd and points at the manifest.
func TestArchiveIndex(t *testing.T) {
	a, d := archive(t, testSpec("x"))
	tr := tar.NewReader(bytes.NewReader(a))
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no index.json: %v", err)
		}
		if h.Name != "index.json" {
			continue
		}
		var idx v1.IndexManifest
		if err := json.NewDecoder(tr).Decode(&idx); err != nil {
			t.Fatal(err)
		}
		if len(idx.Manifests) != 1 || idx.Manifests[0].Digest != d ||
			idx.Manifests[0].Annotations["io.containerd.image.name"] != testRef {
			t.Errorf("index %+v", idx)
		}
		return
	}
}

// Binaries for two platforms make one OCI index of two images, each
// configured for its platform; the same inputs give the same bytes, and a
// platform given twice is refused.
func TestIndexOfPlatforms(t *testing.T) {
	specs := []spec{platformSpec("linux/amd64", "amd64 binary"), platformSpec("linux/arm64", "arm64 binary")}
	write := func() ([]byte, v1.Hash) {
		a, err := buildAll(specs)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		d, err := writeOCIArchive(&b, a, testRef)
		if err != nil {
			t.Fatal(err)
		}
		return b.Bytes(), d
	}
	a1, d1 := write()
	a2, d2 := write()
	if d1 != d2 || !bytes.Equal(a1, a2) {
		t.Errorf("two builds differ: %s vs %s", d1, d2)
	}
	got, named, err := readOCIArchive(a1)
	if err != nil {
		t.Fatal(err)
	}
	idx, ok := got.(v1.ImageIndex)
	if !ok || named != testRef {
		t.Fatalf("the archive holds a %T named %q, want an index", got, named)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if im.MediaType != "application/vnd.oci.image.index.v1+json" || len(im.Manifests) != 2 {
		t.Fatalf("index %s with %d manifests", im.MediaType, len(im.Manifests))
	}
	for i, m := range im.Manifests {
		want := specs[i].platform
		if m.Platform == nil || m.Platform.String() != want.String() {
			t.Errorf("manifest %d is for %v, want %s", i, m.Platform, want)
		}
		img, err := idx.Image(m.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Platform().String() != want.String() || cfg.Config.User != user {
			t.Errorf("image %d: config for %s as %q", i, cfg.Platform(), cfg.Config.User)
		}
	}
	if _, err := buildAll([]spec{specs[0], specs[0]}); err == nil {
		t.Error("built an index with linux/amd64 twice")
	}
}

func TestBinaryFlag(t *testing.T) {
	var b binaryFlags
	for _, bad := range []string{"bin/manager", "linux/amd64=", "windows/amd64=x", "linux=x"} {
		if err := b.Set(bad); err == nil {
			t.Errorf("-binary %q accepted", bad)
		}
	}
	if err := b.Set("linux/arm64=bin/linux-arm64/manager"); err != nil || b[0].platform.Architecture != "arm64" || b[0].path != "bin/linux-arm64/manager" {
		t.Errorf("-binary linux/arm64=...: %v %+v", err, b)
	}
}

// layerOf is the uncompressed tar of img's only layer.
func layerOf(t *testing.T, img v1.Image) []byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers, %v", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rc.Close() }()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return data
}
