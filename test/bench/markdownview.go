package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/controller-runtime/pkg/client"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/controller/view"
	"github.com/trellis-dev/trellis/internal/manager"
)

// The MarkdownView scenarios: N views created at once against a floor that
// creates the same children directly; writes per view; a quiet window; a
// restart; edit latency.

// convergence is one size's times, for the chart.
type convergence struct {
	Views   int     `json:"views"`
	Floor   float64 `json:"floorSeconds"`
	Trellis float64 `json:"trellisSeconds"`
}

// runCost is what one convergence run cost: its time, the API writes of whoever
// created the objects, and the CPU seconds of every process.
type runCost struct {
	took   time.Duration
	writes writeCounts
	cpu    cpuSample
	// requests is every request of the manager by verb and resource, for
	// the log (Tenant runs only).
	requests writeCounts
}

func (b *bench) markdownViewScenarios() error {
	ctx := context.Background()
	for _, n := range b.cfg.viewSizes {
		floor, trellis, err := b.convergeViews(ctx, n)
		if err != nil {
			return err
		}
		b.points = append(b.points, convergence{Views: n, Floor: floor.took.Seconds(), Trellis: trellis.took.Seconds()})
		scenario := fmt.Sprintf("%d MarkdownViews created at once", n)
		b.add(row{Scenario: scenario, Figure: "time until all Ready (floor: all Available)", Value: trellis.took.Seconds(), Unit: "s",
			Floor: floor.took.Seconds(), Ratio: trellis.took.Seconds() / floor.took.Seconds(), Target: "≤ 1.5× floor",
			Met: trellis.took.Seconds() <= 1.5*floor.took.Seconds()})
		b.add(row{Scenario: "same", Figure: "kube-apiserver CPU", Value: trellis.cpu["kube-apiserver"], Unit: "s",
			Floor: floor.cpu["kube-apiserver"], Ratio: trellis.cpu["kube-apiserver"] / floor.cpu["kube-apiserver"], Target: "≤ 1.5× floor",
			Met: trellis.cpu["kube-apiserver"] <= 1.5*floor.cpu["kube-apiserver"]})
		b.add(row{Scenario: "same", Figure: "etcd CPU", Value: trellis.cpu["etcd"], Unit: "s",
			Floor: floor.cpu["etcd"], Ratio: trellis.cpu["etcd"] / floor.cpu["etcd"], Target: "report", Met: true})
		b.add(row{Scenario: "same", Figure: "manager CPU", Value: trellis.cpu["manager"], Unit: "s", Target: "report", Met: true})
		b.add(row{Scenario: "same", Figure: "API writes per view (Events included)", Value: trellis.writes.total() / float64(n), Unit: "writes",
			Floor: floor.writes.total() / float64(n), Ratio: trellis.writes.total() / floor.writes.total(), Target: "report", Met: true})
		perView := trellis.writes.withoutEvents() / float64(n)
		b.add(row{Scenario: "same", Figure: "API writes per view, Events excluded", Value: perView, Unit: "writes",
			Target: fmt.Sprintf("≤ %d (design minimum, docs/markdownview.md)", viewWritesMinimum), Met: perView <= viewWritesMinimum+0.05})
	}
	n, total := b.cfg.markdownViews, b.totalViews()
	if rss, err := b.mgr.rss(); err == nil {
		log("manager RSS with %d MarkdownViews: %.1f MiB", total, rss/(1<<20))
	}
	// Quiet window: nothing changes, nothing is written.
	log("quiet window %s", b.cfg.quiet)
	before, _ := b.mgr.writes()
	time.Sleep(b.cfg.quiet)
	after, _ := b.mgr.writes()
	quiet := after.total() - before.total()
	b.add(row{Scenario: fmt.Sprintf("all %d MarkdownViews converged", total), Figure: fmt.Sprintf("writes in a %s quiet window", b.cfg.quiet), Value: quiet, Unit: "writes", Target: "0", Met: quiet == 0})

	// Edit latency: one MarkdownView edited while all exist.
	lat := make([]float64, 0, b.cfg.edits)
	for i := range b.cfg.edits {
		want := fmt.Sprintf("# Edit %d %d\n", i, time.Now().UnixNano())
		mv := &viewv1.MarkdownView{}
		if err := b.c.Get(ctx, client.ObjectKey{Namespace: b.viewRun("mv", n).namespace(0), Name: "mv-0"}, mv); err != nil {
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
			err := b.c.Get(ctx, client.ObjectKey{Namespace: b.viewRun("mv", n).namespace(0), Name: "markdowns-mv-0"}, cm)
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

// convergeViews creates n views' children directly (the floor), then n
// MarkdownViews, each until everything is served, in namespaces of their own.
// The floor is measured twice, before and after Trellis, and the mean taken,
// so neither side profits from going first on a fresher cluster. With
// --floor-once (the scale run, to save the time of a third 10,000-view run)
// only the first: the floor then has the emptier cluster, which favours it.
func (b *bench) convergeViews(ctx context.Context, n int) (floor, trellis runCost, err error) {
	first, err := b.floorViews(ctx, n, "floor-a")
	if err != nil {
		return runCost{}, runCost{}, err
	}
	if trellis, err = b.trellisViews(ctx, n); err != nil {
		return runCost{}, runCost{}, err
	}
	if b.cfg.floorOnce {
		return first, trellis, nil
	}
	second, err := b.floorViews(ctx, n, "floor-b")
	if err != nil {
		return runCost{}, runCost{}, err
	}
	log("floor %d views: %s then %s", n, first.took, second.took)
	floor = runCost{took: (first.took + second.took) / 2, writes: writeCounts{}, cpu: cpuSample{}}
	for k := range first.writes {
		floor.writes[k] = (first.writes[k] + second.writes[k]) / 2
	}
	for k := range first.cpu {
		floor.cpu[k] = (first.cpu[k] + second.cpu[k]) / 2
	}
	return floor, trellis, nil
}

// totalViews is how many MarkdownViews the convergence runs leave behind.
func (b *bench) totalViews() int {
	total := 0
	for _, n := range b.cfg.viewSizes {
		total += n
	}
	return total
}

// viewRun is where one convergence run's n views live: the namespace
// <prefix>-<n>, or with --views-per-namespace the namespaces
// <prefix>-<n>-<k> of at most that many views each. Many views in one
// namespace cost the cluster more than the same views spread out (the
// Deployment and EndpointSlice controllers work per namespace), so the
// scale run spreads them, as teams' namespaces would.
type viewRun struct {
	name   string
	n, per int
}

func (b *bench) viewRun(prefix string, n int) viewRun {
	return viewRun{name: fmt.Sprintf("%s-%d", prefix, n), n: n, per: b.cfg.viewsPerNamespace}
}

func (r viewRun) spread() bool { return r.per > 0 && r.per < r.n }

func (r viewRun) namespace(i int) string {
	if !r.spread() {
		return r.name
	}
	return fmt.Sprintf("%s-%d", r.name, i/r.per)
}

func (r viewRun) namespaces() []string {
	if !r.spread() {
		return []string{r.name}
	}
	out := make([]string, 0, (r.n+r.per-1)/r.per)
	for i := 0; i < r.n; i += r.per {
		out = append(out, r.namespace(i))
	}
	return out
}

// createNamespaces creates the run's namespaces.
func (b *bench) createNamespaces(ctx context.Context, r viewRun) error {
	for _, ns := range r.namespaces() {
		if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	return nil
}

// watchScope is how a wait selects the run's objects: one namespace, or all
// namespaces filtered to the run's. labels, if any, select on the server, so
// that a wait on one run's Deployments is not sent every other run's.
func (r viewRun) watchScope(labels client.MatchingLabels) (func(client.Object) bool, []client.ListOption) {
	if !r.spread() {
		return nil, []client.ListOption{client.InNamespace(r.name)}
	}
	var opts []client.ListOption
	if len(labels) > 0 {
		opts = append(opts, labels)
	}
	return func(o client.Object) bool { return strings.HasPrefix(o.GetNamespace(), r.name+"-") }, opts
}

// viewWritesMinimum is what a new MarkdownView needs, Events aside: the
// ConfigMap, Deployment and Service, and one status write (Ready: a rollout
// done within 2 minutes writes no RollingOut before it).
const viewWritesMinimum = 4

// measure runs create, then wait (nil: done once created), which returns
// when the work was done, and says what it cost.
func (b *bench) measure(what string, writes func() writeCounts, create func() error, wait func() (time.Time, error)) (runCost, error) {
	cpu0, err := b.cpu()
	if err != nil {
		return runCost{}, err
	}
	w0 := writes()
	profiled := b.profileAPIServer
	if strings.HasPrefix(what, "trellis") { // every Trellis run is named so
		profiled = b.profileTrellisRun
	}
	defer profiled(what)()
	start := time.Now()
	if err := create(); err != nil {
		return runCost{}, err
	}
	created := time.Since(start)
	end := time.Now()
	if wait != nil {
		if end, err = wait(); err != nil {
			return runCost{}, fmt.Errorf("%s: %w", what, err)
		}
	}
	r := runCost{took: end.Sub(start)}
	log("%s: objects sent in %s", what, created)
	time.Sleep(2 * time.Second) // let the last writes (status, Events) land before counting
	r.writes = writes().sub(w0)
	cpu1, err := b.cpu()
	if err != nil {
		return runCost{}, err
	}
	r.cpu = cpu1.minus(cpu0)
	log("%s: %s, writes %s, CPU %s", what, r.took, r.writes, r.cpu)
	return r, nil
}

func (b *bench) floorViews(ctx context.Context, n int, prefix string) (runCost, error) {
	run := b.viewRun(prefix, n)
	if err := b.createNamespaces(ctx, run); err != nil {
		return runCost{}, err
	}
	return b.measure(fmt.Sprintf("floor %s: %d ConfigMaps + Deployments + Services created directly in %d namespaces", run.name, n, len(run.namespaces())),
		b.floorWrites.counts,
		func() error {
			return parallel(n, b.cfg.workers, func(i int) error { return b.createFloorViewer(ctx, run.namespace(i), i) })
		},
		func() (time.Time, error) { return b.waitDeploymentsAvailable(ctx, run, floorManagedBy) })
}

func (b *bench) trellisViews(ctx context.Context, n int) (runCost, error) {
	run := b.viewRun("mv", n)
	if err := b.createNamespaces(ctx, run); err != nil {
		return runCost{}, err
	}
	before, _ := b.mgr.requests()
	defer func() {
		if after, err := b.mgr.requests(); err == nil {
			log("trellis: %d MarkdownViews: every request: %s", n, after.sub(before))
		}
	}()
	return b.measure(fmt.Sprintf("trellis: %d MarkdownViews in %d namespaces", n, len(run.namespaces())),
		b.managerWrites,
		func() error {
			return parallel(n, b.cfg.workers, func(i int) error { return b.c.Create(ctx, markdownView(run.namespace(i), i)) })
		},
		func() (time.Time, error) { return b.waitMarkdownViewsReady(ctx, run) })
}

// managerWrites is the manager's API writes so far.
func (b *bench) managerWrites() writeCounts {
	w, err := b.mgr.writes()
	if err != nil {
		log("scraping the manager: %v", err)
	}
	return w
}

func markdownView(ns string, i int) *viewv1.MarkdownView {
	return &viewv1.MarkdownView{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("mv-%d", i)},
		Spec: viewv1.MarkdownViewSpec{Markdowns: map[string]viewv1.MarkdownText{
			"SUMMARY.md": "# Summary\n- [Index](index.md)\n", "index.md": viewv1.MarkdownText(fmt.Sprintf("# Page %d\n", i)),
		}},
	}
}

// floorManagedBy is the managed-by label of the floor's objects.
const floorManagedBy = "bench-floor"

// createFloorViewer creates what Trellis writes for a MarkdownView, without
// Trellis: the same ConfigMap, Deployment (pod template included) and
// Service, less the owner references. The managed-by label gets another
// value, so that the manager's cache, which selects on it, leaves the
// floor's objects alone as it would if there were no manager.
func (b *bench) createFloorViewer(ctx context.Context, ns string, i int) error {
	mv := markdownView(ns, i)
	mv.UID = uuid.NewUUID() // as the API server would give it: what tells the viewers' pods apart
	cm, d, svc, err := view.DesiredChildren(mv, manager.NewOptions().ViewerImage)
	if err != nil {
		return err
	}
	for _, o := range []client.Object{cm, d, svc} {
		o.GetLabels()[setup.ManagedByLabel] = floorManagedBy
		if err := b.floor.Create(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// waitDeploymentsAvailable watches the run's Deployments until all are
// available, logging progress on the way. A spread run's are selected by
// their managed-by label, managedBy, and their namespaces.
func (b *bench) waitDeploymentsAvailable(ctx context.Context, run viewRun, managedBy string) (time.Time, error) {
	available := func(o runtime.Object) bool { return o.(*appsv1.Deployment).Status.AvailableReplicas >= 1 }
	in, opts := run.watchScope(client.MatchingLabels{setup.ManagedByLabel: managedBy})
	return watchUntil(ctx, b.wc, &appsv1.DeploymentList{}, in, available, func(seen, ok int) bool {
		b.progress(run.name, seen, ok, run.n)
		return ok >= run.n
	}, waitLimit(run.n), opts...)
}

// waitLimit is how long a run of n views may take before the bench gives
// up: 30 minutes, and more for the scale run's sizes.
func waitLimit(n int) time.Duration {
	return max(30*time.Minute, time.Duration(n)*400*time.Millisecond)
}

// progress logs, once each, when all n Deployments of a run exist and when
// half of them are available: where a run's time goes.
func (b *bench) progress(run string, exist, available, n int) {
	b.progressMu.Lock()
	defer b.progressMu.Unlock()
	if b.progressSeen == nil {
		b.progressSeen = map[string]bool{}
	}
	for what, reached := range map[string]bool{"all Deployments exist": exist >= n, "half the Deployments available": available >= n/2} {
		if key := run + " " + what; reached && !b.progressSeen[key] {
			b.progressSeen[key] = true
			log("%s: %s", run, what)
		}
	}
}

// waitMarkdownViewsReady watches the run's MarkdownViews until all are
// Ready (and their Deployments, for the progress lines).
func (b *bench) waitMarkdownViewsReady(ctx context.Context, run viewRun) (time.Time, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { _, _ = b.waitDeploymentsAvailable(ctx, run, setup.ManagedByValue) }()
	ready := func(o runtime.Object) bool {
		return meta.IsStatusConditionTrue(o.(*viewv1.MarkdownView).Status.Conditions, conditions.Ready)
	}
	in, opts := run.watchScope(nil)
	return watchUntil(ctx, b.wc, &viewv1.MarkdownViewList{}, in, ready, func(_, ok int) bool { return ok >= run.n }, waitLimit(run.n), opts...)
}
