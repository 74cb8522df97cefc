//go:build e2e

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
)

// TestViewerImageOutsideTheAllowListIsStalled: the manager binary, with its
// default --viewer-image-allow (the repository of --viewer-image), refuses a
// MarkdownView naming another image, and creates nothing for it.
func TestViewerImageOutsideTheAllowListIsStalled(t *testing.T) {
	useLocalManager(t)
	mv := "apiVersion: view.trellis.dev/v1\nkind: MarkdownView\nmetadata: {name: foreign-image, namespace: default}\n" +
		"spec:\n  markdowns: {index.md: \"# x\"}\n  viewerImage: registry.example.com/miner:1\n"
	if _, err := kubectlIn([]byte(mv), "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	defer func() { _, _ = kubectl("delete", "markdownview", "foreign-image", "-n", "default", "--wait=false") }()
	if _, err := kubectl("wait", "--for=condition=Stalled", "markdownview/foreign-image", "-n", "default", "--timeout=60s"); err != nil {
		t.Fatal(err)
	}
	reason, err := kubectl("get", "markdownview", "foreign-image", "-n", "default", "-o", `jsonpath={.status.conditions[?(@.type=="Stalled")].reason}`)
	if err != nil {
		t.Fatal(err)
	}
	if reason != "ImageNotAllowed" {
		t.Errorf("Stalled reason %q, want ImageNotAllowed", reason)
	}
	if out, err := kubectl("get", "deployment", "viewer-foreign-image", "-n", "default", "--ignore-not-found", "-o", "name"); err != nil || out != "" {
		t.Errorf("a Deployment exists for a refused image: %q %v", out, err)
	}
}

// TestMaximalViewsConvergeUnderTheMemoryLimit creates TRELLIS_E2E_MAXIMAL_VIEWS
// MarkdownViews (300 for issue 15) of 1 MiB of Markdown each, the most
// admission accepts, waits until every one is Ready, restarts the manager
// (which lists them all again) and checks that the manager process, as
// built, stayed under the memory limit config/manager ships, the whole
// time: its peak resident set (VmHWM) is read from /proc. It also reads the
// manager's live heap (GODEBUG=gctrace=1: the heap the garbage collector
// found live, once the manager is idle) before and after, for the growth
// per view in a real process.
//
// It writes over a GiB into etcd and takes about 15 minutes, so it runs only
// when asked: TRELLIS_E2E_MAXIMAL_VIEWS=300 go test -tags e2e -run TestMaximalViewsConverge -v ./test/e2e/
func TestMaximalViewsConvergeUnderTheMemoryLimit(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("TRELLIS_E2E_MAXIMAL_VIEWS"))
	if n <= 0 {
		t.Skip("set TRELLIS_E2E_MAXIMAL_VIEWS (300 for issue 15) to run it")
	}
	limit := shippedMemoryLimit(t)
	ctx := context.Background()
	c := e2eClient(t)

	// One viewer pod per view: make room on the simulated nodes (110 pods each).
	scaleNodes(t, 2+(n+5+109)/110)
	const ns = "maximal"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_, _ = kubectl("delete", "namespace", ns, "--wait=true", "--timeout=300s")
	}()

	const line = "Lorem ipsum dolor sit amet, consectetur adipiscing elit.\n"
	text := strings.Repeat(line, (1<<20)/len(line)+1)[:1<<20-len("index.md")] // the most admission accepts
	create := func(prefix string, count int) {
		var wg sync.WaitGroup
		errs := make(chan error, count)
		work := make(chan int)
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					mv := &viewv1.MarkdownView{
						ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("%s-%03d", prefix, i)},
						Spec:       viewv1.MarkdownViewSpec{Markdowns: map[string]viewv1.MarkdownText{"index.md": viewv1.MarkdownText(text)}},
					}
					if err := c.Create(ctx, mv); err != nil {
						errs <- fmt.Errorf("view %s-%d: %w", prefix, i, err)
					}
				}
			}()
		}
		for i := range count {
			work <- i
		}
		close(work)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}

	// A few maximal views first: buffers that grow with the largest object
	// seen (each watch's decoder holds one of 1 MiB and more) are paid once,
	// whatever the number of views, and are not counted per view.
	const warmUp = 5
	create("warm", warmUp)
	waitAllReady(t, ns, warmUp, 5*time.Minute)

	// A manager of its own, whose garbage collector reports the live heap.
	t.Setenv("GODEBUG", "gctrace=1")
	restartManager(t, "before-maximal")
	heapBefore := liveHeapWhenIdle(t, current.log)
	before := procMemory(t, current.cmd.Process.Pid)

	start := time.Now()
	create("max", n)
	t.Logf("%d views of 1 MiB created in %.1fs", n, time.Since(start).Seconds())
	waitAllReady(t, ns, warmUp+n, 15*time.Minute)
	converged := procMemory(t, current.cmd.Process.Pid)
	t.Logf("all %d Ready %.1fs after the first create; manager RSS %s → %s, peak %s; limit %s",
		n, time.Since(start).Seconds(), mib(before.rss), mib(converged.rss), mib(converged.hwm), mib(limit))
	heapConverged := liveHeapWhenIdle(t, current.log)
	t.Logf("manager live heap when idle: %s before, %s with the %d views: %.1f KiB per view",
		mib(heapBefore), mib(heapConverged), n, float64(heapConverged-heapBefore)/float64(n)/1024)

	// A restart lists every view and ConfigMap again: the moment an
	// untrimmed cache would need all of them in memory at once.
	restartManager(t, "after-maximal")
	waitAllReady(t, ns, warmUp+n, 5*time.Minute)
	after := procMemory(t, current.cmd.Process.Pid)
	heapAfter := liveHeapWhenIdle(t, current.log)
	t.Logf("restarted with %d maximal views: RSS %s, peak %s, live heap when idle %s; limit %s",
		n, mib(after.rss), mib(after.hwm), mib(heapAfter), mib(limit))

	// The restart rewrote nothing: every ConfigMap was seen up to date from
	// hashes alone.
	if raw, err := os.ReadFile(current.log); err != nil {
		t.Fatal(err)
	} else if k := strings.Count(string(raw), `"msg":"ConfigMap updated"`) + strings.Count(string(raw), `"msg":"ConfigMap created"`); k != 0 {
		t.Errorf("the restarted manager wrote %d ConfigMaps", k)
	}
	for name, m := range map[string]procMem{"while converging": converged, "after a restart": after} {
		if m.hwm >= limit {
			t.Errorf("manager peak RSS %s %s reaches the shipped limit %s", mib(m.hwm), name, mib(limit))
		}
	}
	for name, heap := range map[string]int64{"converged": heapConverged, "restarted": heapAfter} {
		if per := (heap - heapBefore) / int64(n); per > 64<<10 {
			t.Errorf("%s: the manager's live heap grew %.1f KiB per maximal view, over 64 KiB", name, float64(per)/1024)
		}
	}

	// Every view has exactly its children, and the data is whole.
	for _, kind := range []string{"configmaps", "deployments", "services"} {
		if got := len(tableRows(t, kind, "-n", ns, "-l", "app.kubernetes.io/managed-by=trellis")); got != warmUp+n {
			t.Errorf("%d %s for %d views", got, kind, warmUp+n)
		}
	}
	cm := &corev1.ConfigMap{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "markdowns-max-000"}, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["index.md"] != text {
		t.Errorf("ConfigMap data is %d bytes, want the view's %d", len(cm.Data["index.md"]), len(text))
	}
}

// restartManager replaces whatever manager runs (deployed pods are scaled
// away) with a new local one, whose process the test can read.
func restartManager(t *testing.T, why string) {
	t.Helper()
	if err := scaleDeployedManager(0); err != nil {
		t.Fatal(err)
	}
	if _, err := startLocalManager(); err != nil {
		t.Fatalf("starting a manager (%s): %v", why, err)
	}
}

// gcLine is what GODEBUG=gctrace=1 prints per collection; the third heap
// figure is the heap found live, in MiB.
var gcLine = regexp.MustCompile(`(?m)^gc \d+ @[0-9.]+s [0-9]+%: .* (\d+)->(\d+)->(\d+) MB, \d+ MB goal`)

// liveHeapWhenIdle lets the manager settle for 30 s, then waits for its next
// garbage collection (the runtime forces one at least every 2 minutes) and
// returns the heap that collection found live.
func liveHeapWhenIdle(t *testing.T, logPath string) int64 {
	t.Helper()
	count := func() [][]string {
		raw, err := os.ReadFile(logPath)
		if err != nil {
			t.Fatal(err)
		}
		return gcLine.FindAllStringSubmatch(string(raw), -1)
	}
	time.Sleep(30 * time.Second)
	seen := len(count())
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if lines := count(); len(lines) > seen {
			live, _ := strconv.ParseInt(lines[len(lines)-1][3], 10, 64)
			return live << 20
		}
		time.Sleep(2 * time.Second)
	}
	t.Fatalf("no garbage collection reported in %s within 3 minutes (GODEBUG=gctrace=1)", logPath)
	return 0
}

// tableRows lists objects as kubectl prints them: the API server sends the
// printed columns only, not 1 MiB of Markdown per object (a full list of
// 300 maximal views takes the API server longer than a request may).
func tableRows(t *testing.T, kind string, args ...string) [][]string {
	t.Helper()
	out, err := kubectl(append([]string{"get", kind, "--no-headers", "--ignore-not-found"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	var rows [][]string
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 {
			rows = append(rows, f)
		}
	}
	return rows
}

// waitAllReady waits until n MarkdownViews in ns show READY True.
func waitAllReady(t *testing.T, ns string, n int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ready := 0
		for _, row := range tableRows(t, "markdownviews", "-n", ns) {
			// NAME REPLICAS AVAILABLE READY URL AGE
			if len(row) >= 4 && row[3] == "True" {
				ready++
			}
		}
		if ready == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d MarkdownViews Ready after %s", ready, n, timeout)
		}
		time.Sleep(5 * time.Second)
	}
}

type procMem struct{ rss, hwm int64 }

// procMemory reads a process' resident set (VmRSS) and its peak (VmHWM).
func procMemory(t *testing.T, pid int) procMem {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var m procMem
	s := bufio.NewScanner(f)
	for s.Scan() {
		for field, dst := range map[string]*int64{"VmRSS:": &m.rss, "VmHWM:": &m.hwm} {
			if rest, ok := strings.CutPrefix(s.Text(), field); ok {
				kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
				*dst = kb << 10
			}
		}
	}
	return m
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// shippedMemoryLimit is the manager container's memory limit in config/manager.
func shippedMemoryLimit(t *testing.T) int64 {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "config", "manager", "manager.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		d := &appsv1.Deployment{}
		if err := yaml.Unmarshal([]byte(doc), d); err != nil || d.Kind != "Deployment" {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if q, ok := c.Resources.Limits[corev1.ResourceMemory]; ok && c.Name == "manager" {
				return q.Value()
			}
		}
	}
	t.Fatal("config/manager/manager.yaml has no memory limit for the manager container")
	return 0
}

func e2eClient(t *testing.T) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 100, 200
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(viewv1.AddToScheme(scheme))
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// scaleNodes sets the number of simulated nodes of the suite's cluster.
func scaleNodes(t *testing.T, nodes int) {
	t.Helper()
	cmd := exec.Command(filepath.Join(bin, "kwokctl"), "--name", cluster, "scale", "node", "--replicas", strconv.Itoa(nodes))
	cmd.Env = append(os.Environ(), "KWOK_WORKDIR="+filepath.Join(root, ".dev", "kwok"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("kwokctl scale node: %v %s", err, out)
	}
}
