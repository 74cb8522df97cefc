// Command bench measures Trellis at scale on a fresh local KWOK cluster with
// a real versitygw and the manager as a real process (make bench). Every time
// is reported next to a floor measured in the same run — the same objects
// created directly by a concurrent client — because absolute times on shared
// machines drift. It prints a table and writes JSON under bench/results/.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
)

type config struct {
	markdownViews, unrelated, tenants, buckets, edits, workers int
	bucketInterval, quiet, bucketWindow                        time.Duration
	out                                                        string
	keep                                                       bool
	managerArgs                                                string
	scenarios                                                  string
}

// row is one line of the result table.
type row struct {
	Scenario string  `json:"scenario"`
	Figure   string  `json:"figure"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	Floor    float64 `json:"floor,omitempty"`
	Ratio    float64 `json:"ratio,omitempty"`
	Target   string  `json:"target"`
	Met      bool    `json:"met"`
}

type bench struct {
	cfg        config
	root, bin  string
	cluster    string
	kubeconfig string
	c          client.Client
	s3Port     int
	mgr        *managerProc
	rows       []row
}

func main() {
	var cfg config
	smoke := flag.Bool("smoke", false, "small sizes, for make test: checks the bench runs, not the figures")
	flag.IntVar(&cfg.markdownViews, "markdownviews", 1000, "MarkdownViews created at once")
	flag.IntVar(&cfg.unrelated, "unrelated", 10000, "unrelated ConfigMaps and Secrets (2 KiB each, half of each) for the memory scenario")
	flag.IntVar(&cfg.tenants, "tenants", 300, "Tenants of 3 namespaces each")
	flag.IntVar(&cfg.buckets, "buckets", 1000, "StorageBuckets")
	flag.DurationVar(&cfg.bucketInterval, "bucket-interval", 60*time.Second, "health-check interval of the buckets")
	flag.DurationVar(&cfg.bucketWindow, "bucket-window", 120*time.Second, "how long bucket checks are sampled")
	flag.DurationVar(&cfg.quiet, "quiet", 60*time.Second, "quiet window after convergence")
	flag.IntVar(&cfg.edits, "edits", 50, "edits of one MarkdownView for the edit-latency scenario")
	flag.IntVar(&cfg.workers, "workers", 16, "concurrent client workers (for the floor and for creating objects)")
	flag.StringVar(&cfg.out, "out", "bench/results", "directory for the JSON results")
	flag.BoolVar(&cfg.keep, "keep", false, "keep the cluster afterwards")
	flag.StringVar(&cfg.managerArgs, "manager-args", "", "extra manager flags, space-separated (to compare settings)")
	flag.StringVar(&cfg.scenarios, "scenarios", "markdownview,tenant,bucket,memory", "which scenarios to run (memory needs markdownview)")
	flag.Parse()
	if *smoke {
		cfg = config{markdownViews: 20, unrelated: 200, tenants: 10, buckets: 20, edits: 5, workers: 8,
			bucketInterval: 10 * time.Second, bucketWindow: 20 * time.Second, quiet: 5 * time.Second, out: cfg.out,
			managerArgs: cfg.managerArgs, scenarios: cfg.scenarios}
	}
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(cfg config) error {
	wd, _ := os.Getwd()
	b := &bench{cfg: cfg, root: wd, bin: filepath.Join(wd, "bin"), cluster: fmt.Sprintf("trellis-bench-%d", os.Getpid())}
	nodes := (2*cfg.markdownViews)/100 + 2 // the floor's Deployments and Trellis' each run a pod; 110 pods a node
	log("cluster %s with %d simulated nodes", b.cluster, nodes)
	out, err := exec.Command(filepath.Join(b.root, "hack", "cluster.sh"), "up", b.cluster, strconv.Itoa(nodes)).Output()
	if err != nil {
		return fmt.Errorf("cluster: %w %s", err, exitStderr(err))
	}
	b.kubeconfig = strings.TrimSpace(string(out))
	defer func() {
		if b.mgr != nil {
			b.mgr.stop()
		}
		_ = exec.Command(filepath.Join(b.root, "hack", "cluster.sh"), "s3-down", b.cluster).Run()
		if !cfg.keep {
			_ = exec.Command(filepath.Join(b.root, "hack", "cluster.sh"), "down", b.cluster).Run()
		}
	}()
	if err := b.setup(); err != nil {
		return err
	}
	if err := b.startManager(); err != nil {
		return err
	}
	steps := []struct {
		name string
		run  func() error
	}{{"markdownview", b.markdownViewScenarios}, {"tenant", b.tenantScenario}, {"bucket", b.bucketScenario}, {"memory", b.memoryScenario}}
	for _, step := range steps {
		if !strings.Contains(","+cfg.scenarios+",", ","+step.name+",") {
			continue
		}
		if err := step.run(); err != nil {
			return fmt.Errorf("%s: %w", step.name, err)
		}
	}
	return b.report()
}

func log(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%s] %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func (b *bench) setup() error {
	restCfg, err := clientcmd.BuildConfigFromFlags("", b.kubeconfig)
	if err != nil {
		return err
	}
	restCfg.QPS, restCfg.Burst = 500, 1000 // the floor client must not be the bottleneck
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(viewv1.AddToScheme(scheme))
	utilruntime.Must(tenancyv1.AddToScheme(scheme))
	utilruntime.Must(storagev1.AddToScheme(scheme))
	if b.c, err = client.New(restCfg, client.Options{Scheme: scheme}); err != nil {
		return err
	}
	crds, err := exec.Command(filepath.Join(b.bin, "kustomize"), "build", filepath.Join(b.root, "config", "crd")).Output()
	if err != nil {
		return fmt.Errorf("kustomize: %w", err)
	}
	if err := b.kubectlIn(crds, "apply", "--server-side", "-f", "-"); err != nil {
		return err
	}
	if err := b.kubectlIn(nil, "wait", "--for=condition=Established", "crd", "--all", "--timeout=60s"); err != nil {
		return err
	}
	ctx := context.Background()
	for _, ns := range []string{"trellis-system", "floor-mv", "mv", "unrelated", "buckets"} {
		if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	if err := exec.Command(filepath.Join(b.root, "hack", "cluster.sh"), "s3-credentials", b.cluster).Run(); err != nil {
		return err
	}
	creds, err := os.ReadFile(filepath.Join(b.root, ".dev", b.cluster+"-s3", "credentials"))
	if err != nil {
		return err
	}
	vals := map[string]string{}
	for _, line := range strings.Split(string(creds), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			vals[k] = v
		}
	}
	if err := b.c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "trellis-system", Name: "s3"},
		Data:       map[string][]byte{"accessKeyID": []byte(vals["AWS_ACCESS_KEY_ID"]), "secretAccessKey": []byte(vals["AWS_SECRET_ACCESS_KEY"])},
	}); err != nil {
		return err
	}
	b.s3Port = freePort()
	if out, err := exec.Command(filepath.Join(b.root, "hack", "cluster.sh"), "s3-up", b.cluster, strconv.Itoa(b.s3Port)).CombinedOutput(); err != nil {
		return fmt.Errorf("versitygw: %w %s", err, out)
	}
	return nil
}

// ---- MarkdownViews -------------------------------------------------------

func (b *bench) markdownViewScenarios() error {
	ctx := context.Background()
	n := b.cfg.markdownViews

	// Floor: the same children, created directly, until every Deployment is Available.
	log("floor: %d ConfigMaps + Deployments + Services created directly", n)
	start := time.Now()
	if err := parallel(n, b.cfg.workers, func(i int) error { return b.createFloorViewer(ctx, i) }); err != nil {
		return err
	}
	if err := waitFor(30*time.Minute, func() (bool, error) { return b.deploymentsAvailable(ctx, "floor-mv", n) }); err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	floor := time.Since(start)
	log("floor: %s", floor)

	writesBefore, err := b.mgr.writes()
	if err != nil {
		return err
	}
	log("trellis: %d MarkdownViews", n)
	start = time.Now()
	if err := parallel(n, b.cfg.workers, func(i int) error { return b.c.Create(ctx, markdownView(i)) }); err != nil {
		return err
	}
	if err := waitFor(30*time.Minute, func() (bool, error) { return b.markdownViewsReady(ctx, n) }); err != nil {
		return fmt.Errorf("trellis: %w", err)
	}
	took := time.Since(start)
	log("trellis: %s (floor %s)", took, floor)
	b.add(row{Scenario: fmt.Sprintf("%d MarkdownViews created at once", n), Figure: "time until all Ready", Value: took.Seconds(), Unit: "s",
		Floor: floor.Seconds(), Ratio: took.Seconds() / floor.Seconds(), Target: "≤ 1.15× floor", Met: took.Seconds() <= 1.15*floor.Seconds()})

	// Let the last status writes land, then count.
	time.Sleep(3 * time.Second)
	writesAfter, err := b.mgr.writes()
	if err != nil {
		return err
	}
	perObject := (writesAfter.total() - writesBefore.total()) / float64(n)
	log("writes by resource: %s", writesAfter.minus(writesBefore))
	noEvents := (writesAfter.withoutEvents() - writesBefore.withoutEvents()) / float64(n)
	b.add(row{Scenario: "same", Figure: "API writes per object to converge (all)", Value: perObject, Unit: "writes",
		Target: "= 5 (design minimum, docs/markdownview.md) + 1 Event", Met: perObject <= 6.05})
	b.add(row{Scenario: "same", Figure: "API writes per object, Events excluded", Value: noEvents, Unit: "writes",
		Target: "= 5, ≤ 5", Met: noEvents <= 5.05})

	// Quiet window: nothing changes, nothing is written.
	log("quiet window %s", b.cfg.quiet)
	before, _ := b.mgr.writes()
	time.Sleep(b.cfg.quiet)
	after, _ := b.mgr.writes()
	quiet := after.total() - before.total()
	b.add(row{Scenario: "same, converged", Figure: fmt.Sprintf("writes in a %s quiet window", b.cfg.quiet), Value: quiet, Unit: "writes", Target: "0", Met: quiet == 0})

	// Restart: caches sync, every object is reconciled again, nothing is written.
	log("restarting the manager")
	b.mgr.stop()
	start = time.Now()
	if err := b.startManager(); err != nil {
		return err
	}
	if err := waitFor(10*time.Minute, func() (bool, error) {
		r, err := b.mgr.reconciles("markdownview")
		return r >= float64(n), err
	}); err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	restart := time.Since(start)
	time.Sleep(2 * time.Second)
	w, _ := b.mgr.writes()
	b.add(row{Scenario: "same, manager restarted", Figure: "time until synced and all re-reconciled", Value: restart.Seconds(), Unit: "s", Target: "report", Met: true})
	b.add(row{Scenario: "same, manager restarted", Figure: "writes after restart", Value: w.total(), Unit: "writes", Target: "0", Met: w.total() == 0})

	// Edit latency: one MarkdownView edited while all exist.
	lat := make([]float64, 0, b.cfg.edits)
	for i := range b.cfg.edits {
		want := fmt.Sprintf("# Edit %d %d\n", i, time.Now().UnixNano())
		mv := &viewv1.MarkdownView{}
		if err := b.c.Get(ctx, client.ObjectKey{Namespace: "mv", Name: "mv-0"}, mv); err != nil {
			return err
		}
		patch := client.MergeFrom(mv.DeepCopy())
		mv.Spec.Markdowns["index.md"] = viewv1.MarkdownText(want)
		start := time.Now()
		if err := b.c.Patch(ctx, mv, patch); err != nil {
			return err
		}
		if err := waitFor(time.Minute, func() (bool, error) {
			cm := &corev1.ConfigMap{}
			err := b.c.Get(ctx, client.ObjectKey{Namespace: "mv", Name: "markdowns-mv-0"}, cm)
			return err == nil && cm.Data["index.md"] == want, client.IgnoreNotFound(err)
		}, 5*time.Millisecond); err != nil {
			return fmt.Errorf("edit %d: %w", i, err)
		}
		lat = append(lat, time.Since(start).Seconds()*1000)
	}
	sort.Float64s(lat)
	b.add(row{Scenario: fmt.Sprintf("one MarkdownView edited while %d exist", n), Figure: fmt.Sprintf("edit live in ConfigMap, p50 over %d edits", len(lat)), Value: percentile(lat, 50), Unit: "ms", Target: "report", Met: true})
	b.add(row{Scenario: "same", Figure: "p99", Value: percentile(lat, 99), Unit: "ms", Target: "report", Met: true})
	return nil
}

func markdownView(i int) *viewv1.MarkdownView {
	return &viewv1.MarkdownView{
		ObjectMeta: metav1.ObjectMeta{Namespace: "mv", Name: fmt.Sprintf("mv-%d", i)},
		Spec: viewv1.MarkdownViewSpec{Markdowns: map[string]viewv1.MarkdownText{
			"SUMMARY.md": "# Summary\n- [Index](index.md)\n", "index.md": viewv1.MarkdownText(fmt.Sprintf("# Page %d\n", i)),
		}},
	}
}

// createFloorViewer creates what a MarkdownView would get, without Trellis.
func (b *bench) createFloorViewer(ctx context.Context, i int) error {
	name := fmt.Sprintf("viewer-%d", i)
	labels := map[string]string{"app": name}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "floor-mv", Name: "markdowns-" + name},
		Data: map[string]string{"SUMMARY.md": "# Summary\n- [Index](index.md)\n", "index.md": fmt.Sprintf("# Page %d\n", i)}}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "floor-mv", Name: name}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "viewer", Image: "trellis-viewer:dev", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}},
		}}}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "floor-mv", Name: name}, Spec: corev1.ServiceSpec{
		Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromString("http")}}}}
	for _, o := range []client.Object{cm, d, svc} {
		if err := b.c.Create(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) deploymentsAvailable(ctx context.Context, ns string, n int) (bool, error) {
	list := &appsv1.DeploymentList{}
	if err := b.c.List(ctx, list, client.InNamespace(ns)); err != nil {
		return false, err
	}
	ok := 0
	for _, d := range list.Items {
		if d.Status.AvailableReplicas >= 1 {
			ok++
		}
	}
	return ok >= n, nil
}

func (b *bench) markdownViewsReady(ctx context.Context, n int) (bool, error) {
	list := &viewv1.MarkdownViewList{}
	if err := b.c.List(ctx, list, client.InNamespace("mv")); err != nil {
		return false, err
	}
	ok := 0
	for _, mv := range list.Items {
		if meta.IsStatusConditionTrue(mv.Status.Conditions, conditions.Ready) {
			ok++
		}
	}
	return ok >= n, nil
}

// ---- Tenants ---------------------------------------------------------------

func (b *bench) tenantScenario() error {
	ctx := context.Background()
	n := b.cfg.tenants
	log("floor: %d × 3 namespaces + RoleBindings created directly", n)
	start := time.Now()
	if err := parallel(n, b.cfg.workers, func(i int) error {
		for _, env := range []string{"dev", "stg", "prod"} {
			ns := fmt.Sprintf("floor-t%d-%s", i, env)
			if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				return err
			}
			if err := b.c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-admin"},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
				Subjects: []rbacv1.Subject{{Kind: "Group", Name: fmt.Sprintf("t%d-admins", i), APIGroup: rbacv1.GroupName}}}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	floor := time.Since(start)

	before, _ := b.mgr.writes()
	log("trellis: %d Tenants", n)
	start = time.Now()
	if err := parallel(n, b.cfg.workers, func(i int) error {
		return b.c.Create(ctx, &tenancyv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("t%d", i)}, Spec: tenancyv1.TenantSpec{
			Namespaces: []string{"dev", "stg", "prod"}, NamespacePrefix: ptr.To(fmt.Sprintf("t%d-", i)),
			Admin: tenancyv1.AdminSubject{Kind: "Group", Name: fmt.Sprintf("t%d-admins", i), APIGroup: rbacv1.GroupName}}})
	}); err != nil {
		return err
	}
	if err := waitFor(30*time.Minute, func() (bool, error) {
		list := &tenancyv1.TenantList{}
		if err := b.c.List(ctx, list); err != nil {
			return false, err
		}
		ok := 0
		for _, t := range list.Items {
			if meta.IsStatusConditionTrue(t.Status.Conditions, conditions.Ready) {
				ok++
			}
		}
		return ok >= n, nil
	}); err != nil {
		return fmt.Errorf("tenants: %w", err)
	}
	took := time.Since(start)
	time.Sleep(2 * time.Second)
	after, _ := b.mgr.writes()
	b.add(row{Scenario: fmt.Sprintf("%d Tenants × 3 namespaces", n), Figure: "time until all Ready", Value: took.Seconds(), Unit: "s",
		Floor: floor.Seconds(), Ratio: took.Seconds() / floor.Seconds(), Target: "≤ 1.2× floor", Met: took.Seconds() <= 1.2*floor.Seconds()})
	log("writes by resource: %s", after.minus(before))
	perTenant := (after.withoutEvents() - before.withoutEvents()) / float64(n)
	b.add(row{Scenario: "same", Figure: "API writes per tenant (Events excluded)", Value: perTenant, Unit: "writes",
		Target: "= 10 (docs/tenant.md)", Met: perTenant <= 10.05})
	return nil
}

// ---- StorageBuckets --------------------------------------------------------

func (b *bench) bucketScenario() error {
	ctx := context.Background()
	n := b.cfg.buckets
	if err := b.c.Create(ctx, &storagev1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "bench-s3"}, Spec: storagev1.ObjectStoreSpec{
		Endpoint: fmt.Sprintf("http://127.0.0.1:%d", b.s3Port), Region: "us-east-1", PathStyle: ptr.To(true),
		CredentialsSecretRef: storagev1.SecretReference{Namespace: "trellis-system", Name: "s3"}}}); err != nil {
		return err
	}
	log("trellis: %d StorageBuckets, interval %s", n, b.cfg.bucketInterval)
	if err := parallel(n, b.cfg.workers, func(i int) error {
		return b.c.Create(ctx, &storagev1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: "buckets", Name: fmt.Sprintf("b%d", i)},
			Spec: storagev1.StorageBucketSpec{StoreRef: storagev1.StoreReference{Name: "bench-s3"},
				HealthCheck: &storagev1.HealthCheck{IntervalSeconds: int32(b.cfg.bucketInterval / time.Second)}}})
	}); err != nil {
		return err
	}
	if err := waitFor(30*time.Minute, func() (bool, error) {
		list := &storagev1.StorageBucketList{}
		if err := b.c.List(ctx, list, client.InNamespace("buckets")); err != nil {
			return false, err
		}
		ok := 0
		for _, sb := range list.Items {
			if meta.IsStatusConditionTrue(sb.Status.Conditions, conditions.Ready) {
				ok++
			}
		}
		return ok >= n, nil
	}); err != nil {
		return fmt.Errorf("buckets: %w", err)
	}
	// Let the creation burst pass one interval, then sample checks per second.
	log("sampling bucket checks for %s", b.cfg.bucketWindow)
	time.Sleep(b.cfg.bucketInterval)
	w0, _ := b.mgr.writes()
	perSecond := make([]float64, 0, int(b.cfg.bucketWindow/time.Second))
	prevChecks, prevReqs, err := b.mgr.bucketCounters()
	if err != nil {
		return err
	}
	firstChecks, firstReqs := prevChecks, prevReqs
	tick := time.NewTicker(time.Second)
	for range int(b.cfg.bucketWindow / time.Second) {
		<-tick.C
		c, _, err := b.mgr.bucketCounters()
		if err != nil {
			return err
		}
		perSecond = append(perSecond, c-prevChecks)
		prevChecks = c
	}
	tick.Stop()
	lastChecks, lastReqs, _ := b.mgr.bucketCounters()
	w1, _ := b.mgr.writes()
	checks := lastChecks - firstChecks
	mean := float64(n) / b.cfg.bucketInterval.Seconds()
	maxPerSecond := 0.0
	for _, v := range perSecond {
		maxPerSecond = math.Max(maxPerSecond, v)
	}
	reqPerCheck := (lastReqs - firstReqs) / math.Max(checks, 1)
	b.add(row{Scenario: fmt.Sprintf("%d StorageBuckets, interval %s", n, b.cfg.bucketInterval), Figure: "S3 requests per check", Value: reqPerCheck, Unit: "requests", Target: "1", Met: math.Abs(reqPerCheck-1) < 0.01})
	b.add(row{Scenario: "same", Figure: "checks per second (mean over window)", Value: checks / b.cfg.bucketWindow.Seconds(), Unit: "checks/s", Floor: mean, Ratio: checks / b.cfg.bucketWindow.Seconds() / mean, Target: "≈ N/T", Met: true})
	b.add(row{Scenario: "same", Figure: "max checks in any 1 s window", Value: maxPerSecond, Unit: "checks", Floor: mean, Ratio: maxPerSecond / mean, Target: "≤ 2× N/T", Met: maxPerSecond <= 2*mean})
	b.add(row{Scenario: "same", Figure: "API writes during the window", Value: w1.total() - w0.total(), Unit: "writes", Target: "0", Met: w1.total() == w0.total()})
	return nil
}

// ---- Memory ----------------------------------------------------------------

// memoryScenario compares the manager's peak RSS after a restart with all the
// objects above, with and without many unrelated ConfigMaps and Secrets.
func (b *bench) memoryScenario() error {
	ctx := context.Background()
	// Peak RSS after a restart, median of three restarts (one is noisy).
	rss := func() (float64, error) {
		var samples []float64
		for range 3 {
			b.mgr.stop()
			if err := b.startManager(); err != nil {
				return 0, err
			}
			if err := waitFor(10*time.Minute, func() (bool, error) {
				r, err := b.mgr.reconciles("markdownview")
				return r >= float64(b.cfg.markdownViews), err
			}); err != nil {
				return 0, err
			}
			time.Sleep(3 * time.Second)
			v, err := b.mgr.peakRSS()
			if err != nil {
				return 0, err
			}
			samples = append(samples, v)
		}
		sort.Float64s(samples)
		log("peak RSS samples (MiB): %.1f %.1f %.1f", samples[0]/(1<<20), samples[1]/(1<<20), samples[2]/(1<<20))
		return samples[1], nil
	}
	without, err := rss()
	if err != nil {
		return err
	}
	log("creating %d unrelated ConfigMaps and Secrets of 2 KiB", b.cfg.unrelated)
	payload := strings.Repeat("x", 2048)
	if err := parallel(b.cfg.unrelated, b.cfg.workers, func(i int) error {
		if i%2 == 0 {
			return b.c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "unrelated", Name: fmt.Sprintf("cm-%d", i)}, Data: map[string]string{"data": payload}})
		}
		return b.c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "unrelated", Name: fmt.Sprintf("s-%d", i)}, Data: map[string][]byte{"data": []byte(payload)}})
	}); err != nil {
		return err
	}
	with, err := rss()
	if err != nil {
		return err
	}
	b.add(row{Scenario: fmt.Sprintf("all of the above + %d unrelated ConfigMaps/Secrets (2 KiB)", b.cfg.unrelated), Figure: "manager peak RSS after restart (median of 3)",
		Value: with / (1 << 20), Unit: "MiB", Floor: without / (1 << 20), Ratio: with / without, Target: "≤ 1.10× without", Met: with <= 1.10*without})
	return nil
}

// ---- manager process and its metrics ----------------------------------------

type managerProc struct {
	cmd         *exec.Cmd
	metricsAddr string
	probeAddr   string
}

func (b *bench) startManager() error {
	m := &managerProc{metricsAddr: freeAddr(), probeAddr: freeAddr()}
	logFile, err := os.Create(filepath.Join(b.root, ".dev", b.cluster+"-manager.log"))
	if err != nil {
		return err
	}
	args := []string{"--kubeconfig", b.kubeconfig, "--namespace", "trellis-system",
		"--metrics-bind-address", m.metricsAddr, "--metrics-secure=false", "--health-probe-bind-address", m.probeAddr,
		"--zap-log-level", "error"}
	args = append(args, strings.Fields(b.cfg.managerArgs)...)
	m.cmd = exec.Command(filepath.Join(b.bin, "manager"), args...)
	m.cmd.Stdout, m.cmd.Stderr = logFile, logFile
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := m.cmd.Start(); err != nil {
		return err
	}
	b.mgr = m
	return waitFor(2*time.Minute, func() (bool, error) {
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

// peakRSS reads VmHWM, the process' high-water mark of resident memory.
func (m *managerProc) peakRSS() (float64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", m.cmd.Process.Pid))
	if err != nil {
		return 0, err
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmHWM")
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

func (m *managerProc) reconciles(controller string) (float64, error) {
	fams, err := m.scrape()
	if err != nil {
		return 0, err
	}
	return sumCounter(fams, "controller_runtime_reconcile_total", map[string]string{"controller": controller}), nil
}

func (m *managerProc) bucketCounters() (checks, requests float64, err error) {
	fams, err := m.scrape()
	if err != nil {
		return 0, 0, err
	}
	return sumCounter(fams, "trellis_storagebucket_checks_total", nil), sumCounter(fams, "trellis_objectstore_requests_total", nil), nil
}

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
		total += metric.GetCounter().GetValue()
	}
	return total
}

// ---- helpers ---------------------------------------------------------------

func (b *bench) add(r row) {
	if r.Ratio != 0 {
		r.Ratio = math.Round(r.Ratio*100) / 100
	}
	b.rows = append(b.rows, r)
	log("%s | %s: %.2f %s", r.Scenario, r.Figure, r.Value, r.Unit)
}

func (b *bench) report() error {
	fmt.Printf("\n%-58s | %-46s | %10s | %8s | %6s | %-28s | %s\n", "scenario", "figure", "value", "floor", "ratio", "target", "met")
	fmt.Println(strings.Repeat("-", 190))
	for _, r := range b.rows {
		floor, ratio := "", ""
		if r.Floor != 0 {
			floor = fmt.Sprintf("%.2f", r.Floor)
		}
		if r.Ratio != 0 {
			ratio = fmt.Sprintf("%.2f", r.Ratio)
		}
		met := "yes"
		if !r.Met {
			met = "NO"
		}
		fmt.Printf("%-58s | %-46s | %7.2f %-2s | %8s | %6s | %-28s | %s\n", r.Scenario, r.Figure, r.Value, unitShort(r.Unit), floor, ratio, r.Target, met)
	}
	if err := os.MkdirAll(b.cfg.out, 0o755); err != nil {
		return err
	}
	path := filepath.Join(b.cfg.out, time.Now().UTC().Format("20060102-150405")+".json")
	data, _ := json.MarshalIndent(map[string]any{"config": fmt.Sprintf("%+v", b.cfg), "results": b.rows}, "", "  ")
	log("results written to %s", path)
	return os.WriteFile(path, data, 0o644)
}

func unitShort(u string) string {
	if len(u) > 2 {
		return u[:2]
	}
	return u
}

func percentile(sorted []float64, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// parallel runs f(0..n-1) on workers goroutines; the first error wins.
func parallel(n, workers int, f func(int) error) error {
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := f(i); err != nil && !apierrors.IsAlreadyExists(err) {
					once.Do(func() { first = err })
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}

func waitFor(timeout time.Duration, cond func() (bool, error), every ...time.Duration) error {
	poll := 500 * time.Millisecond
	if len(every) > 0 {
		poll = every[0]
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ok, err := cond()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		time.Sleep(poll)
	}
	return fmt.Errorf("timed out after %s", timeout)
}

func (b *bench) kubectlIn(stdin []byte, args ...string) error {
	cmd := exec.Command(filepath.Join(b.bin, "kubectl"), append([]string{"--kubeconfig", b.kubeconfig}, args...)...)
	if stdin != nil {
		cmd.Stdin = strings.NewReader(string(stdin))
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

func freeAddr() string { return fmt.Sprintf("127.0.0.1:%d", freePort()) }

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

func exitStderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
