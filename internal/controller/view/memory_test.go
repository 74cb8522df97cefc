package view

import (
	"bufio"
	"context"
	"fmt"
	"maps"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/manager"
)

// maxBytesPerView is what the manager's memory may grow by per
// MarkdownView, whatever the view holds (issue 15).
const maxBytesPerView = 64 << 10

// TestManagerMemoryPerView measures how much the manager's memory grows per
// MarkdownView: small ones, ones with the most Markdown admission accepts
// (1 MiB), and "worst" ones that fill every field to its bound (Markdown,
// 60 assets, spec.pod just under its 8 KiB, 200 kB of annotations on the
// MarkdownView). It runs the manager as `bin/manager` builds it (the real
// cache options, the MarkdownView controller) against an API server of its
// own, and reads the Go heap after a GC (held to 64 KiB per view) and VmRSS
// after returning freed memory to the OS (reported).
//
// The test plays the Deployment controller (envtest runs none), so every
// view becomes Ready and raises its Event, as in a cluster.
//
// go test runs it with 10 views of each kind. More (at most 80), and the
// design before the cache transforms for comparison:
//
//	TRELLIS_MEMORY_VIEWS=80 go test -run TestManagerMemoryPerView -v ./internal/controller/view/
//	TRELLIS_MEMORY_VIEWS=80 TRELLIS_MEMORY_UNTRIMMED=1 go test -run TestManagerMemoryPerView -v ./internal/controller/view/
func TestManagerMemoryPerView(t *testing.T) {
	n := 10
	if v := os.Getenv("TRELLIS_MEMORY_VIEWS"); v != "" {
		var err error
		// Each view has a Service, and envtest's Service range (a /24)
		// holds 253: 3 warm-up views and 3 × 80 fit.
		if n, err = strconv.Atoi(v); err != nil || n < 1 || n > 80 {
			t.Fatalf("TRELLIS_MEMORY_VIEWS=%q: want 1 to 80 (the Services of 3 × N views must fit envtest's Service range)", v)
		}
	}
	untrimmed := os.Getenv("TRELLIS_MEMORY_UNTRIMMED") == "1"
	g := NewWithT(t)
	ctx := context.Background()

	cfg, c, scheme := ownAPIServer(t)
	cached, stop := startViewManager(g, cfg, scheme, func(_ *manager.Options, ctl *setup.Controller) {
		if untrimmed {
			// The cache as it was before issue 15, with every body kept; the
			// hashes the reconcile compares are still added.
			ctl.Transforms = []setup.Transform{
				{Object: &viewv1.MarkdownView{}, Func: keepingBodies(trimMarkdownView)},
				{Object: &corev1.ConfigMap{}, Func: keepingBodies(trimConfigMap)},
			}
		}
	})
	defer func() { g.Expect(stop()).To(Succeed()) }()

	kinds := []struct {
		name string
		make func(ns, name string) *viewv1.MarkdownView
	}{
		{"small", smallView},
		{"maximal", maximalView},
		{"worst", worstView},
	}
	// Warm up: one view of each kind, so that what is paid once (client
	// connections, the event broadcaster, informer buffers) is not counted
	// per view.
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "mem-warm-up"}})).To(Succeed())
	for _, kind := range kinds {
		g.Expect(c.Create(ctx, kind.make("mem-warm-up", kind.name))).To(Succeed())
		deploymentAvailable(g, c, "mem-warm-up", "viewer-"+kind.name)
	}
	total := len(kinds)
	waitConverged(g, cached, total)
	before := measureMemory()
	type row struct {
		name        string
		heap, rss   int64
		perHeap     int64
		perRSS      int64
		convergence time.Duration
	}
	rows := make([]row, 0, len(kinds))
	for _, kind := range kinds {
		ns := "mem-" + kind.name
		g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		start := time.Now()
		for i := range n {
			mv := kind.make(ns, fmt.Sprintf("v%d", i))
			g.Expect(c.Create(ctx, mv)).To(Succeed(), "%s view %d", kind.name, i)
		}
		for i := range n {
			deploymentAvailable(g, c, ns, fmt.Sprintf("viewer-v%d", i))
		}
		total += n
		waitConverged(g, cached, total)
		took := time.Since(start)
		after := measureMemory()
		rows = append(rows, row{kind.name, after.heap - before.heap, after.rss - before.rss,
			(after.heap - before.heap) / int64(n), (after.rss - before.rss) / int64(n), took})
		before = after
	}

	design := "trimmed cache (content hashes)"
	if untrimmed {
		design = "untrimmed cache (before issue 15)"
	}
	t.Logf("manager memory growth per MarkdownView, %d views of each kind, %s:", n, design)
	t.Logf("%-8s %14s %14s %14s %14s %10s", "kind", "heap growth", "RSS growth", "heap/view", "RSS/view", "converged")
	for _, r := range rows {
		t.Logf("%-8s %11.1f MiB %11.1f MiB %10.1f KiB %10.1f KiB %9.1fs", r.name,
			float64(r.heap)/(1<<20), float64(r.rss)/(1<<20), float64(r.perHeap)/1024, float64(r.perRSS)/1024, r.convergence.Seconds())
	}
	if untrimmed {
		return // a comparison, not the design
	}
	var rssGrowth int64
	for _, r := range rows {
		g.Expect(r.perHeap).To(BeNumerically("<=", maxBytesPerView), "heap per %s view", r.name)
		rssGrowth += r.rss
	}
	// The resident set of this process also holds the test's own clients and
	// what the allocator keeps of freed spans: it is reported, not held to
	// the bound. The manager's RSS, alone in its process, is measured by the
	// e2e test TestMaximalViewsConvergeUnderTheMemoryLimit.
	t.Logf("RSS growth over all %d views: %.1f KiB per view", n*len(rows), float64(rssGrowth)/float64(n*len(rows))/1024)
}

// keepingBodies is trim without the trimming: the object keeps everything and
// gets the cache keys trim would have added.
func keepingBodies(trim func(any) (any, error)) func(any) (any, error) {
	return func(in any) (any, error) {
		obj := in.(client.Object)
		out, err := trim(obj.DeepCopyObject())
		if err != nil {
			return nil, err
		}
		annotations := maps.Clone(obj.GetAnnotations())
		if annotations == nil {
			annotations = map[string]string{}
		}
		for k, v := range out.(client.Object).GetAnnotations() {
			if k == cachedContentHash || k == cachedContentBytes || k == cachedPodBytes {
				annotations[k] = v
			}
		}
		obj.SetAnnotations(annotations)
		return obj, nil
	}
}

// deploymentAvailable plays the Deployment controller for one viewer.
func deploymentAvailable(g Gomega, c client.Client, ns, name string) {
	g.Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(c.Get(context.Background(), key(ns, name), d)).To(Succeed())
		n := *d.Spec.Replicas
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
			},
		}
		g.Expect(c.Status().Update(context.Background(), d)).To(Succeed())
	}, 2*time.Minute, 100*time.Millisecond).Should(Succeed())
}

// waitConverged waits until the manager's cache has total MarkdownViews that
// are Ready for their generation, and their ConfigMaps.
func waitConverged(g Gomega, cached client.Client, total int) {
	g.Eventually(func(g Gomega) {
		views := &viewv1.MarkdownViewList{}
		g.Expect(cached.List(context.Background(), views)).To(Succeed())
		g.Expect(views.Items).To(HaveLen(total))
		for _, mv := range views.Items {
			g.Expect(mv.Status.ObservedGeneration).To(Equal(mv.Generation), "%s/%s", mv.Namespace, mv.Name)
			g.Expect(stalledReason(mv)).To(BeEmpty(), "%s/%s", mv.Namespace, mv.Name)
			g.Expect(meta.IsStatusConditionTrue(mv.Status.Conditions, "Ready")).To(BeTrue(), "%s/%s", mv.Namespace, mv.Name)
		}
		cms := &corev1.ConfigMapList{}
		g.Expect(cached.List(context.Background(), cms)).To(Succeed())
		g.Expect(cms.Items).To(HaveLen(total))
	}, 10*time.Minute, time.Second).Should(Succeed())
	// Let the status writes and their watch events settle.
	time.Sleep(2 * time.Second)
}

func stalledReason(mv viewv1.MarkdownView) string {
	for _, c := range mv.Status.Conditions {
		if c.Type == "Stalled" && c.Status == metav1.ConditionTrue {
			return c.Reason + ": " + c.Message
		}
	}
	return ""
}

type memory struct{ heap, rss int64 }

// measureMemory reads the live heap after a full GC, and the resident set
// after the runtime has returned what it freed to the OS.
func measureMemory() memory {
	runtime.GC()
	debug.FreeOSMemory()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return memory{heap: int64(ms.HeapAlloc), rss: vmRSS()}
}

// vmRSS is the process' resident set size from /proc/self/status (0 where
// there is no /proc).
func vmRSS() int64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func smallView(ns, name string) *viewv1.MarkdownView {
	return newMarkdownView(ns, name, map[string]string{"index.md": "# " + name + "\n\nA small page."})
}

// maximalView holds the most Markdown admission accepts: 1 MiB with its name.
func maximalView(ns, name string) *viewv1.MarkdownView {
	const file = "index.md"
	line := "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt.\n"
	text := strings.Repeat(line, (1<<20-len(file))/len(line)+1)[:1<<20-len(file)]
	return newMarkdownView(ns, name, map[string]string{file: text})
}

// worstView fills every field to its bound: half a MiB of Markdown, 60
// assets making up the other half, pod settings just under 8 KiB, and
// 200 kB of annotations and 100 labels on the MarkdownView itself.
func worstView(ns, name string) *viewv1.MarkdownView {
	mv := newMarkdownView(ns, name, map[string]string{"index.md": strings.Repeat("x", 512<<10)})
	mv.Spec.Assets = map[string][]byte{}
	for i := range 60 {
		mv.Spec.Assets[fmt.Sprintf("image-%02d.png", i)] = []byte(strings.Repeat("\x89PNG", (512<<10)/60/4-4))
	}
	mv.Annotations = map[string]string{"example.com/notes": strings.Repeat("n", 200_000)}
	mv.Labels = map[string]string{}
	for i := range 100 {
		mv.Labels[fmt.Sprintf("example.com/label-%03d", i)] = strings.Repeat("v", 63)
	}
	pod := viewv1.ViewerPod{
		NodeSelector: map[string]viewv1.LabelValue{},
		Annotations:  map[string]viewv1.AnnotationValue{},
		Labels:       map[string]viewv1.LabelValue{},
	}
	for i := range 16 {
		pod.Labels[fmt.Sprintf("example.com/l%02d", i)] = viewv1.LabelValue(strings.Repeat("v", 63))
		pod.NodeSelector[fmt.Sprintf("example.com/n%02d", i)] = viewv1.LabelValue(strings.Repeat("v", 63))
	}
	for i := range 16 {
		pod.Annotations[fmt.Sprintf("example.com/a%02d", i)] = viewv1.AnnotationValue(strings.Repeat("a", 290))
	}
	mv.Spec.Pod = pod
	return mv
}

// TestWorstViewIsJustUnderThePodSettingsBound keeps worstView honest: its
// pod settings are accepted, and near the bound.
func TestWorstViewIsJustUnderThePodSettingsBound(t *testing.T) {
	g := NewWithT(t)
	mv := worstView("ns", "w")
	out, err := trimMarkdownView(mv.DeepCopy())
	g.Expect(err).NotTo(HaveOccurred())
	trimmed := out.(*viewv1.MarkdownView)
	g.Expect(trimmed.Annotations).NotTo(HaveKey(cachedPodBytes))
	g.Expect(trimmed.Spec.Pod.Annotations).To(HaveLen(16))
	data, binaryData := desiredContent(mv)
	g.Expect(contentSize(data, binaryData)).To(BeNumerically("<=", maxConfigMapBytes))
	g.Expect(contentSize(data, binaryData)).To(BeNumerically(">", maxConfigMapBytes-64<<10))
	raw := mustJSON(g, mv.Spec.Pod)
	g.Expect(len(raw)).To(BeNumerically(">", maxPodSettingsBytes-512))
	g.Expect(len(raw)).To(BeNumerically("<=", maxPodSettingsBytes))
}
