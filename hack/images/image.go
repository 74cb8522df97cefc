package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The user every Trellis image runs as: distroless' "nonroot", which the
// MarkdownView controller also sets as the viewer pods' runAsUser.
const (
	nonRootUID = 65532
	user       = "65532:65532"
)

// epoch is the time stamp of every file, of the image and of its history:
// nothing in an image depends on when it was built.
var epoch = time.Unix(0, 0).UTC()

// file is one entry of the image's only layer.
type file struct {
	name string // absolute path in the image
	mode int64  // permission bits
	dir  bool
	data []byte
}

// baseFiles are the files every Trellis image has besides its binary: the
// user database naming the non-root user, and the CA certificates the
// manager needs to reach an S3 endpoint over HTTPS. The certificates come
// from the pinned golang.org/x/crypto/x509roots/fallback module (Mozilla's
// roots), so the same source gives the same file on any machine.
func baseFiles() []file {
	return []file{
		{name: "/etc", mode: 0o755, dir: true},
		{name: "/etc/passwd", mode: 0o644, data: []byte(
			"root:x:0:0:root:/root:/sbin/nologin\n" +
				"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
				fmt.Sprintf("nonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nonRootUID, nonRootUID))},
		{name: "/etc/group", mode: 0o644, data: []byte(
			"root:x:0:\n" +
				"nobody:x:65534:\n" +
				fmt.Sprintf("nonroot:x:%d:\n", nonRootUID))},
		{name: "/etc/ssl", mode: 0o755, dir: true},
		{name: "/etc/ssl/certs", mode: 0o755, dir: true},
		{name: "/etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: caCertificates()},
	}
}

// caCertificates is the PEM bundle of the roots that carry no extra
// constraint (a constrained root, e.g. one distrusted after a date, cannot be
// expressed in a PEM file, so it is left out rather than trusted fully).
func caCertificates() []byte {
	var b bytes.Buffer
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			continue
		}
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate})
	}
	return b.Bytes()
}

// imageFiles are the base files plus the binary as the entrypoint.
func imageFiles(binary []byte, entrypoint string) []file {
	return append(baseFiles(), file{name: entrypoint, mode: 0o755, data: binary})
}

// layerTar writes files as a tar stream that depends on nothing but their
// names, modes and contents: sorted, owned by root, time stamps at the epoch.
func layerTar(w io.Writer, files []file) error {
	files = append([]file(nil), files...)
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	tw := tar.NewWriter(w)
	for _, f := range files {
		h := &tar.Header{
			Name:    strings.TrimPrefix(f.name, "/"),
			Mode:    f.mode,
			ModTime: epoch,
			Format:  tar.FormatPAX,
		}
		if f.dir {
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(f.data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// spec is what distinguishes one Trellis image from another.
type spec struct {
	platform   v1.Platform // e.g. linux/amd64; the binary is built for it
	binary     []byte      // the static executable
	entrypoint string      // where it goes, e.g. /manager
	labels     map[string]string
}

// build returns the OCI image of s for its platform: one layer, the
// non-root user, the entrypoint and the labels.
func build(s spec) (v1.Image, error) {
	var layer bytes.Buffer
	if err := layerTar(&layer, imageFiles(s.binary, s.entrypoint)); err != nil {
		return nil, err
	}
	raw := layer.Bytes()
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: l, History: v1.History{
		Created:   v1.Time{Time: epoch},
		CreatedBy: "trellis hack/images: " + s.entrypoint + " and its base files",
	}})
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture, cfg.Variant = s.platform.OS, s.platform.Architecture, s.platform.Variant
	cfg.Created = v1.Time{Time: epoch}
	cfg.Config.Entrypoint = []string{s.entrypoint}
	cfg.Config.User = user
	cfg.Config.WorkingDir = "/"
	cfg.Config.Labels = s.labels
	return mutate.ConfigFile(img, cfg)
}

// buildAll returns the image of each spec: the image itself when there is
// one, else an OCI image index of them, one manifest per platform, in the
// order given (a multi-platform image: the runtime picks its own).
func buildAll(specs []spec) (artifact, error) {
	if len(specs) == 0 {
		return nil, fmt.Errorf("no platform to build for")
	}
	if len(specs) == 1 {
		return build(specs[0])
	}
	adds := make([]mutate.IndexAddendum, 0, len(specs))
	seen := map[string]bool{}
	for _, s := range specs {
		p := s.platform.String()
		if seen[p] {
			return nil, fmt.Errorf("platform %s given twice", p)
		}
		seen[p] = true
		img, err := build(s)
		if err != nil {
			return nil, err
		}
		platform := s.platform
		adds = append(adds, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &platform}})
	}
	return mutate.AppendManifests(mutate.IndexMediaType(empty.Index, types.OCIImageIndex), adds...), nil
}

// artifact is what an archive holds and a push sends: a v1.Image or a
// v1.ImageIndex.
type artifact interface {
	MediaType() (types.MediaType, error)
	Digest() (v1.Hash, error)
	RawManifest() ([]byte, error)
}

// writeOCIArchive writes a (an image, or an index of images) as a tar of an
// OCI image layout (what `ctr images import`, `crane push` and `docker load`
// read), its index naming a's ref so that containerd imports it under that
// name.
func writeOCIArchive(w io.Writer, a artifact, ref string) (v1.Hash, error) {
	manifest, err := a.RawManifest()
	if err != nil {
		return v1.Hash{}, err
	}
	digest, err := a.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	mediaType, err := a.MediaType()
	if err != nil {
		return v1.Hash{}, err
	}
	desc := v1.Descriptor{
		MediaType: mediaType,
		Size:      int64(len(manifest)),
		Digest:    digest,
		Annotations: map[string]string{
			"io.containerd.image.name":          ref,
			"org.opencontainers.image.ref.name": ref[strings.LastIndex(ref, ":")+1:],
		},
	}
	blobs := map[v1.Hash][]byte{}
	switch a := a.(type) {
	case v1.ImageIndex:
		blobs[digest] = manifest
		im, err := a.IndexManifest()
		if err != nil {
			return v1.Hash{}, err
		}
		for _, m := range im.Manifests {
			img, err := a.Image(m.Digest)
			if err != nil {
				return v1.Hash{}, err
			}
			if err := imageBlobs(img, blobs); err != nil {
				return v1.Hash{}, err
			}
		}
	case v1.Image:
		cfg, err := a.ConfigFile()
		if err != nil {
			return v1.Hash{}, err
		}
		desc.Platform = cfg.Platform()
		if err := imageBlobs(a, blobs); err != nil {
			return v1.Hash{}, err
		}
	default:
		return v1.Hash{}, fmt.Errorf("%T is neither an image nor an index", a)
	}
	index, err := json.Marshal(v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests:     []v1.Descriptor{desc},
	})
	if err != nil {
		return v1.Hash{}, err
	}
	files := []file{
		{name: "/blobs", mode: 0o755, dir: true},
		{name: "/blobs/sha256", mode: 0o755, dir: true},
		{name: "/oci-layout", mode: 0o644, data: []byte(`{"imageLayoutVersion":"1.0.0"}`)},
		{name: "/index.json", mode: 0o644, data: index},
	}
	for h, data := range blobs {
		files = append(files, file{name: blobPath(h), mode: 0o644, data: data})
	}
	return digest, layerTar(w, files)
}

// imageBlobs adds img's manifest, config and layers to blobs, by digest.
func imageBlobs(img v1.Image, blobs map[v1.Hash][]byte) error {
	manifest, err := img.RawManifest()
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	config, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	configDigest, err := img.ConfigName()
	if err != nil {
		return err
	}
	blobs[digest], blobs[configDigest] = manifest, config
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		data, err := io.ReadAll(rc)
		_ = rc.Close()
		if err != nil {
			return err
		}
		blobs[d] = data
	}
	return nil
}

func blobPath(h v1.Hash) string { return path.Join("/blobs", h.Algorithm, h.Hex) }

// writeRootFS writes the base files under dir, for the Dockerfile to copy
// into a scratch image: both ways of building give the same files.
func writeRootFS(dir string) error {
	for _, f := range baseFiles() {
		p := filepath.Join(dir, filepath.FromSlash(f.name))
		if f.dir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			if err := os.Chmod(p, os.FileMode(f.mode)); err != nil {
				return err
			}
			continue
		}
		if err := os.WriteFile(p, f.data, os.FileMode(f.mode)); err != nil {
			return err
		}
		if err := os.Chmod(p, os.FileMode(f.mode)); err != nil {
			return err
		}
	}
	return nil
}
