package viewer

import (
	"context"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// configMapVolume lays out dir the way the kubelet writes a ConfigMap volume:
// the files live in a timestamped directory, "..data" links to it, and each
// key is a symlink through "..data".
type configMapVolume struct {
	t   *testing.T
	dir string
}

func (v configMapVolume) write(rel, text string) {
	v.t.Helper()
	NewWithT(v.t).Expect(os.WriteFile(filepath.Join(v.dir, rel), []byte(text), 0o644)).To(Succeed())
}

func (v configMapVolume) symlink(target, name string) {
	v.t.Helper()
	NewWithT(v.t).Expect(os.Symlink(target, filepath.Join(v.dir, name))).To(Succeed())
}

// publish writes files into a new timestamped directory and swaps "..data"
// to it atomically, as the kubelet's AtomicWriter does; it returns the
// directory's name.
func (v configMapVolume) publish(ts string, files map[string]string) string {
	v.t.Helper()
	g := NewWithT(v.t)
	tsDir := ".." + ts
	g.Expect(os.Mkdir(filepath.Join(v.dir, tsDir), 0o755)).To(Succeed())
	for name, text := range files {
		v.write(filepath.Join(tsDir, name), text)
	}
	v.symlink(tsDir, "..data_tmp")
	g.Expect(os.Rename(filepath.Join(v.dir, "..data_tmp"), filepath.Join(v.dir, "..data"))).To(Succeed())
	return tsDir
}

// loadPages loads src and checks that the snapshot carries the version
// Version reported just before (nothing changes in between here).
func loadPages(g Gomega, src Source) map[string]string {
	version, err := src.Version(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	snap, err := src.Load(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(snap.Version).To(Equal(version))
	return snap.Pages
}

func TestDirSourceConfigMapVolume(t *testing.T) {
	g := NewWithT(t)
	v := configMapVolume{t: t, dir: t.TempDir()}
	src := DirSource{Dir: v.dir}

	old := v.publish("2026_11_22_01_00_00.123", map[string]string{"a.md": "# A one\n", "b.md": "# B one\n"})
	v.symlink("..data/a.md", "a.md")
	v.symlink("..data/b.md", "b.md")
	// Things that are not pages.
	v.write("notes.txt", "not markdown\n")
	v.symlink("..data/notes.txt", "linked.txt")
	g.Expect(os.Mkdir(filepath.Join(v.dir, "dir.md"), 0o755)).To(Succeed())
	v.write(filepath.Join("dir.md", "inner.md"), "# inside a directory\n")
	v.write(".hidden.md", "# hidden\n")
	v.symlink("..data/gone.md", "dangling.md")
	v.symlink("..data", "linked-dir.md")

	// The layout really is what the test means it to be.
	target, err := os.Readlink(filepath.Join(v.dir, "..data"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(target).To(Equal(old))

	g.Expect(loadPages(g, src)).To(Equal(map[string]string{"a.md": "# A one\n", "b.md": "# B one\n"}))
	first, err := src.Version(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(first).To(Equal("configmap:" + old))

	// An update: a new timestamped directory in which a.md changed and b.md
	// is gone; ..data is swapped by rename. The old b.md symlink dangles
	// until the kubelet removes it; the files are read from the new
	// directory, so it is already gone.
	v.publish("2026_11_22_02_00_00.456", map[string]string{"a.md": "# A two\n"})
	g.Expect(loadPages(g, src)).To(Equal(map[string]string{"a.md": "# A two\n"}))
	second, _ := src.Version(context.Background())
	g.Expect(second).NotTo(Equal(first))

	g.Expect(os.Remove(filepath.Join(v.dir, "b.md"))).To(Succeed())
	g.Expect(os.RemoveAll(filepath.Join(v.dir, old))).To(Succeed())
	g.Expect(loadPages(g, src)).To(Equal(map[string]string{"a.md": "# A two\n"}))
	third, _ := src.Version(context.Background())
	g.Expect(third).To(Equal(second), "cleaning up is not a new version")

	// A file added by a later update is there at once: the new directory
	// holds it even before its top-level symlink exists.
	v.publish("2026_11_22_03_00_00.789", map[string]string{"a.md": "# A two\n", "c.md": "# C\n"})
	g.Expect(loadPages(g, src)).To(Equal(map[string]string{"a.md": "# A two\n", "c.md": "# C\n"}))
}

func TestDirSourceConfigMapVolumeWithAssets(t *testing.T) {
	g := NewWithT(t)
	v := configMapVolume{t: t, dir: t.TempDir()}
	v.publish("2026_11_22_01_00_00.123", map[string]string{
		"a.md":        "# A\n",
		"logo.png":    "\x89PNG\r\n\x1a\nrest",
		"diagram.svg": "<svg xmlns=\"http://www.w3.org/2000/svg\"/>",
		"notes.txt":   "neither a page nor an asset",
		"run.sh":      "#!/bin/sh\n",
	})
	snap, err := DirSource{Dir: v.dir}.Load(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(snap.Pages).To(Equal(map[string]string{"a.md": "# A\n"}))
	g.Expect(snap.Assets).To(Equal(map[string][]byte{
		"logo.png":    []byte("\x89PNG\r\n\x1a\nrest"),
		"diagram.svg": []byte("<svg xmlns=\"http://www.w3.org/2000/svg\"/>"),
	}))
}

func TestDirSourceDanglingDataLink(t *testing.T) {
	g := NewWithT(t)
	v := configMapVolume{t: t, dir: t.TempDir()}
	v.symlink("..2026_11_22_01_00_00.123", "..data") // removed, or never written
	_, err := DirSource{Dir: v.dir}.Load(context.Background())
	g.Expect(err).To(MatchError(os.ErrNotExist))
}

func TestDirSourceServedThroughServer(t *testing.T) {
	g := NewWithT(t)
	v := configMapVolume{t: t, dir: t.TempDir()}
	v.publish("2026_11_22_01_00_00.123", map[string]string{"a.md": "# Old\n", SummaryFile: "- [A](a.md)\n"})
	v.symlink("..data/a.md", "a.md")
	v.symlink("..data/"+SummaryFile, SummaryFile)
	s := NewServer(DirSource{Dir: v.dir}, slog.New(slog.DiscardHandler))

	g.Expect(do(s, http.MethodGet, "/").Body.String()).To(ContainSubstring(`<h1 id="old">Old</h1>`))
	v.publish("2026_11_22_02_00_00.456", map[string]string{"a.md": "# New\n", SummaryFile: "- [A](a.md)\n"})
	g.Expect(do(s, http.MethodGet, "/a.md").Body.String()).To(ContainSubstring(`<h1 id="new">New</h1>`))
	// The timestamped directories and ..data are never pages.
	g.Expect(do(s, http.MethodGet, "/..data").Code).To(Equal(http.StatusNotFound))
	g.Expect(do(s, http.MethodGet, "/..data/a.md").Code).To(Equal(http.StatusNotFound))
	g.Expect(do(s, http.MethodGet, "/..2026_11_22_02_00_00.456/a.md").Code).To(Equal(http.StatusNotFound))
}

func TestDirSourcePlainDirectory(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	write := func(name, text string) {
		g.Expect(os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644)).To(Succeed())
	}
	write("x.md", "x")
	write("empty.md", "")
	write("README", "r")
	src := DirSource{Dir: dir}
	g.Expect(loadPages(g, src)).To(Equal(map[string]string{"x.md": "x", "empty.md": ""}))

	version := func() string {
		v, err := src.Version(context.Background())
		g.Expect(err).NotTo(HaveOccurred())
		return v
	}
	v1 := version()
	g.Expect(version()).To(Equal(v1), "nothing changed")
	write("README", "a file that is never served")
	g.Expect(version()).To(Equal(v1), "a file that is never served is not content")
	write("x.md", "longer")
	v2 := version()
	g.Expect(v2).NotTo(Equal(v1))
	write("logo.png", "\x89PNG\r\n\x1a\n")
	g.Expect(version()).NotTo(Equal(v2), "assets are content")
}

func TestDirSourceEmptyAndMissing(t *testing.T) {
	g := NewWithT(t)
	g.Expect(loadPages(g, DirSource{Dir: t.TempDir()})).To(BeEmpty())

	missing := DirSource{Dir: filepath.Join(t.TempDir(), "missing")}
	_, err := missing.Load(context.Background())
	g.Expect(err).To(MatchError(os.ErrNotExist))
	_, err = missing.Version(context.Background())
	g.Expect(err).To(MatchError(os.ErrNotExist))
}

func TestMemorySource(t *testing.T) {
	g := NewWithT(t)
	var m MemorySource
	_, err := m.Load(context.Background())
	g.Expect(err).To(HaveOccurred(), "no files before the first Set")
	_, err = m.Version(context.Background())
	g.Expect(err).To(HaveOccurred(), "no version before the first Set")

	m.Set(map[string]string{"a.md": "A"}, nil)
	g.Expect(loadPages(g, &m)).To(Equal(map[string]string{"a.md": "A"}))
	v1, _ := m.Version(context.Background())

	m.Set(map[string]string{"b.md": "B"}, map[string][]byte{"b.png": []byte("png")})
	g.Expect(loadPages(g, &m)).To(Equal(map[string]string{"b.md": "B"}))
	snap, _ := m.Load(context.Background())
	g.Expect(snap.Assets).To(Equal(map[string][]byte{"b.png": []byte("png")}))
	g.Expect(snap.Version).NotTo(Equal(v1))

	// Every Set is a new version, even with the same files: the cache
	// cannot know they are the same without comparing them.
	m.Set(map[string]string{"b.md": "B"}, nil)
	again, _ := m.Load(context.Background())
	g.Expect(again.Version).NotTo(Equal(snap.Version))

	m.Set(nil, nil)
	g.Expect(loadPages(g, &m)).To(BeEmpty())
}

func TestIsMarkdownName(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"a.md", true},
		{"README.md", true},
		{"SUMMARY.md", true},
		{"my page.md", true},
		{"notes.v2.md", true},
		{"a..md", true},
		{"-.md", true},
		{"ünïcode.md", true},
		{"", false},
		{".md", false},
		{"md", false},
		{"a.MD", false},
		{"a.Md", false},
		{"a.markdown", false},
		{"a.md.txt", false},
		{"a.md/", false},
		{"a.mdx", false},
		{".hidden.md", false},
		{"..data", false},
		{"..2026_11_22_01_00_00.123", false},
		{"../a.md", false},
		{"./a.md", false},
		{"a/b.md", false},
		{"/a.md", false},
		{`a\b.md`, false},
		{`..\a.md`, false},
		{"dir/", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(IsMarkdownName(tt.name)).To(Equal(tt.want))
		})
	}
}
