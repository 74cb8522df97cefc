package main

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/trellis-dev/trellis/internal/viewer"
	"github.com/trellis-dev/trellis/test/bench/httpload"
)

// inProcess serves h on loopback in this process.
func inProcess(h http.Handler) *server {
	s := httptest.NewServer(h)
	return &server{url: s.URL, stop: s.Close, peakRSS: func() float64 { return 0 }}
}

// TestRunMeasuresBothShapes runs the benchmark briefly, with the viewer's
// handler and the floor in this process instead of as processes, and checks
// every figure is there and sane.
func TestRunMeasuresBothShapes(t *testing.T) {
	g := NewWithT(t)
	startViewer := func(dir string) (*server, error) {
		return inProcess(viewer.NewServer(viewer.DirSource{Dir: dir}, slog.New(slog.DiscardHandler))), nil
	}
	startFloor := func(dir string) (*server, error) { return inProcess(http.FileServer(http.Dir(dir))), nil }
	rows, err := run(config{duration: 200 * time.Millisecond, concurrency: 2}, startViewer, startFloor)
	g.Expect(err).NotTo(HaveOccurred())
	figures := make([]string, 0, len(rows))
	for _, r := range rows {
		figures = append(figures, r.Scenario+": "+r.Figure)
		g.Expect(r.Value).To(BeNumerically(">", 0), "%+v", r)
		g.Expect(r.Floor).To(BeNumerically(">", 0), "%+v", r)
		g.Expect(r.Ratio).To(BeNumerically(">", 0), "%+v", r)
	}
	var want []string
	for _, shape := range shapes {
		for _, f := range []string{"page p50", "page p99", "page requests per second", "search p50", "search p99", "search requests per second"} {
			want = append(want, shape.name+": "+f)
		}
	}
	g.Expect(figures).To(Equal(want))
}

// TestSnapshotIsWhatTheViewerServes: the floor serves the viewer's own
// bytes, so the comparison is like for like.
func TestSnapshotIsWhatTheViewerServes(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	g.Expect(writeConfigMapVolume(dir, map[string]string{"a.md": "# A\n\nページ\n"})).To(Succeed())
	v := inProcess(viewer.NewServer(viewer.DirSource{Dir: dir}, slog.New(slog.DiscardHandler)))
	defer v.stop()
	floorDir := t.TempDir()
	paths, err := snapshot(v.url, []string{"/a.md", "/search?q=%E3%83%9A%E3%83%BC%E3%82%B8"}, floorDir, "x")
	g.Expect(err).NotTo(HaveOccurred())
	f := inProcess(http.FileServer(http.Dir(floorDir)))
	defer f.stop()
	for i, p := range []string{"/a.md", "/search?q=%E3%83%9A%E3%83%BC%E3%82%B8"} {
		fromViewer, err := httpload.Get(http.DefaultClient, v.url+p)
		g.Expect(err).NotTo(HaveOccurred())
		fromFloor, err := httpload.Get(http.DefaultClient, f.url+paths[i])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(fromFloor).To(Equal(fromViewer))
	}
	page, _ := httpload.Get(http.DefaultClient, f.url+paths[1])
	g.Expect(string(page)).To(ContainSubstring("<mark>ページ</mark>"), "the search really ran")
}
