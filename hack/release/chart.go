package main

import (
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// chartImage is an image as the chart's values.yaml names it.
type chartImage struct {
	Repository string `json:"repository"`
	Tag        string `json:"tag"`
	Digest     string `json:"digest"`
}

// verifyChart checks the release's Helm chart (hack/chart package): one
// trellis-X.Y.Z.tgz whose Chart.yaml says the images' version, and whose
// values.yaml names the manager and viewer images images.txt pins.
func verifyChart(dir string, images []image) error {
	charts, err := filepath.Glob(filepath.Join(dir, "trellis-*.tgz"))
	if err != nil {
		return err
	}
	if len(charts) != 1 {
		return fmt.Errorf("%d Helm charts (trellis-*.tgz), want 1", len(charts))
	}
	files, err := readTgz(charts[0])
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Base(charts[0]), err)
	}
	manager, viewer := find(images, managerArchive), find(images, viewerArchive)
	var chart struct {
		Name       string `json:"name"`
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	if err := unmarshalFile(files, "trellis/Chart.yaml", &chart); err != nil {
		return err
	}
	version := manager.tag
	if chart.Name != "trellis" || chart.AppVersion != version || chart.Version != strings.TrimPrefix(version, "v") {
		return fmt.Errorf("trellis/Chart.yaml: name %q, version %q, appVersion %q; want trellis, %s and %s",
			chart.Name, chart.Version, chart.AppVersion, strings.TrimPrefix(version, "v"), version)
	}
	if want := "trellis-" + chart.Version + ".tgz"; filepath.Base(charts[0]) != want {
		return fmt.Errorf("%s holds chart version %s: want it named %s", filepath.Base(charts[0]), chart.Version, want)
	}
	var values struct {
		Image       chartImage `json:"image"`
		ViewerImage chartImage `json:"viewerImage"`
	}
	if err := unmarshalFile(files, "trellis/values.yaml", &values); err != nil {
		return err
	}
	for _, c := range []struct {
		name string
		got  chartImage
		want reference
	}{{"image", values.Image, manager}, {"viewerImage", values.ViewerImage, viewer}} {
		if c.got != (chartImage{c.want.repository, c.want.tag, c.want.digest}) {
			return fmt.Errorf("trellis/values.yaml: %s is %s:%s@%s, %s says %s", c.name, c.got.Repository, c.got.Tag, c.got.Digest, imagesFile, c.want)
		}
	}
	return nil
}

// readTgz reads a gzipped tar (a packaged chart), as readTar a plain one.
func readTgz(path string) (map[string][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	return readTarFrom(zr)
}
