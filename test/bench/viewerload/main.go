// Command viewerload measures the viewer's page and search latency on
// loopback (make bench): bin/viewer serving a benchsite laid out as a
// ConfigMap volume, next to a floor measured in the same run — net/http's
// FileServer, in its own process, serving the same HTML pre-rendered by the
// viewer. A closed-loop Go client with --concurrency connections sends the
// requests; latencies are reported as p50 and p99, and as ratios to the
// floor. It prints a table and writes JSON under --out.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/trellis-dev/trellis/test/bench/benchsite"
	"github.com/trellis-dev/trellis/test/bench/httpload"
)

type config struct {
	viewer      string
	duration    time.Duration
	concurrency int
	out         string
}

// siteShape is one benchmark site: the two shapes of a MarkdownView at its
// 1 MiB limit.
type siteShape struct {
	name             string
	pages, pageBytes int
}

var shapes = []siteShape{
	{"128 pages × 8 KiB", 128, 8 << 10},
	{"1 page of 1 MiB", 1, 1<<20 - 8<<10},
}

// row is one line of the result table.
type row struct {
	Scenario string  `json:"scenario"`
	Figure   string  `json:"figure"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	Floor    float64 `json:"floor,omitempty"`
	Ratio    float64 `json:"ratio,omitempty"`
}

// server is a running HTTP server: its base URL and how to stop it.
type server struct {
	url  string
	stop func()
	// peakRSS reports the process's peak resident memory in MiB (0 when the
	// server runs in this process).
	peakRSS func() float64
}

func main() {
	serveFloor := flag.String("serve-floor", "", "internal: serve this directory with http.FileServer on --addr (the floor)")
	addr := flag.String("addr", "", "internal: the floor's address")
	var cfg config
	smoke := flag.Bool("smoke", false, "short runs: checks the benchmark works, not its figures")
	flag.StringVar(&cfg.viewer, "viewer", "bin/viewer", "the viewer binary (make build)")
	flag.DurationVar(&cfg.duration, "duration", 10*time.Second, "load time per server and workload")
	flag.IntVar(&cfg.concurrency, "concurrency", 4, "concurrent client connections")
	flag.StringVar(&cfg.out, "out", "bench/results", "directory for the JSON results")
	flag.Parse()
	if *serveFloor != "" {
		srv := &http.Server{Addr: *addr, Handler: http.FileServer(http.Dir(*serveFloor)), ReadHeaderTimeout: 5 * time.Second}
		fmt.Fprintln(os.Stderr, srv.ListenAndServe())
		os.Exit(1)
	}
	if *smoke {
		cfg.duration = time.Second
	}
	rows, err := run(cfg, startViewerProcess(cfg.viewer), startFloorProcess)
	if err == nil {
		err = report(cfg, rows)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "viewerload:", err)
		os.Exit(1)
	}
}

// run measures every site shape.
func run(cfg config, startViewer, startFloor func(dir string) (*server, error)) ([]row, error) {
	var rows []row
	for _, shape := range shapes {
		r, err := measureShape(cfg, shape, startViewer, startFloor)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", shape.name, err)
		}
		rows = append(rows, r...)
	}
	return rows, nil
}

func measureShape(cfg config, shape siteShape, startViewer, startFloor func(string) (*server, error)) ([]row, error) {
	tmp, err := os.MkdirTemp("", "trellis-viewerload-")
	if err != nil {
		return nil, err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	volume, floorDir := filepath.Join(tmp, "volume"), filepath.Join(tmp, "floor")
	files := benchsite.Site(shape.pages, shape.pageBytes)
	if err := writeConfigMapVolume(volume, files); err != nil {
		return nil, err
	}
	viewer, err := startViewer(volume)
	if err != nil {
		return nil, err
	}
	defer viewer.stop()

	pages := make([]string, 0, len(files))
	searches := make([]string, 0, len(benchsite.Queries))
	for name := range files {
		if name != "SUMMARY.md" {
			pages = append(pages, "/"+url.PathEscape(name))
		}
	}
	slices.Sort(pages)
	for _, q := range benchsite.Queries {
		searches = append(searches, "/search?q="+url.QueryEscape(q))
	}
	// The floor serves what the viewer serves, as files: fetching it also
	// warms the viewer (every page rendered, the index built).
	floorPages, err := snapshot(viewer.url, pages, floorDir, "page")
	if err != nil {
		return nil, err
	}
	floorSearches, err := snapshot(viewer.url, searches, floorDir, "search")
	if err != nil {
		return nil, err
	}
	floor, err := startFloor(floorDir)
	if err != nil {
		return nil, err
	}
	defer floor.stop()

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: cfg.concurrency, DisableCompression: true}}
	rows := make([]row, 0, 7)
	for _, w := range []struct {
		name         string
		paths, floor []string
	}{{"page", pages, floorPages}, {"search", searches, floorSearches}} {
		// Viewer and floor take turns, twice, so drift on a shared machine
		// falls on both.
		var v, f []time.Duration
		for range 2 {
			lat, err := httpload.Load(client, viewer.url, w.paths, cfg.duration/2, cfg.concurrency)
			if err != nil {
				return nil, fmt.Errorf("viewer %s: %w", w.name, err)
			}
			v = append(v, lat...)
			lat, err = httpload.Load(client, floor.url, w.floor, cfg.duration/2, cfg.concurrency)
			if err != nil {
				return nil, fmt.Errorf("floor %s: %w", w.name, err)
			}
			f = append(f, lat...)
		}
		for _, p := range []float64{50, 99} {
			value, floorValue := httpload.Percentile(v, p), httpload.Percentile(f, p)
			rows = append(rows, row{Scenario: shape.name, Figure: fmt.Sprintf("%s p%.0f", w.name, p),
				Value: ms(value), Unit: "ms", Floor: ms(floorValue), Ratio: ratio(value, floorValue)})
		}
		rows = append(rows, row{Scenario: shape.name, Figure: w.name + " requests per second",
			Value: float64(len(v)) / cfg.duration.Seconds(), Unit: "1/s", Floor: float64(len(f)) / cfg.duration.Seconds(),
			Ratio: float64(len(v)) / max(float64(len(f)), 1)})
	}
	if rss := viewer.peakRSS(); rss > 0 {
		rows = append(rows, row{Scenario: shape.name, Figure: "viewer peak RSS", Value: rss, Unit: "MiB"})
	}
	return rows, nil
}

// writeConfigMapVolume lays files out the way the kubelet writes a ConfigMap
// volume: a timestamped directory, "..data" linking to it, and a symlink
// through "..data" per key.
func writeConfigMapVolume(dir string, files map[string]string) error {
	ts := "..2026_11_22_00_00_00.000000001"
	if err := os.MkdirAll(filepath.Join(dir, ts), 0o755); err != nil {
		return err
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, ts, name), []byte(text), 0o644); err != nil {
			return err
		}
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	return os.Symlink(ts, filepath.Join(dir, "..data"))
}

// snapshot fetches paths from base and writes each response into dir as
// <kind>-<n>.html; it returns the paths the floor serves them at.
func snapshot(base string, paths []string, dir, kind string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	out := make([]string, 0, len(paths))
	for i, p := range paths {
		body, err := httpload.Get(http.DefaultClient, base+p)
		if err != nil {
			return nil, err
		}
		name := fmt.Sprintf("%s-%03d.html", kind, i)
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o644); err != nil {
			return nil, err
		}
		out = append(out, "/"+name)
	}
	return out, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func ratio(v, floor time.Duration) float64 {
	if floor <= 0 {
		return 0
	}
	return float64(v) / float64(floor)
}

// startViewerProcess runs the viewer binary on dir and waits for /healthz.
func startViewerProcess(bin string) func(string) (*server, error) {
	return func(dir string) (*server, error) {
		return startProcess(bin, "--dir", dir)
	}
}

// startFloorProcess runs this program again as the floor server on dir.
func startFloorProcess(dir string) (*server, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	return startProcess(self, "--serve-floor", dir)
}

func startProcess(bin string, args ...string) (*server, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, append(args, "--addr", addr)...)
	cmd.Stderr = io.Discard
	if err := cmd.Start(); err != nil {
		cancel()
		return nil, err
	}
	stop := func() { cancel(); _ = cmd.Wait() }
	base := "http://" + addr
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		resp, err := http.Get(base + "/")
		if err == nil {
			_ = resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("%s did not start: %w", bin, err)
		}
	}
	pid := cmd.Process.Pid
	return &server{url: base, stop: stop, peakRSS: func() float64 { return peakRSS(pid) }}, nil
}

// peakRSS reads a process's VmHWM (peak resident set) in MiB, or 0.
func peakRSS(pid int) float64 {
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(status), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb float64
			if _, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), &kb); err == nil {
				return kb / 1024
			}
		}
	}
	return 0
}

func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

func report(cfg config, rows []row) error {
	fmt.Printf("\n%-20s | %-28s | %10s | %10s | %6s\n", "viewer on loopback", "figure", "value", "floor", "ratio")
	fmt.Println(strings.Repeat("-", 86))
	for _, r := range rows {
		floor, rat := "", ""
		if r.Floor != 0 {
			floor = fmt.Sprintf("%.2f", r.Floor)
		}
		if r.Ratio != 0 {
			rat = fmt.Sprintf("%.2f", r.Ratio)
		}
		fmt.Printf("%-20s | %-28s | %7.2f %-3s| %10s | %6s\n", r.Scenario, r.Figure, r.Value, r.Unit, floor, rat)
	}
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	path := filepath.Join(cfg.out, "viewer-"+time.Now().UTC().Format("20060102-150405")+".json")
	data, err := json.MarshalIndent(map[string]any{"config": fmt.Sprintf("%+v", cfg), "results": rows}, "", "  ")
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "results written to", path)
	return os.WriteFile(path, data, 0o644)
}
