package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// The archives `make release` writes, by what they hold.
const (
	managerArchive = "trellis-manager.tar"
	viewerArchive  = "trellis-viewer.tar"
)

// reference is an image reference pinned by digest:
// ghcr.io/trellis-dev/trellis-manager:v0.1.0@sha256:….
type reference struct {
	repository string // ghcr.io/trellis-dev/trellis-manager
	tag        string // v0.1.0
	digest     string // sha256:… (64 hex digits)
}

func (r reference) String() string { return r.repository + ":" + r.tag + "@" + r.digest }

// named is the reference without its digest: the name an archive gives its image.
func (r reference) named() string { return r.repository + ":" + r.tag }

var digestPattern = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// parseReference reads REPOSITORY:TAG@sha256:HEX; a reference without a tag
// or a digest is no release's.
func parseReference(s string) (reference, error) {
	name, digest, ok := strings.Cut(s, "@")
	if !ok || !digestPattern.MatchString(digest) {
		return reference{}, fmt.Errorf("image %q is not pinned by a sha256 digest", s)
	}
	i := strings.LastIndexByte(name, ':')
	if i < 0 || i < strings.LastIndexByte(name, '/') || i == len(name)-1 || i == 0 {
		return reference{}, fmt.Errorf("image %q has no tag", s)
	}
	return reference{repository: name[:i], tag: name[i+1:], digest: digest}, nil
}

// image is one line of images.txt: an archive in dist/ and the reference
// its image is published under.
type image struct {
	archive string
	ref     reference
}

// readImages reads images.txt: "ARCHIVE REFERENCE@DIGEST" per line, the
// form `hack/images image` prints, with the archive's directory taken off.
func readImages(path string) ([]image, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return parseImages(data)
}

func parseImages(data []byte) ([]image, error) {
	var images []image
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		fields := strings.Fields(sc.Text())
		if len(fields) != 2 || strings.ContainsRune(fields[0], '/') {
			return nil, fmt.Errorf("images.txt line %d: want ARCHIVE REFERENCE@DIGEST, got %q", n, sc.Text())
		}
		ref, err := parseReference(fields[1])
		if err != nil {
			return nil, fmt.Errorf("images.txt line %d: %w", n, err)
		}
		if seen[fields[0]] {
			return nil, fmt.Errorf("images.txt line %d: %s listed twice", n, fields[0])
		}
		seen[fields[0]] = true
		images = append(images, image{archive: fields[0], ref: ref})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if !seen[managerArchive] || !seen[viewerArchive] {
		return nil, fmt.Errorf("images.txt names %d images; want %s and %s", len(images), managerArchive, viewerArchive)
	}
	return images, nil
}

func find(images []image, archive string) reference {
	for _, i := range images {
		if i.archive == archive {
			return i.ref
		}
	}
	return reference{}
}
