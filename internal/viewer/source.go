package viewer

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
)

// Snapshot is one version of a site's files.
type Snapshot struct {
	// Version names the content: two snapshots of one Source with the same
	// Version hold the same files.
	Version string
	// Pages holds Markdown text by file name ("intro.md").
	Pages map[string]string
	// Assets holds other files by file name ("logo.png"). Which of them are
	// served, and as what, is decided by AssetType.
	Assets map[string][]byte
	// Tree is set when names may hold folders ("guide/setup.md"): a site
	// from an artifact. A flat source's names never do.
	Tree bool
	// Revision, when set, is shown in the footer of every page.
	Revision string
}

// Source yields the site's files.
type Source interface {
	// Version returns the version of the current content cheaply, without
	// reading the files, so a request can tell whether what it has cached
	// is still current.
	Version(ctx context.Context) (string, error)
	// Load reads the current content.
	Load(ctx context.Context) (*Snapshot, error)
}

// IsMarkdownName reports whether name can be a page: a plain file name (no
// directory, not hidden) ending in .md. Only such names are ever served.
func IsMarkdownName(name string) bool {
	return strings.HasSuffix(name, ".md") && len(name) > len(".md") && isPlainName(name)
}

// isPlainName reports whether name is a file name with no directory part
// that is not hidden (ConfigMap volumes keep their bookkeeping in ".." names).
func isPlainName(name string) bool {
	return name != "" && !strings.HasPrefix(name, ".") && !strings.ContainsAny(name, `/\`)
}

// DirSource reads a directory: a mounted ConfigMap, or any directory of files.
//
// In a ConfigMap volume the kubelet writes each version of the data into a new
// hidden directory and swaps the "..data" symlink to it atomically; the name
// of that directory is the version, and the files are read from it, so a
// Snapshot never mixes two versions. A plain directory (no "..data") is
// versioned by the names, sizes and modification times of its files.
type DirSource struct{ Dir string }

// configMapDataLink is the symlink the kubelet swaps to publish a new version.
const configMapDataLink = "..data"

// Version implements Source.
func (d DirSource) Version(context.Context) (string, error) {
	if target, ok := d.dataDir(); ok {
		return "configmap:" + target, nil
	}
	return d.plainVersion()
}

// Load implements Source.
func (d DirSource) Load(context.Context) (*Snapshot, error) {
	// The kubelet removes the previous version's directory right after the
	// swap, so a read that races it fails; the next attempt reads the new one.
	for attempt := 0; ; attempt++ {
		target, ok := d.dataDir()
		if !ok {
			break
		}
		snap, err := readFiles(filepath.Join(d.Dir, target), true)
		if err == nil {
			snap.Version = "configmap:" + target
			return snap, nil
		}
		if !errors.Is(err, fs.ErrNotExist) || attempt == 2 {
			return nil, err
		}
	}
	version, err := d.plainVersion()
	if err != nil {
		return nil, err
	}
	snap, err := readFiles(d.Dir, false)
	if err != nil {
		return nil, err
	}
	// Stamped before reading: a file changed meanwhile makes the next
	// Version differ, so it is read again then.
	snap.Version = version
	return snap, nil
}

// dataDir returns the directory "..data" points to, when it is one the
// kubelet made: a hidden plain name inside Dir.
func (d DirSource) dataDir() (string, bool) {
	target, err := os.Readlink(filepath.Join(d.Dir, configMapDataLink))
	if err != nil || !strings.HasPrefix(target, "..") || target == ".." || strings.ContainsAny(target, `/\`) {
		return "", false
	}
	return target, true
}

// plainVersion hashes the names, sizes and modification times of the files
// that could be served.
func (d DirSource) plainVersion() (string, error) {
	entries, err := os.ReadDir(d.Dir)
	if err != nil {
		return "", err
	}
	h := fnv.New64a()
	for _, e := range entries { // sorted by name
		name := e.Name()
		if !IsMarkdownName(name) && AssetType(name) == "" {
			continue
		}
		st, err := os.Stat(filepath.Join(d.Dir, name)) // name comes from ReadDir, never from a request
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		_, _ = fmt.Fprintf(h, "%s\x00%d\x00%d\x00", name, st.Size(), st.ModTime().UnixNano())
	}
	return "dir:" + strconv.FormatUint(h.Sum64(), 16), nil
}

// readFiles reads the pages and assets of dir: regular files (after
// following symlinks) whose names can be served. Names come from ReadDir,
// never from a request. A file that vanishes while being read is skipped,
// unless whole is set: then the directory is going away and the read fails.
func readFiles(dir string, whole bool) (*Snapshot, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	snap := &Snapshot{Pages: map[string]string{}, Assets: map[string][]byte{}}
	for _, e := range entries {
		name := e.Name()
		page := IsMarkdownName(name)
		if !page && AssetType(name) == "" {
			continue // ConfigMap volumes also hold ..data and timestamped directories
		}
		path := filepath.Join(dir, name)
		st, err := os.Stat(path)
		if err == nil && !st.Mode().IsRegular() {
			continue // a directory
		}
		var b []byte
		if err == nil {
			b, err = os.ReadFile(path)
		}
		if errors.Is(err, fs.ErrNotExist) && !whole {
			continue // a dangling link, or removed since ReadDir
		}
		if err != nil {
			return nil, err
		}
		if page {
			snap.Pages[name] = string(b)
		} else {
			snap.Assets[name] = b
		}
	}
	return snap, nil
}

// MemorySource holds files set by someone else, e.g. a watch on a MarkdownView.
type MemorySource struct {
	snap atomic.Pointer[Snapshot]
	seq  atomic.Uint64
}

// Set replaces the files: Markdown pages and assets by file name. Neither
// map may be changed afterwards.
func (m *MemorySource) Set(pages map[string]string, assets map[string][]byte) {
	if pages == nil {
		pages = map[string]string{}
	}
	if assets == nil {
		assets = map[string][]byte{}
	}
	m.snap.Store(&Snapshot{Version: "memory:" + strconv.FormatUint(m.seq.Add(1), 10), Pages: pages, Assets: assets})
}

// errNoFilesYet is what a MemorySource answers before its first Set.
var errNoFilesYet = errors.New("no files loaded yet")

// Version implements Source.
func (m *MemorySource) Version(context.Context) (string, error) {
	s := m.snap.Load()
	if s == nil {
		return "", errNoFilesYet
	}
	return s.Version, nil
}

// Load implements Source.
func (m *MemorySource) Load(context.Context) (*Snapshot, error) {
	s := m.snap.Load()
	if s == nil {
		return nil, errNoFilesYet
	}
	return s, nil
}

// sortedNames returns the keys of m in order.
func sortedNames[V any](m map[string]V) []string {
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}
