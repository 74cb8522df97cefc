package viewer

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
)

// Source yields the site's files: name to Markdown text.
type Source interface {
	Files(ctx context.Context) (map[string]string, error)
}

// IsMarkdownName reports whether name can be a page: a plain file name (no
// directory, not hidden) ending in .md. Only such names are ever served.
func IsMarkdownName(name string) bool {
	return strings.HasSuffix(name, ".md") && len(name) > len(".md") &&
		!strings.HasPrefix(name, ".") && !strings.ContainsAny(name, `/\`)
}

// DirSource reads the Markdown files of a directory on every call, so edits to
// a mounted ConfigMap (which the kubelet swaps in atomically) show up at once.
type DirSource struct{ Dir string }

// Files implements Source.
func (d DirSource) Files(context.Context) (map[string]string, error) {
	entries, err := os.ReadDir(d.Dir)
	if err != nil {
		return nil, err
	}
	files := make(map[string]string, len(entries))
	for _, e := range entries {
		name := e.Name()
		if !IsMarkdownName(name) {
			continue // ConfigMap volumes also hold ..data and timestamped directories
		}
		path := filepath.Join(d.Dir, name) // name comes from ReadDir, never from a request
		if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
			continue // a directory, or removed since ReadDir
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		files[name] = string(b)
	}
	return files, nil
}

// MemorySource holds files set by someone else, e.g. a watch on a MarkdownView.
type MemorySource struct {
	files atomic.Pointer[map[string]string]
}

// Set replaces the files.
func (m *MemorySource) Set(files map[string]string) { m.files.Store(&files) }

// Files implements Source.
func (m *MemorySource) Files(context.Context) (map[string]string, error) {
	p := m.files.Load()
	if p == nil {
		return nil, errors.New("no files loaded yet")
	}
	return *p, nil
}
