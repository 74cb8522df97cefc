package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// The archives make release writes, by what they hold (hack/release).
const (
	managerArchive = "trellis-manager.tar"
	viewerArchive  = "trellis-viewer.tar"
)

var semver = regexp.MustCompile(`^v(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]+)?$`)

// releaseOf is the release VERSION with the images images.txt pins.
func releaseOf(version, imagesFile string) (release, error) {
	if !semver.MatchString(version) {
		return release{}, fmt.Errorf("version %q is not vMAJOR.MINOR.PATCH[-PRERELEASE]", version)
	}
	data, err := os.ReadFile(imagesFile)
	if err != nil {
		return release{}, err
	}
	rel := release{chartVersion: strings.TrimPrefix(version, "v"), appVersion: version}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 {
			return release{}, fmt.Errorf("%s: want ARCHIVE REFERENCE@DIGEST, got %q", imagesFile, sc.Text())
		}
		ref := parseImageRef(f[1])
		if ref.Digest == "" || ref.Tag != version {
			return release{}, fmt.Errorf("%s: %s is not %s pinned by digest", imagesFile, f[1], version)
		}
		switch f[0] {
		case managerArchive:
			rel.manager = &ref
		case viewerArchive:
			rel.viewer = &ref
		}
	}
	if rel.manager == nil || rel.viewer == nil {
		return release{}, fmt.Errorf("%s names no %s or no %s", imagesFile, managerArchive, viewerArchive)
	}
	return rel, nil
}

// packageChart writes OUT/trellis-VERSION.tgz: the chart generate writes
// for rel, which must be the committed chart but for Chart.yaml and
// values.yaml (else the chart is stale), in a tar whose bytes depend on
// nothing else.
func packageChart(kustomize, config, chartDir string, rel release, out string) (string, error) {
	committed, err := readChart(chartDir)
	if err != nil {
		return "", err
	}
	current, err := generate(kustomize, config, defaultRelease)
	if err != nil {
		return "", err
	}
	if diff := differences(committed, current); len(diff) > 0 {
		return "", fmt.Errorf("%s is not what config/ generates (%s): run make chart and commit", chartDir, strings.Join(diff, ", "))
	}
	files, err := generate(kustomize, config, rel)
	if err != nil {
		return "", err
	}
	data, err := tgz("trellis", files)
	if err != nil {
		return "", err
	}
	path := filepath.Join(out, "trellis-"+rel.chartVersion+".tgz")
	return path, os.WriteFile(path, data, 0o644)
}

func readChart(dir string) (map[string][]byte, error) {
	files := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		files[filepath.ToSlash(rel)] = data
		return err
	})
	return files, err
}

// differences names the files that differ, are missing or are extra.
func differences(have, want map[string][]byte) []string {
	var diff []string
	for _, name := range sortedKeys(want) {
		if got, ok := have[name]; !ok || !bytes.Equal(got, want[name]) {
			diff = append(diff, name)
		}
	}
	for _, name := range sortedKeys(have) {
		if _, ok := want[name]; !ok {
			diff = append(diff, name+" (extra)")
		}
	}
	return diff
}

// tgz is files under dir/ in a gzipped tar: sorted, owned by root, mode
// 0644, every time the Unix epoch, so the same files give the same bytes.
func tgz(dir string, files map[string][]byte) ([]byte, error) {
	var b bytes.Buffer
	zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	tw := tar.NewWriter(zw)
	for _, name := range sortedKeys(files) {
		h := &tar.Header{
			Typeflag: tar.TypeReg,
			Name:     dir + "/" + name,
			Mode:     0o644,
			Size:     int64(len(files[name])),
			ModTime:  time.Unix(0, 0).UTC(),
			Format:   tar.FormatPAX,
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(files[name]); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
