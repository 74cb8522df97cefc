package main

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/partial"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// pushCommand pushes the image (or image index) of an OCI archive `images image` wrote to a
// registry, with the credentials `docker login` (or a credential helper)
// left in the Docker config, as crane and ko find them; no engine runs.
func pushCommand(args []string) error {
	fs := flag.NewFlagSet("push", flag.ContinueOnError)
	archivePath := fs.String("archive", "", "the OCI archive, e.g. dist/trellis-manager.tar")
	ref := fs.String("ref", "", "where to push it, e.g. ghcr.io/trellis-dev/trellis-manager:v0.1.0 (default: the name the archive gives it)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *archivePath == "" || fs.NArg() != 0 {
		return fmt.Errorf("usage: images push -archive FILE [-ref REGISTRY/REPOSITORY:TAG]")
	}
	data, err := os.ReadFile(*archivePath)
	if err != nil {
		return err
	}
	a, named, err := readOCIArchive(data)
	if err != nil {
		return fmt.Errorf("%s: %w", *archivePath, err)
	}
	if *ref == "" {
		*ref = named
	}
	tag, err := name.NewTag(*ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("-ref: %w", err)
	}
	digest, err := push(context.Background(), a, tag, remote.WithAuthFromKeychain(authn.DefaultKeychain))
	if err != nil {
		return err
	}
	fmt.Printf("%s@%s\n", tag, digest)
	return nil
}

// push writes a (an image, or an index with its images) to tag and checks
// that the registry then serves the same manifest under it; it returns a's
// digest.
func push(ctx context.Context, a artifact, tag name.Tag, opts ...remote.Option) (v1.Hash, error) {
	opts = append(opts, remote.WithContext(ctx))
	digest, err := a.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	switch a := a.(type) {
	case v1.ImageIndex:
		err = remote.WriteIndex(tag, a, opts...)
	case v1.Image:
		err = remote.Write(tag, a, opts...)
	default:
		err = fmt.Errorf("%T is neither an image nor an index", a)
	}
	if err != nil {
		return v1.Hash{}, fmt.Errorf("pushing %s: %w", tag, err)
	}
	desc, err := remote.Head(tag, opts...)
	if err != nil {
		return v1.Hash{}, fmt.Errorf("reading back %s: %w", tag, err)
	}
	if desc.Digest != digest {
		return v1.Hash{}, fmt.Errorf("%s is %s after the push, want %s", tag, desc.Digest, digest)
	}
	return digest, nil
}

// readOCIArchive reads what an OCI archive holds (a tar of an OCI image
// layout naming one image or one image index, as writeOCIArchive writes it)
// and the name its index gives it. Every blob read is checked against its
// digest.
func readOCIArchive(data []byte) (artifact, string, error) {
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(data))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, "", err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, "", err
		}
		files[h.Name] = b
	}
	var index v1.IndexManifest
	raw, ok := files["index.json"]
	if !ok {
		return nil, "", fmt.Errorf("no index.json: not an OCI archive")
	}
	if err := json.Unmarshal(raw, &index); err != nil {
		return nil, "", fmt.Errorf("index.json: %w", err)
	}
	if len(index.Manifests) != 1 {
		return nil, "", fmt.Errorf("index.json lists %d images, want 1", len(index.Manifests))
	}
	desc := index.Manifests[0]
	blobs := archiveBlobs(files)
	var a artifact
	var err error
	switch {
	case desc.MediaType.IsIndex():
		a, err = blobs.index(desc.Digest, desc.MediaType)
	case desc.MediaType.IsImage():
		a, err = blobs.image(desc.Digest, desc.MediaType)
	default:
		err = fmt.Errorf("index.json names a %s, want an image or an index", desc.MediaType)
	}
	if err != nil {
		return nil, "", err
	}
	return a, desc.Annotations["io.containerd.image.name"], nil
}

// archiveBlobs are the files of an OCI archive read into memory, by name.
type archiveBlobs map[string][]byte

// blob is the blob of digest h, checked against it.
func (b archiveBlobs) blob(h v1.Hash) ([]byte, error) {
	data, ok := b[blobPath(h)[1:]]
	if !ok {
		return nil, fmt.Errorf("blob %s is missing", h)
	}
	if sum := sha256.Sum256(data); h.Algorithm != "sha256" || hex.EncodeToString(sum[:]) != h.Hex {
		return nil, fmt.Errorf("blob %s does not match its digest", h)
	}
	return data, nil
}

func (b archiveBlobs) image(h v1.Hash, mediaType types.MediaType) (v1.Image, error) {
	a := &archiveImage{blobs: b, mediaType: mediaType}
	var err error
	if a.manifest, err = b.blob(h); err != nil {
		return nil, err
	}
	if a.parsed, err = v1.ParseManifest(bytes.NewReader(a.manifest)); err != nil {
		return nil, err
	}
	return partial.CompressedToImage(a)
}

func (b archiveBlobs) index(h v1.Hash, mediaType types.MediaType) (v1.ImageIndex, error) {
	a := &archiveIndex{blobs: b, mediaType: mediaType, digest: h}
	var err error
	if a.manifest, err = b.blob(h); err != nil {
		return nil, err
	}
	if a.parsed, err = v1.ParseIndexManifest(bytes.NewReader(a.manifest)); err != nil {
		return nil, err
	}
	return a, nil
}

// archiveIndex is an image index in an OCI archive read into memory, each
// of its manifests an image in the same archive.
type archiveIndex struct {
	blobs     archiveBlobs
	mediaType types.MediaType
	digest    v1.Hash
	manifest  []byte
	parsed    *v1.IndexManifest
}

func (a *archiveIndex) MediaType() (types.MediaType, error)       { return a.mediaType, nil }
func (a *archiveIndex) Digest() (v1.Hash, error)                  { return a.digest, nil }
func (a *archiveIndex) Size() (int64, error)                      { return int64(len(a.manifest)), nil }
func (a *archiveIndex) IndexManifest() (*v1.IndexManifest, error) { return a.parsed.DeepCopy(), nil }
func (a *archiveIndex) RawManifest() ([]byte, error)              { return a.manifest, nil }

func (a *archiveIndex) Image(h v1.Hash) (v1.Image, error) {
	for _, m := range a.parsed.Manifests {
		if m.Digest == h && m.MediaType.IsImage() {
			return a.blobs.image(h, m.MediaType)
		}
	}
	return nil, fmt.Errorf("the index has no image %s", h)
}

func (a *archiveIndex) ImageIndex(h v1.Hash) (v1.ImageIndex, error) {
	return nil, fmt.Errorf("the index names index %s: Trellis archives hold images only", h)
}

// archiveImage is an image in an OCI archive read into memory, as
// go-containerregistry's partial package wants one.
type archiveImage struct {
	blobs     archiveBlobs
	mediaType types.MediaType
	manifest  []byte
	parsed    *v1.Manifest
}

func (a *archiveImage) RawManifest() ([]byte, error)        { return a.manifest, nil }
func (a *archiveImage) MediaType() (types.MediaType, error) { return a.mediaType, nil }
func (a *archiveImage) RawConfigFile() ([]byte, error)      { return a.blobs.blob(a.parsed.Config.Digest) }

func (a *archiveImage) LayerByDigest(h v1.Hash) (partial.CompressedLayer, error) {
	for _, l := range a.parsed.Layers {
		if l.Digest == h {
			data, err := a.blobs.blob(h)
			if err != nil {
				return nil, err
			}
			return static.NewLayer(data, l.MediaType), nil
		}
	}
	return nil, fmt.Errorf("the manifest has no layer %s", h)
}
