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

func TestDirSourceConfigMapVolume(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	v := configMapVolume{t: t, dir: t.TempDir()}

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

	files, err := DirSource{Dir: v.dir}.Files(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(Equal(map[string]string{"a.md": "# A one\n", "b.md": "# B one\n"}))

	// An update: a new timestamped directory in which a.md changed and b.md
	// is gone; ..data is swapped by rename. Until the kubelet removes the
	// old b.md symlink, it dangles and must be skipped.
	v.publish("2026_11_22_02_00_00.456", map[string]string{"a.md": "# A two\n"})
	files, err = DirSource{Dir: v.dir}.Files(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(Equal(map[string]string{"a.md": "# A two\n"}))

	g.Expect(os.Remove(filepath.Join(v.dir, "b.md"))).To(Succeed())
	g.Expect(os.RemoveAll(filepath.Join(v.dir, old))).To(Succeed())
	files, err = DirSource{Dir: v.dir}.Files(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(Equal(map[string]string{"a.md": "# A two\n"}))

	// A file added by a later update shows up once its symlink exists.
	v.publish("2026_11_22_03_00_00.789", map[string]string{"a.md": "# A two\n", "c.md": "# C\n"})
	v.symlink("..data/c.md", "c.md")
	files, err = DirSource{Dir: v.dir}.Files(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(Equal(map[string]string{"a.md": "# A two\n", "c.md": "# C\n"}))
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
	g.Expect(os.WriteFile(filepath.Join(dir, "x.md"), []byte("x"), 0o644)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "empty.md"), nil, 0o644)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "README"), []byte("r"), 0o644)).To(Succeed())
	files, err := DirSource{Dir: dir}.Files(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(Equal(map[string]string{"x.md": "x", "empty.md": ""}))
}

func TestDirSourceEmptyAndMissing(t *testing.T) {
	g := NewWithT(t)
	files, err := DirSource{Dir: t.TempDir()}.Files(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(BeEmpty())

	_, err = DirSource{Dir: filepath.Join(t.TempDir(), "missing")}.Files(context.Background())
	g.Expect(err).To(MatchError(os.ErrNotExist))
}

func TestMemorySource(t *testing.T) {
	g := NewWithT(t)
	var m MemorySource
	_, err := m.Files(context.Background())
	g.Expect(err).To(HaveOccurred(), "no files before the first Set")

	m.Set(map[string]string{"a.md": "A"})
	files, err := m.Files(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(Equal(map[string]string{"a.md": "A"}))

	m.Set(map[string]string{"b.md": "B"})
	files, err = m.Files(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(Equal(map[string]string{"b.md": "B"}))

	m.Set(map[string]string{})
	files, err = m.Files(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(BeEmpty())
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
