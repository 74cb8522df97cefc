package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// A release pushed with COSIGN_KEY verifies as docs/operations.md ("Checking
// a release") tells a user to verify it: each image by the digest
// images.txt pins, its index and each platform's image, with the release's
// public key; checksums.txt with its bundle, and the chart against
// checksums.txt. Another key, a changed checksums.txt or chart, and an
// unsigned image pushed under the release's tag are refused.
//
// It runs `make release` (tens of seconds) with the cosign that
// SIGNED_RELEASE_COSIGN names: make test's signed-release step sets it;
// plain `go test` skips this test. Nothing may leave 127.0.0.1: every HTTP
// client is sent through a proxy that fails the test when anything connects
// to it (Go never proxies loopback, so the registry is reached directly),
// and cosign must not so much as make a TUF root for Sigstore's services.
func TestSignedRelease(t *testing.T) {
	cosign := os.Getenv("SIGNED_RELEASE_COSIGN")
	if cosign == "" {
		t.Skip("SIGNED_RELEASE_COSIGN=path/to/cosign runs it (make test's signed-release step)")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	host := registryHost(t)
	guard := networkTrap(t)
	tmp := t.TempDir()
	tufRoot := filepath.Join(tmp, "tuf")
	env := append(os.Environ(),
		"COSIGN="+cosign,
		"COSIGN_PASSWORD=release-test",
		"DOCKER_CONFIG="+filepath.Join(tmp, "docker"), // anonymous, as the test registry wants
		"TUF_ROOT="+tufRoot,                           // were cosign to look for Sigstore's root, not in $HOME
		"HTTP_PROXY="+guard.url, "HTTPS_PROXY="+guard.url, "http_proxy="+guard.url, "https_proxy="+guard.url,
		"NO_PROXY=", "no_proxy=",
	)
	run := func(dir string, args ...string) (string, error) {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	mustRun := func(dir string, args ...string) string {
		t.Helper()
		out, err := run(dir, args...)
		if err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	keys, otherKeys := filepath.Join(tmp, "keys"), filepath.Join(tmp, "other-keys")
	for _, dir := range []string{keys, otherKeys} {
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		mustRun(dir, cosign, "generate-key-pair")
	}
	pub, otherPub := filepath.Join(keys, "cosign.pub"), filepath.Join(otherKeys, "cosign.pub")

	dist := filepath.Join(tmp, "dist")
	started := time.Now()
	mustRun(root, "make", "--no-print-directory", "-s", "release", "VERSION=v0.0.0-signed", "ALLOW_DIRTY=1",
		"PUSH="+host+"/trellis", "COSIGN_KEY="+filepath.Join(keys, "cosign.key"), "DIST="+dist)
	t.Logf("make release: %s", time.Since(started).Round(time.Second/10))
	started = time.Now()

	// What a user runs (docs/operations.md); the image references as
	// images.txt pins them, each platform's image found in its index.
	verify := func(key string, refs ...string) []string {
		return slices.Concat([]string{cosign, "verify", "--insecure-ignore-tlog=true", "--key", key}, refs)
	}
	verifyBlob := func(key, checksums string) []string {
		return []string{cosign, "verify-blob", "--insecure-ignore-tlog=true", "--key", key, "--bundle", "checksums.txt.sigstore.json", checksums}
	}
	images, err := os.ReadFile(filepath.Join(dist, "images.txt"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(images)), "\n")
	pinned, platforms := make([]string, 0, len(lines)), make([]string, 0, 2*len(lines))
	for _, line := range lines {
		_, ref, _ := strings.Cut(line, " ")
		d, err := name.NewDigest(ref)
		if err != nil {
			t.Fatalf("images.txt: %v", err)
		}
		pinned = append(pinned, d.Context().Digest(d.DigestStr()).String())
		index, err := remote.Index(d)
		if err != nil {
			t.Fatal(err)
		}
		m, err := index.IndexManifest()
		if err != nil {
			t.Fatal(err)
		}
		for _, desc := range m.Manifests {
			platforms = append(platforms, d.Context().Digest(desc.Digest.String()).String())
		}
	}
	if len(pinned) != 2 || len(platforms) != 4 {
		t.Fatalf("images.txt pins %q, with the platforms' images %q; want 2 indexes of 2", pinned, platforms)
	}
	managerTag := host + "/trellis/trellis-manager:v0.0.0-signed"
	mustRun(dist, verify(pub, slices.Concat(pinned, platforms, []string{managerTag})...)...)
	mustRun(dist, verifyBlob(pub, "checksums.txt")...)
	mustRun(dist, "sha256sum", "-c", "--quiet", "checksums.txt")
	// The signature beside checksums.txt leaves the release whole.
	mustRun(root, "go", "run", "./hack/release", "verify", dist)

	// An unsigned image pushed under the release's tag: the tag no longer
	// verifies, the digest the release pinned still does.
	unsigned, err := build(testSpec("not the release's manager"))
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(managerTag)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := push(context.Background(), unsigned, tag); err != nil {
		t.Fatal(err)
	}
	mustRun(dist, verify(pub, pinned[0])...)

	checksums, err := os.ReadFile(filepath.Join(dist, "checksums.txt"))
	if err != nil {
		t.Fatal(err)
	}
	// The chart changed after it was signed, beside the signed checksums.txt.
	changed := filepath.Join(tmp, "changed")
	if err := os.Mkdir(changed, 0o755); err != nil {
		t.Fatal(err)
	}
	chart, err := os.ReadFile(filepath.Join(dist, "trellis-0.0.0-signed.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(changed, "trellis-0.0.0-signed.tgz"), append(chart, 0))
	writeFile(t, filepath.Join(changed, "checksums.txt"), checksums)
	const (
		wrongKey    = "accepted signatures do not match threshold"
		noSignature = "no signatures found"
		badBlob     = "invalid signature"
	)
	changedChecksums := writeFile(t, filepath.Join(tmp, "checksums.txt"),
		bytes.Replace(checksums, []byte("trellis-0.0.0-signed.tgz"), []byte("trellis-0.0.0-signed.tgz.old"), 1))
	for what, tc := range map[string]struct {
		dir     string
		args    []string
		wantErr string
	}{
		"the manager with another key":        {dist, verify(otherPub, pinned[0]), wrongKey},
		"a platform's image with another key": {dist, verify(otherPub, platforms[0]), wrongKey},
		"the viewer with another key":         {dist, verify(otherPub, pinned[1]), wrongKey},
		"an unsigned image under the tag":     {dist, verify(pub, managerTag), noSignature},
		"checksums.txt with another key":      {dist, verifyBlob(otherPub, "checksums.txt"), badBlob},
		"a changed checksums.txt":             {dist, verifyBlob(pub, changedChecksums), badBlob},
		"a changed chart":                     {changed, []string{"sha256sum", "-c", "--ignore-missing", "checksums.txt"}, "trellis-0.0.0-signed.tgz: FAILED"},
	} {
		if out, err := run(tc.dir, tc.args...); err == nil || !strings.Contains(out, tc.wantErr) {
			t.Errorf("%s: %v, want an error saying %q\n%s", what, err, tc.wantErr, out)
		}
	}
	if _, err := os.Stat(tufRoot); err == nil {
		t.Errorf("cosign made a TUF root in %s: it looked for Sigstore's public services", tufRoot)
	}
	t.Logf("verifying: %s", time.Since(started).Round(time.Second/10))
}

// writeFile writes data to path and returns path.
func writeFile(t *testing.T, path string, data []byte) string {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// trap is an HTTP proxy that answers nothing: a client sent through it
// fails at once instead of waiting for DNS, and the test fails, saying who
// tried, when it ends (a Fatal included).
type trap struct {
	url   string
	mu    sync.Mutex
	tries []string
}

func networkTrap(t *testing.T) *trap {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	tr := &trap{url: "http://" + l.Addr().String()}
	t.Cleanup(func() {
		if err := tr.err(); err != nil {
			t.Error(err)
		}
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			line, _ := bufio.NewReader(c).ReadString('\n') // "CONNECT host:443 HTTP/1.1", or a plain request's line
			_ = c.Close()
			tr.mu.Lock()
			tr.tries = append(tr.tries, strings.TrimSpace(line))
			tr.mu.Unlock()
		}
	}()
	return tr
}

func (tr *trap) err() error {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.tries) == 0 {
		return nil
	}
	return fmt.Errorf("went beyond 127.0.0.1: %q", tr.tries)
}
