package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

const (
	checksumsFile = "checksums.txt"
	imagesFile    = "images.txt"
	installFile   = "install.yaml"
	// cosign's signature of checksums.txt (make release COSIGN_KEY=…): the
	// one file checksums.txt cannot list, being written after it.
	checksumsSignature = checksumsFile + ".sigstore.json"
	// install.yaml for clusters that do not serve MutatingAdmissionPolicy
	// (Kubernetes 1.33 to 1.35): config/default-without-mutating-policies.
	installWithoutMutatingFile = "install-without-mutating-policies.yaml"
	versionLabel               = "org.opencontainers.image.version"
	// make release builds the binaries into dist/.bin and removes it once
	// verify has compared them with their SBOMs.
	buildDir = ".bin"
	// The OCI media types verifyArchive tells apart.
	ociIndexType    = "application/vnd.oci.image.index.v1+json"
	ociManifestType = "application/vnd.oci.image.manifest.v1+json"
)

// sbomFile is the name of cmd's SBOM for platform: trellis-manager.linux-arm64.cdx.json.
func sbomFile(cmd, platform string) string {
	return "trellis-" + cmd + "." + strings.ReplaceAll(platform, "/", "-") + ".cdx.json"
}

// verifyDist checks a release directory as a user would, and more:
// checksums.txt lists every other file with its sha256, but for its
// signature, which must sign this checksums.txt; each archive holds
// the image index images.txt pins, one image per platform, each labelled
// with the release's version, every blob matching its digest; each image has
// an SBOM per platform, of the module graph its binary was built from (the
// same modules the binary names, when binaries gives the directory they were
// built into); install.yaml names exactly those images, by digest,
// and so do install-without-mutating-policies.yaml, which is install.yaml
// but for the MutatingAdmissionPolicies, and the Helm chart's values.yaml.
func verifyDist(dir string, platforms []string, binaries string) error {
	if err := verifyChecksums(dir); err != nil {
		return err
	}
	if err := verifySignatureDigest(dir); err != nil {
		return fmt.Errorf("%s: %w", checksumsSignature, err)
	}
	images, err := readImages(filepath.Join(dir, imagesFile))
	if err != nil {
		return err
	}
	for _, i := range images {
		if err := verifyArchive(filepath.Join(dir, i.archive), i.ref, platforms); err != nil {
			return fmt.Errorf("%s: %w", i.archive, err)
		}
		cmd := strings.TrimSuffix(strings.TrimPrefix(i.archive, "trellis-"), ".tar")
		for _, p := range platforms {
			name := sbomFile(cmd, p)
			binary := ""
			if binaries != "" {
				binary = filepath.Join(binaries, strings.ReplaceAll(p, "/", "-"), cmd)
			}
			if err := verifySBOM(filepath.Join(dir, name), cmd, p, binary); err != nil {
				return fmt.Errorf("%s: %w", name, err)
			}
		}
	}
	installs := map[string][]byte{}
	for _, name := range []string{installFile, installWithoutMutatingFile} {
		manifests, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if err := verifyInstall(manifests, images); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		installs[name] = manifests
	}
	if err := verifyWithoutMutatingPolicies(installs[installFile], installs[installWithoutMutatingFile]); err != nil {
		return fmt.Errorf("%s: %w", installWithoutMutatingFile, err)
	}
	return verifyChart(dir, images)
}

// mutatingPolicyKinds are what a cluster below Kubernetes 1.36 does not serve.
var mutatingPolicyKinds = map[string]bool{"MutatingAdmissionPolicy": true, "MutatingAdmissionPolicyBinding": true}

// verifyWithoutMutatingPolicies checks that without is full but for its
// MutatingAdmissionPolicies and their bindings: every other object, in the
// same order, byte for byte.
func verifyWithoutMutatingPolicies(full, without []byte) error {
	objects := func(manifests []byte) ([]string, map[string][]byte, error) {
		docs, err := splitDocuments(manifests)
		if err != nil {
			return nil, nil, err
		}
		var names []string
		byName := map[string][]byte{}
		for _, doc := range docs {
			var obj map[string]any
			if err := yaml.Unmarshal(doc, &obj); err != nil {
				return nil, nil, err
			}
			name := objectName(obj)
			names = append(names, name)
			byName[name] = doc
		}
		return names, byName, nil
	}
	fullNames, fullDocs, err := objects(full)
	if err != nil {
		return err
	}
	names, docs, err := objects(without)
	if err != nil {
		return err
	}
	var want []string
	for _, name := range fullNames {
		if kind, _, _ := strings.Cut(name, " "); !mutatingPolicyKinds[kind] {
			want = append(want, name)
		}
	}
	for _, name := range names {
		if kind, _, _ := strings.Cut(name, " "); mutatingPolicyKinds[kind] {
			return fmt.Errorf("holds %s, which clusters below Kubernetes 1.36 do not serve", name)
		}
	}
	if strings.Join(names, "\n") != strings.Join(want, "\n") {
		return fmt.Errorf("holds\n  %s\nwant %s's objects but its MutatingAdmissionPolicies\n  %s",
			strings.Join(names, "\n  "), installFile, strings.Join(want, "\n  "))
	}
	for _, name := range names {
		if !bytes.Equal(docs[name], fullDocs[name]) {
			return fmt.Errorf("%s differs from %s's", name, installFile)
		}
	}
	return nil
}

var checksumLine = regexp.MustCompile(`^([0-9a-f]{64})  ([^/]+)$`)

// verifyChecksums checks checksums.txt (sha256sum's format, sorted by name)
// against every other file in dir, and that dir holds nothing else.
func verifyChecksums(dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, checksumsFile))
	if err != nil {
		return err
	}
	listed := map[string]string{}
	var names []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		m := checksumLine.FindStringSubmatch(sc.Text())
		if m == nil {
			return fmt.Errorf("%s line %d: want SHA256  NAME, got %q", checksumsFile, n, sc.Text())
		}
		if _, dup := listed[m[2]]; dup {
			return fmt.Errorf("%s line %d: %s listed twice", checksumsFile, n, m[2])
		}
		listed[m[2]] = m[1]
		names = append(names, m[2])
	}
	if err := sc.Err(); err != nil {
		return err
	}
	if !sort.StringsAreSorted(names) {
		return fmt.Errorf("%s is not sorted by name", checksumsFile)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var problems error // errors.Join of every problem found
	for _, e := range entries {
		if e.Name() == checksumsFile || e.Name() == checksumsSignature || e.Name() == buildDir {
			continue
		}
		if !e.Type().IsRegular() {
			problems = errors.Join(problems, fmt.Errorf("%s is not a regular file", e.Name()))
			continue
		}
		want, ok := listed[e.Name()]
		if !ok {
			problems = errors.Join(problems, fmt.Errorf("%s is not in %s", e.Name(), checksumsFile))
			continue
		}
		delete(listed, e.Name())
		got, err := fileSHA256(filepath.Join(dir, e.Name()))
		if err != nil {
			return err
		}
		if got != want {
			problems = errors.Join(problems, fmt.Errorf("%s: sha256 %s, %s says %s", e.Name(), got, checksumsFile, want))
		}
	}
	for _, name := range names {
		if _, missing := listed[name]; missing {
			problems = errors.Join(problems, fmt.Errorf("%s lists %s, which is missing", checksumsFile, name))
		}
	}
	return problems
}

// verifySignatureDigest checks that checksums.txt's signature, when the
// release has one, is of this checksums.txt: its sigstore bundle names the
// file's sha256. Whether the signature is good, and whose, is for `cosign
// verify-blob` with the release's public key (make test runs it).
func verifySignatureDigest(dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, checksumsSignature))
	if errors.Is(err, os.ErrNotExist) {
		return nil // an unsigned release
	}
	if err != nil {
		return err
	}
	var bundle struct {
		MediaType        string `json:"mediaType"`
		MessageSignature struct {
			MessageDigest struct {
				Algorithm string `json:"algorithm"`
				Digest    []byte `json:"digest"` // base64, as protobuf's JSON writes bytes
			} `json:"messageDigest"`
		} `json:"messageSignature"`
	}
	if err := json.Unmarshal(data, &bundle); err != nil {
		return err
	}
	d := bundle.MessageSignature.MessageDigest
	if !strings.HasPrefix(bundle.MediaType, "application/vnd.dev.sigstore.bundle") || d.Algorithm != "SHA2_256" {
		return fmt.Errorf("not a sigstore bundle of a SHA2_256 message signature (mediaType %q, algorithm %q)", bundle.MediaType, d.Algorithm)
	}
	want, err := fileSHA256(filepath.Join(dir, checksumsFile))
	if err != nil {
		return err
	}
	if got := hex.EncodeToString(d.Digest); got != want {
		return fmt.Errorf("signs sha256 %s, %s is %s", got, checksumsFile, want)
	}
	return nil
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// ociIndex and ociManifest are the parts of an OCI image layout verifyArchive reads.
type (
	descriptor struct {
		MediaType   string            `json:"mediaType"`
		Digest      string            `json:"digest"`
		Size        int64             `json:"size"`
		Annotations map[string]string `json:"annotations,omitempty"`
		Platform    *platform         `json:"platform,omitempty"`
	}
	platform struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	}
	ociIndex struct {
		Manifests []descriptor `json:"manifests"`
	}
	ociManifest struct {
		Config descriptor   `json:"config"`
		Layers []descriptor `json:"layers"`
	}
	imageConfig struct {
		platform
		Config struct {
			Labels map[string]string `json:"Labels"`
		} `json:"config"`
	}
)

// verifyArchive checks an OCI archive (a tar of an OCI image layout, as
// hack/images writes it): ref's digest, named ref for containerd; an image
// index of one image per platform, in that order (or the image itself, when
// there is one platform), each built for its platform and labelled with
// ref's tag as its version; every blob its digest's.
func verifyArchive(path string, ref reference, platforms []string) error {
	files, err := readTar(path)
	if err != nil {
		return err
	}
	for name, data := range files {
		hexDigest, ok := strings.CutPrefix(name, "blobs/sha256/")
		if !ok {
			continue
		}
		if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != hexDigest {
			return fmt.Errorf("blob %s does not match its digest", name)
		}
	}
	var index ociIndex
	if err := unmarshalFile(files, "index.json", &index); err != nil {
		return err
	}
	if len(index.Manifests) != 1 {
		return fmt.Errorf("index.json lists %d images, want 1", len(index.Manifests))
	}
	m := index.Manifests[0]
	if m.Digest != ref.digest {
		return fmt.Errorf("holds %s, %s says %s", m.Digest, imagesFile, ref.digest)
	}
	if got := m.Annotations["io.containerd.image.name"]; got != ref.named() {
		return fmt.Errorf("names its image %q, want %q", got, ref.named())
	}
	images := []descriptor{m}
	if m.MediaType == ociIndexType {
		var platformIndex ociIndex
		if err := unmarshalFile(files, blobName(m.Digest), &platformIndex); err != nil {
			return err
		}
		images = platformIndex.Manifests
	}
	built := make([]string, 0, len(images))
	for _, d := range images {
		if d.MediaType != ociManifestType || d.Platform == nil {
			return fmt.Errorf("names %s %s without a platform, want an image per platform", d.MediaType, d.Digest)
		}
		p := d.Platform.OS + "/" + d.Platform.Architecture
		built = append(built, p)
		var manifest ociManifest
		if err := unmarshalFile(files, blobName(d.Digest), &manifest); err != nil {
			return err
		}
		for _, l := range manifest.Layers {
			if _, ok := files[blobName(l.Digest)]; !ok {
				return fmt.Errorf("%s: layer %s is missing", p, l.Digest)
			}
		}
		var config imageConfig
		if err := unmarshalFile(files, blobName(manifest.Config.Digest), &config); err != nil {
			return err
		}
		if config.platform != *d.Platform {
			return fmt.Errorf("%s: the image is configured for %s/%s", p, config.OS, config.Architecture)
		}
		if got := config.Config.Labels[versionLabel]; got != ref.tag {
			return fmt.Errorf("%s: label %s=%q, want the release's %q", p, versionLabel, got, ref.tag)
		}
	}
	if !slices.Equal(built, platforms) {
		return fmt.Errorf("holds images for %s, want %s", strings.Join(built, " "), strings.Join(platforms, " "))
	}
	return nil
}

// cycloneDX is the part of a CycloneDX SBOM (as cyclonedx-gomod writes it)
// verifySBOM reads.
type cycloneDX struct {
	BOMFormat string `json:"bomFormat"`
	Metadata  struct {
		Component struct {
			PURL string `json:"purl"`
		} `json:"component"`
	} `json:"metadata"`
	Components []struct {
		Name    string `json:"name"`
		Version string `json:"version"`
		Hashes  []struct {
			Content string `json:"content"`
		} `json:"hashes"`
	} `json:"components"`
}

// verifySBOM checks that path is a CycloneDX SBOM of Trellis' cmd/<cmd> for
// platform, naming each module it lists with a version and a checksum; with
// binary, that those are the modules the binary was linked from (Go records
// them in every binary), no more and no fewer.
func verifySBOM(path, cmd, platform, binary string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var bom cycloneDX
	if err := json.Unmarshal(data, &bom); err != nil {
		return err
	}
	goos, goarch, _ := strings.Cut(platform, "/")
	purl := bom.Metadata.Component.PURL
	if bom.BOMFormat != "CycloneDX" || !strings.HasPrefix(purl, "pkg:golang/github.com/trellis-dev/trellis@") ||
		!strings.HasSuffix(purl, "#cmd/"+cmd) || !strings.Contains(purl, "goarch="+goarch) || !strings.Contains(purl, "goos="+goos) {
		return fmt.Errorf("is not a CycloneDX SBOM of cmd/%s for %s (bomFormat %q, component %q)", cmd, platform, bom.BOMFormat, purl)
	}
	listed := make([]string, 0, len(bom.Components))
	for _, c := range bom.Components {
		if c.Version == "" || len(c.Hashes) == 0 {
			return fmt.Errorf("lists %s without a version or a checksum", c.Name)
		}
		listed = append(listed, c.Name+"@"+c.Version)
	}
	if len(listed) == 0 {
		return fmt.Errorf("lists no module")
	}
	if binary == "" {
		return nil
	}
	info, err := buildinfo.ReadFile(binary)
	if err != nil {
		return err
	}
	linked := make([]string, 0, len(info.Deps))
	for _, d := range info.Deps {
		if d.Replace != nil {
			d = d.Replace
		}
		linked = append(linked, d.Path+"@"+d.Version)
	}
	slices.Sort(listed)
	slices.Sort(linked)
	if !slices.Equal(listed, linked) {
		return fmt.Errorf("lists %d modules, %s links %d: they differ", len(listed), binary, len(linked))
	}
	return nil
}

func blobName(digest string) string { return "blobs/" + strings.Replace(digest, ":", "/", 1) }

func unmarshalFile(files map[string][]byte, name string, v any) error {
	data, ok := files[name]
	if !ok {
		return fmt.Errorf("%s is missing", name)
	}
	// sigs.k8s.io/yaml reads JSON (OCI layouts) and YAML (charts) alike.
	if err := yaml.Unmarshal(data, v); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}

func readTar(path string) (map[string][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	return readTarFrom(f)
}

// readTarFrom reads the regular files of a tar, by name without "./".
func readTarFrom(r io.Reader) (map[string][]byte, error) {
	files := map[string][]byte{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		files[strings.TrimPrefix(h.Name, "./")] = data
	}
}
