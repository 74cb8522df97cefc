package viewer

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"
)

// Limits bound what an artifact may cost a viewer. Each is checked while
// the bytes stream, before anything is kept past it.
type Limits struct {
	// Download is the most bytes of the artifact (the gzipped tarball)
	// fetched.
	Download int64
	// Entries is the most tar entries read, of any kind.
	Entries int
	// Unpacked is the most bytes read out of the tarball in all, served or
	// not, so a small archive cannot make the viewer inflate gigabytes.
	Unpacked int64
	// Site is the most bytes of pages and images kept in memory, their
	// names counted with them.
	Site int64
}

// DefaultLimits are the viewer's limits unless its flags say otherwise
// (docs/markdownview.md).
var DefaultLimits = Limits{Download: 32 << 20, Entries: 20000, Unpacked: 128 << 20, Site: 16 << 20}

// Errors of an unpack, each wrapped with the entry that caused it.
var (
	ErrTooLarge    = errors.New("artifact over the viewer's limits")
	ErrUnsafePath  = errors.New("artifact entry with an unsafe path")
	ErrDigest      = errors.New("artifact digest does not match")
	errEntryFormat = errors.New("artifact entry of an unknown kind")
)

// IsPagePath reports whether name can be a page of a site with folders:
// plain names (not hidden, no backslash) separated by single slashes,
// ending in .md.
func IsPagePath(name string) bool {
	return strings.HasSuffix(name, ".md") && isPlainPath(name) && !strings.HasSuffix(name, "/.md")
}

// isPlainPath reports whether every segment of name is a plain name.
func isPlainPath(name string) bool {
	if name == "" {
		return false
	}
	for _, seg := range strings.Split(name, "/") {
		if !isPlainName(seg) {
			return false
		}
	}
	return true
}

// assetTypeOf is AssetType for a site with folders: the last segment decides
// the type, and every folder above it must be plain too.
func assetTypeOf(name string) string {
	dir, file := path.Split(name)
	if dir != "" && !isPlainPath(strings.TrimSuffix(dir, "/")) {
		return ""
	}
	return AssetType(file)
}

// unpack reads a gzipped tarball and keeps the pages and images under dir
// (a folder of the artifact, "" for all of it), named relative to dir.
// Entries with ".." or absolute names fail the whole artifact: a tool that
// writes them is not to be trusted with the rest. Symbolic and hard links
// are never followed nor served, nor is any file that is neither Markdown
// nor an image; hidden files and folders (.git, .github) are skipped.
func unpack(r io.Reader, dir string, lim Limits) (*Snapshot, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("reading the artifact: %w", err)
	}
	defer func() { _ = zr.Close() }()
	unpacked := &countingReader{r: zr, left: lim.Unpacked}
	tr := tar.NewReader(unpacked)
	snap := &Snapshot{Tree: true, Pages: map[string]string{}, Assets: map[string][]byte{}}
	var kept int64
	prefix := ""
	if dir != "" {
		prefix = strings.Trim(dir, "/") + "/"
	}
	for entries := 0; ; entries++ {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return snap, nil
		}
		if err != nil {
			if unpacked.over {
				return nil, fmt.Errorf("%w: more than %d bytes unpacked", ErrTooLarge, lim.Unpacked)
			}
			return nil, fmt.Errorf("reading the artifact: %w", err)
		}
		if entries >= lim.Entries {
			return nil, fmt.Errorf("%w: more than %d entries", ErrTooLarge, lim.Entries)
		}
		name, err := entryName(hdr.Name)
		if err != nil {
			return nil, err
		}
		switch hdr.Typeflag {
		case tar.TypeReg:
		case tar.TypeDir, tar.TypeSymlink, tar.TypeLink, tar.TypeXGlobalHeader:
			continue // links are neither followed nor served
		default:
			return nil, fmt.Errorf("%w: %q", errEntryFormat, hdr.Name)
		}
		if !strings.HasPrefix(name, prefix) {
			continue
		}
		name = strings.TrimPrefix(name, prefix)
		page := IsPagePath(name)
		if !page && assetTypeOf(name) == "" {
			continue
		}
		// A name is kept with its file: counted, so that many empty files
		// with long names (PAX allows a megabyte each) stay within Site.
		if hdr.Size < 0 || kept+int64(len(name))+hdr.Size > lim.Site {
			return nil, fmt.Errorf("%w: pages and images over %d bytes (at %q)", ErrTooLarge, lim.Site, name)
		}
		b, err := io.ReadAll(io.LimitReader(tr, hdr.Size))
		if err != nil {
			if unpacked.over {
				return nil, fmt.Errorf("%w: more than %d bytes unpacked", ErrTooLarge, lim.Unpacked)
			}
			return nil, fmt.Errorf("reading %q: %w", name, err)
		}
		kept += int64(len(name)) + int64(len(b))
		if page {
			snap.Pages[name] = string(b)
		} else {
			snap.Assets[name] = b
		}
	}
}

// entryName cleans a tar entry's name ("./docs/a.md" is "docs/a.md") and
// refuses one that is absolute or climbs out with "..".
func entryName(raw string) (string, error) {
	name := strings.TrimPrefix(raw, "./")
	if strings.HasPrefix(name, "/") || strings.Contains(name, `\`) {
		return "", fmt.Errorf("%w: %q", ErrUnsafePath, raw)
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == ".." {
			return "", fmt.Errorf("%w: %q", ErrUnsafePath, raw)
		}
	}
	return strings.TrimSuffix(path.Clean("/" + name)[1:], "/"), nil
}

// countingReader fails once more than left bytes were read through it.
type countingReader struct {
	r    io.Reader
	left int64
	over bool
}

func (c *countingReader) Read(p []byte) (int, error) {
	if c.left <= 0 {
		c.over = true
		return 0, ErrTooLarge
	}
	if int64(len(p)) > c.left {
		p = p[:c.left+1] // one byte more tells "exactly the limit" from "over"
	}
	n, err := c.r.Read(p)
	c.left -= int64(n)
	if c.left < 0 {
		c.over = true
		return n, ErrTooLarge
	}
	return n, err
}
