package viewer

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// tarEntry is one entry of a test tarball: a file unless link is set.
type tarEntry struct {
	name, body, link string
	kind             byte
}

func tarball(t *testing.T, entries ...tarEntry) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: e.kind, Linkname: e.link}
		if e.kind == 0 {
			hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(e.body))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestUnpackKeepsPagesAndImagesOnly(t *testing.T) {
	g := NewWithT(t)
	snap, err := unpack(bytes.NewReader(tarball(t,
		tarEntry{name: "./", kind: tar.TypeDir},
		tarEntry{name: "./README.md", body: "# Home"},
		tarEntry{name: "./docs/guide/setup.md", body: "# Setup"},
		tarEntry{name: "./docs/img/logo.png", body: "\x89PNG\r\n\x1a\n"},
		tarEntry{name: "./main.go", body: "package main"},
		tarEntry{name: "./.github/CODEOWNERS.md", body: "hidden"},
		tarEntry{name: "./docs/.hidden/a.md", body: "hidden"},
		tarEntry{name: "./link.md", kind: tar.TypeSymlink, link: "/etc/passwd"},
		tarEntry{name: "./hard.md", kind: tar.TypeLink, link: "README.md"},
	)), "", DefaultLimits)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(snap.Tree).To(BeTrue())
	g.Expect(snap.Pages).To(Equal(map[string]string{"README.md": "# Home", "docs/guide/setup.md": "# Setup"}))
	g.Expect(snap.Assets).To(HaveKey("docs/img/logo.png"))
	g.Expect(snap.Assets).To(HaveLen(1))
}

func TestUnpackPathKeepsOneFolder(t *testing.T) {
	g := NewWithT(t)
	snap, err := unpack(bytes.NewReader(tarball(t,
		tarEntry{name: "README.md", body: "# Repo"},
		tarEntry{name: "docs/README.md", body: "# Docs"},
		tarEntry{name: "docs/a/b.md", body: "# B"},
		tarEntry{name: "docsx/c.md", body: "# not docs"},
	)), "docs/", DefaultLimits)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(snap.Pages).To(Equal(map[string]string{"README.md": "# Docs", "a/b.md": "# B"}))
}

func TestUnpackRefusesWhatBreaksItsLimits(t *testing.T) {
	small := Limits{Download: 1 << 20, Entries: 3, Unpacked: 4 << 10, Site: 100}
	for _, tc := range []struct {
		name    string
		entries []tarEntry
		want    error
	}{
		{"dot-dot", []tarEntry{{name: "../escape.md", body: "x"}}, ErrUnsafePath},
		{"dot-dot inside", []tarEntry{{name: "docs/../../escape.md", body: "x"}}, ErrUnsafePath},
		{"absolute", []tarEntry{{name: "/etc/escape.md", body: "x"}}, ErrUnsafePath},
		{"backslash", []tarEntry{{name: `..\escape.md`, body: "x"}}, ErrUnsafePath},
		{"dot-dot link", []tarEntry{{name: "../l.md", kind: tar.TypeSymlink, link: "x"}}, ErrUnsafePath},
		{"too many entries", []tarEntry{{name: "a.go"}, {name: "b.go"}, {name: "c.go"}, {name: "d.go"}}, ErrTooLarge},
		{"pages over the site's size", []tarEntry{{name: "a.md", body: strings.Repeat("x", 60)}, {name: "b.md", body: strings.Repeat("x", 60)}}, ErrTooLarge},
		// Names are kept too: thousands of empty pages with long names
		// (PAX lets a name take a megabyte) must not grow past the site's size.
		{"page names over the site's size", []tarEntry{{name: strings.Repeat("n", 57) + ".md"}, {name: strings.Repeat("m", 57) + ".md"}}, ErrTooLarge},
		// Not kept, but inflated all the same: the unpacked bound counts it.
		{"a bomb of skipped bytes", []tarEntry{{name: "big.bin", body: strings.Repeat("\x00", 64<<10)}}, ErrTooLarge},
		{"a device", []tarEntry{{name: "dev.md", kind: tar.TypeChar}}, errEntryFormat},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := unpack(bytes.NewReader(tarball(t, tc.entries...)), "", small)
			if !errors.Is(err, tc.want) {
				t.Fatalf("unpack: %v, want %v", err, tc.want)
			}
		})
	}
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func writeArtifact(t *testing.T, file string, a Artifact) {
	t.Helper()
	b, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestArtifactSourceKeepsTheLastGoodSite(t *testing.T) {
	g := NewWithT(t)
	good := tarball(t, tarEntry{name: "README.md", body: "# Good"})
	bad := tarball(t, tarEntry{name: "README.md", body: "# Tampered"})
	noise := make([]byte, 32<<10) // incompressible: the tarball stays over the download limit
	_, _ = rand.Read(noise)
	big := tarball(t, tarEntry{name: "README.md", body: "# Big"}, tarEntry{name: "noise.bin", body: string(noise)})
	bodies := map[string][]byte{"/good": good, "/bad": bad, "/big": big}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := bodies[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(body)
	}))
	defer srv.Close()
	file := filepath.Join(t.TempDir(), ArtifactFile)
	src := &ArtifactSource{File: file, Client: srv.Client(), Limits: Limits{Download: 16 << 10, Entries: 10, Unpacked: 1 << 20, Site: 1 << 20},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	s := NewServer(src, src.Log)
	ctx := context.Background()

	writeArtifact(t, file, Artifact{URL: srv.URL + "/good", Digest: digestOf(good), Revision: "main@sha1:1111"})
	src.Sync(ctx)
	g.Expect(do(s, http.MethodGet, "/").Body.String()).To(And(ContainSubstring("Good"), ContainSubstring("Revision main@sha1:1111")))

	for _, tc := range []struct {
		name string
		a    Artifact
		want string
	}{
		{"a digest that does not match", Artifact{URL: srv.URL + "/bad", Digest: digestOf([]byte("what the source said")), Revision: "main@sha1:2222"}, ErrDigest.Error()},
		{"an oversized artifact", Artifact{URL: srv.URL + "/big", Digest: digestOf(big), Revision: "main@sha1:3333"}, ErrTooLarge.Error()},
		{"one that is gone", Artifact{URL: srv.URL + "/gone", Digest: digestOf(nil), Revision: "main@sha1:4444"}, "404 Not Found"},
	} {
		writeArtifact(t, file, tc.a)
		src.Sync(ctx)
		body := do(s, http.MethodGet, "/").Body.String()
		g.Expect(body).To(ContainSubstring("Good"), tc.name)
		g.Expect(body).NotTo(ContainSubstring("Tampered"), tc.name)
		st := src.Status()
		g.Expect(st.Serving.Revision).To(Equal("main@sha1:1111"), tc.name)
		g.Expect(st.Failed.Revision).To(Equal(tc.a.Revision), tc.name)
		g.Expect(st.Error).To(ContainSubstring(tc.want), tc.name)
		g.Expect(do(s, http.MethodGet, "/status").Body.String()).To(ContainSubstring(tc.a.Revision), tc.name)
	}
}

func TestSiteWithFolders(t *testing.T) {
	g := NewWithT(t)
	png := "\x89PNG\r\n\x1a\n" + strings.Repeat("\x00", 16)
	snap, err := unpack(bytes.NewReader(tarball(t,
		tarEntry{name: "README.md", body: "# Home\n\n[Setup](guide/setup.md) and [the guide](guide)"},
		tarEntry{name: "guide/index.md", body: "# Guide\n\n![Logo](../img/logo.png)"},
		tarEntry{name: "guide/setup.md", body: "# Setup\n\n[Home](../README.md)"},
		tarEntry{name: "guide/deep/more.md", body: "# More"},
		tarEntry{name: "img/logo.png", body: png},
		tarEntry{name: "go.mod", body: "module x"},
	)), "", DefaultLimits)
	g.Expect(err).NotTo(HaveOccurred())
	snap.Version, snap.Revision = "v1", "main@sha1:abcd"
	mem := &snapshotSource{snap}
	s := NewServer(mem, slog.New(slog.NewTextHandler(io.Discard, nil)))

	root := do(s, http.MethodGet, "/").Body.String()
	g.Expect(root).To(ContainSubstring(`<a href="guide/setup.md">Setup</a>`))
	g.Expect(root).To(ContainSubstring("Revision main@sha1:abcd"))
	g.Expect(navOf(g, root)).To(Equal([]string{
		`<li class="depth-0 active"><a href="/README.md">README</a></li>`,
		`<li class="depth-0"><a href="/guide/index.md">guide</a></li>`,
		`<li class="depth-1"><a href="/guide/setup.md">setup</a></li>`,
		`<li class="depth-1 draft">deep</li>`,
		`<li class="depth-2"><a href="/guide/deep/more.md">more</a></li>`,
	}))

	// A folder's URL ends in "/", so its page's relative links resolve in it.
	rec := do(s, http.MethodGet, "/guide")
	g.Expect(rec.Code).To(Equal(http.StatusFound))
	g.Expect(rec.Header().Get("Location")).To(Equal("/guide/"))
	g.Expect(do(s, http.MethodGet, "/guide/").Body.String()).To(ContainSubstring(`<img src="../img/logo.png" alt="Logo">`))
	g.Expect(do(s, http.MethodGet, "/img/logo.png").Header().Get("Content-Type")).To(Equal("image/png"))
	g.Expect(do(s, http.MethodGet, "/guide/setup.md").Body.String()).To(ContainSubstring(`<a href="../README.md">Home</a>`))
	for _, path := range []string{"/go.mod", "/guide/deep/", "/img/", "/../README.md", "/guide/../README.md"} {
		g.Expect(do(s, http.MethodGet, path).Code).To(Equal(http.StatusNotFound), path)
	}
}

// snapshotSource serves one Snapshot.
type snapshotSource struct{ snap *Snapshot }

func (s *snapshotSource) Version(context.Context) (string, error) { return s.snap.Version, nil }
func (s *snapshotSource) Load(context.Context) (*Snapshot, error) { return s.snap, nil }
