package main

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// registryHost serves an empty in-process registry (go-containerregistry's,
// in memory) for the test and returns its host:port.
func registryHost(t *testing.T) string {
	t.Helper()
	s := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

// An archive's image reaches the registry unchanged: same digest, config
// and layers; the registry serves it under the tag.
func TestPushToRegistry(t *testing.T) {
	host := registryHost(t)
	a, want := archive(t, testSpec("the manager"))
	img, named, err := readOCIArchive(a)
	if err != nil {
		t.Fatal(err)
	}
	if named != testRef {
		t.Errorf("the archive names its image %q", named)
	}
	tag, err := name.NewTag(host + "/trellis-dev/trellis-manager:v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	got, err := push(context.Background(), img, tag)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("pushed %s, the archive holds %s", got, want)
	}
	pulled, err := remote.Image(tag)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := pulled.Digest(); d != want {
		t.Errorf("the registry serves %s, want %s", d, want)
	}
	cfg, err := pulled.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.Labels["org.opencontainers.image.title"] != "trellis-manager" || cfg.Config.User != "65532:65532" {
		t.Errorf("the pulled config: labels %v, user %q", cfg.Config.Labels, cfg.Config.User)
	}
	if !bytes.Contains(layerOf(t, pulled), []byte("the manager")) {
		t.Error("the pulled layer does not hold the binary")
	}
}

// The command: -ref names where; without it, the name in the archive.
func TestPushCommand(t *testing.T) {
	host := registryHost(t)
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // no credentials: anonymous, as the test registry wants
	img, err := build(testSpec("the viewer"))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	want, err := writeOCIArchive(&b, img, host+"/trellis-dev/trellis-viewer:v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "trellis-viewer.tar")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{
		{"push", "-archive", path},
		{"push", "-archive", path, "-ref", host + "/mirror/trellis-viewer:v0.1.0"},
	} {
		if err := run(args); err != nil {
			t.Fatalf("%q: %v", args, err)
		}
	}
	for _, ref := range []string{host + "/trellis-dev/trellis-viewer:v0.1.0", host + "/mirror/trellis-viewer:v0.1.0"} {
		r, err := name.ParseReference(ref)
		if err != nil {
			t.Fatal(err)
		}
		desc, err := remote.Head(r)
		if err != nil {
			t.Fatal(err)
		}
		if desc.Digest != want {
			t.Errorf("%s is %s, want %s", ref, desc.Digest, want)
		}
	}
	if err := run([]string{"push", "-archive", path, "-ref", host + "/x@sha256:" + strings.Repeat("0", 64)}); err == nil {
		t.Error("pushed to a digest rather than a tag")
	}
}

// An archive whose blob was changed is refused before anything is sent.
func TestPushRefusesATamperedArchive(t *testing.T) {
	a, _ := archive(t, testSpec("the manager"))
	i := bytes.Index(a, []byte(`"org.opencontainers.image.revision":"abc"`))
	if i < 0 {
		t.Fatal("no revision label in the archive's config")
	}
	tampered := append([]byte(nil), a...)
	copy(tampered[i:], `"org.opencontainers.image.revision":"abd"`)
	got, _, err := readOCIArchive(tampered)
	if err == nil {
		_, err = got.(v1.Image).RawConfigFile()
	}
	if err == nil || !strings.Contains(err.Error(), "does not match its digest") {
		t.Errorf("error %v, want a digest mismatch", err)
	}
}

// A two-platform archive reaches the registry as one index: the same
// digest, and each platform's image under it, with its own binary.
func TestPushIndexToRegistry(t *testing.T) {
	host := registryHost(t)
	idx, err := buildAll([]spec{platformSpec("linux/amd64", "amd64 manager"), platformSpec("linux/arm64", "arm64 manager")})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	want, err := writeOCIArchive(&b, idx, testRef)
	if err != nil {
		t.Fatal(err)
	}
	a, _, err := readOCIArchive(b.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(host + "/trellis-dev/trellis-manager:v0.1.0")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := push(context.Background(), a, tag); err != nil || got != want {
		t.Fatalf("pushed %s (%v), the archive holds %s", got, err, want)
	}
	pulled, err := remote.Index(tag)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := pulled.Digest(); d != want {
		t.Errorf("the registry serves %s, want %s", d, want)
	}
	for _, arch := range []string{"amd64", "arm64"} {
		img, err := remote.Image(tag, remote.WithPlatform(v1.Platform{OS: "linux", Architecture: arch}))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(layerOf(t, img), []byte(arch+" manager")) {
			t.Errorf("linux/%s pulls a layer without its own binary", arch)
		}
	}
}
