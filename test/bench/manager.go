package main

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The manager under test: a real bin/manager process, and what its
// Prometheus metrics say (writes by resource, reconciles, bucket checks, RSS).

type managerProc struct {
	cmd         *exec.Cmd
	metricsAddr string
	probeAddr   string
	pprofAddr   string // loopback: Go's pprof handlers (a forced GC, heap and CPU profiles)
	// anonPeak is the largest RssAnon seen (bytes), sampled twice a second
	// while the process runs: the kernel keeps a high-water mark of RSS
	// only, which counts the binary's mapped pages too.
	anonPeak atomic.Int64
}

func (b *bench) startManager() error { return b.startManagerWith() }

// startManagerWith starts the manager with flags beyond --manager-args.
func (b *bench) startManagerWith(extra ...string) error {
	m, err := b.launchManager("manager", extra...)
	if m != nil {
		b.mgr = m
	}
	return err
}

// launchManager starts one more manager process, logging to
// .dev/<cluster>-<name>.log, and waits until it is ready. The process is
// returned even when it did not become ready, so that it can be stopped.
func (b *bench) launchManager(name string, extra ...string) (*managerProc, error) {
	m := &managerProc{metricsAddr: freeAddr(), probeAddr: freeAddr(), pprofAddr: freeAddr()}
	logFile, err := os.Create(filepath.Join(b.root, ".dev", b.cluster+"-"+name+".log"))
	if err != nil {
		return nil, err
	}
	args := []string{"--kubeconfig", b.kubeconfig, "--namespace", "trellis-system",
		"--metrics-bind-address", m.metricsAddr, "--metrics-secure=false", "--health-probe-bind-address", m.probeAddr,
		"--pprof-bind-address", m.pprofAddr, "--zap-log-level", "error"}
	args = append(args, strings.Fields(b.cfg.managerArgs)...)
	args = append(args, extra...)
	m.cmd = exec.Command(filepath.Join(b.bin, "manager"), args...)
	m.cmd.Stdout, m.cmd.Stderr = logFile, logFile
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, err
	}
	_ = logFile.Close() // the child has its own descriptor
	go m.sampleAnon(m.cmd.Process.Pid)
	return m, waitFor(5*time.Minute, func() (bool, error) {
		resp, err := http.Get("http://" + m.probeAddr + "/readyz")
		if err != nil {
			return false, nil
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

func (m *managerProc) stop() {
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = m.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(45 * time.Second):
		_ = m.cmd.Process.Kill()
		<-done
	}
	m.cmd = nil
}

// kill ends the process with SIGKILL, as an OOM kill or a node's loss
// would: it neither releases its Lease nor finishes a request.
func (m *managerProc) kill() {
	if m.cmd == nil || m.cmd.Process == nil {
		return
	}
	_ = m.cmd.Process.Kill()
	_ = m.cmd.Wait()
	m.cmd = nil
}

// sampleAnon records the process' largest RssAnon until it ends.
func (m *managerProc) sampleAnon(pid int) {
	for {
		v, err := procStatus(pid, "RssAnon:")
		if err != nil {
			return // gone
		}
		if int64(v) > m.anonPeak.Load() {
			m.anonPeak.Store(int64(v))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// anon reads RssAnon, the process' own resident memory now (heap, stacks,
// runtime), without the file-backed pages of its binary.
func (m *managerProc) anon() (float64, error) { return m.status("RssAnon:") }

// peakRSS reads VmHWM, the process' high-water mark of resident memory.
func (m *managerProc) peakRSS() (float64, error) { return m.status("VmHWM:") }

// rss reads VmRSS, the process' resident memory now.
func (m *managerProc) rss() (float64, error) { return m.status("VmRSS:") }

func (m *managerProc) status(field string) (float64, error) {
	return procStatus(m.cmd.Process.Pid, field)
}

// procStatus reads a kB figure from /proc/<pid>/status, in bytes.
func procStatus(pid int, field string) (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), field); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// writeCounts is the manager's own count of mutating API requests by resource.
type writeCounts map[string]float64

func (w writeCounts) total() float64 {
	t := 0.0
	for _, v := range w {
		t += v
	}
	return t
}

// withoutEvents is the total of writes other than Events.
func (w writeCounts) withoutEvents() float64 { return w.total() - w["events"] }

// sub is the writes since before.
func (w writeCounts) sub(before writeCounts) writeCounts {
	out := writeCounts{}
	for k, v := range w {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func (w writeCounts) String() string { return w.minus(nil) }

func (w writeCounts) minus(before writeCounts) string {
	keys := make([]string, 0, len(w))
	for k := range w {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		if d := w[k] - before[k]; d != 0 {
			parts = append(parts, fmt.Sprintf("%s=%g", k, d))
		}
	}
	return strings.Join(parts, " ")
}

func (m *managerProc) scrape() (map[string]*dto.MetricFamily, error) {
	resp, err := http.Get("http://" + m.metricsAddr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(resp.Body)
}

func (m *managerProc) writes() (writeCounts, error) {
	fams, err := m.scrape()
	if err != nil {
		return nil, err
	}
	out := writeCounts{}
	if f, ok := fams["trellis_api_requests_total"]; ok {
		for _, metric := range f.Metric {
			labels := map[string]string{}
			for _, l := range metric.Label {
				labels[l.GetName()] = l.GetValue()
			}
			switch labels["verb"] {
			case "POST", "PUT", "PATCH", "DELETE":
				if labels["resource"] == "leases" {
					continue
				}
				out[labels["resource"]] += metric.GetCounter().GetValue()
			}
		}
	}
	return out, nil
}

// requests is every request the manager sent, by "VERB resource" (reads
// included), for seeing where a run's requests went.
func (m *managerProc) requests() (writeCounts, error) {
	fams, err := m.scrape()
	if err != nil {
		return nil, err
	}
	out := writeCounts{}
	if f, ok := fams["trellis_api_requests_total"]; ok {
		for _, metric := range f.Metric {
			labels := map[string]string{}
			for _, l := range metric.Label {
				labels[l.GetName()] = l.GetValue()
			}
			out[labels["verb"]+" "+labels["resource"]] += metric.GetCounter().GetValue()
		}
	}
	return out, nil
}

// statusWrites is how many status writes the manager sent since it
// started, and how many its status patcher saved: writes of a status the
// cache had not yet shown it had written.
func (m *managerProc) statusWrites() (sent, saved float64, err error) {
	fams, err := m.scrape()
	if err != nil {
		return 0, 0, err
	}
	if f, ok := fams["trellis_api_requests_total"]; ok {
		for _, metric := range f.Metric {
			labels := map[string]string{}
			for _, l := range metric.Label {
				labels[l.GetName()] = l.GetValue()
			}
			if (labels["verb"] == "PATCH" || labels["verb"] == "PUT") && strings.HasSuffix(labels["resource"], "/status") {
				sent += metric.GetCounter().GetValue()
			}
		}
	}
	return sent, sumCounter(fams, "trellis_status_writes_saved_total", nil), nil
}

// conflicts is the creates the manager's client got 409 for (the object
// exists: nothing written), so far.
func (m *managerProc) conflicts() (float64, error) {
	fams, err := m.scrape()
	if err != nil {
		return 0, err
	}
	return sumCounter(fams, "rest_client_requests_total", map[string]string{"code": "409", "method": "POST"}), nil
}

func (m *managerProc) reconciles(controller string) (float64, error) {
	fams, err := m.scrape()
	if err != nil {
		return 0, err
	}
	return sumCounter(fams, "controller_runtime_reconcile_total", map[string]string{"controller": controller}), nil
}

// bucketCounters are the health checks of the StorageBuckets in namespace
// and the requests sent to the ObjectStore store, so far.
func (m *managerProc) bucketCounters(namespace, store string) (checks, requests float64, err error) {
	fams, err := m.scrape()
	if err != nil {
		return 0, 0, err
	}
	return sumCounter(fams, "trellis_storagebucket_checks_total", map[string]string{"namespace": namespace}),
		sumCounter(fams, "trellis_objectstore_requests_total", map[string]string{"store": store}), nil
}

// gauge reads one of the manager's unlabelled gauges, such as
// go_memstats_heap_inuse_bytes.
func (m *managerProc) gauge(name string) (float64, error) {
	fams, err := m.scrape()
	if err != nil {
		return 0, err
	}
	f, ok := fams[name]
	if !ok || len(f.Metric) == 0 {
		return 0, fmt.Errorf("the manager reports no %s", name)
	}
	return f.Metric[0].GetGauge().GetValue(), nil
}

// sumCounter sums the counters or gauges of name whose labels include match.
func sumCounter(fams map[string]*dto.MetricFamily, name string, match map[string]string) float64 {
	f, ok := fams[name]
	if !ok {
		return 0
	}
	total := 0.0
next:
	for _, metric := range f.Metric {
		for k, v := range match {
			found := false
			for _, l := range metric.Label {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		total += metric.GetCounter().GetValue() + metric.GetGauge().GetValue()
	}
	return total
}
