package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/shard"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// The shards scenario (make bench-shards): the same MarkdownViews held by
// the shards of a kubernetes-controller-sharding ring (the real sharder,
// bin/sharder) and by one manager with its standby, side by side on one
// cluster. The shards create the views; then both sides start over the
// same views from nothing (killed and started again), are left alone for a
// quiet window, and lose a replica to kill -9. The one manager is the
// floor of the comparison rows: a shard's figure over it is the ratio.

// benchRing is the ControllerRing of the shards scenario.
const benchRing = "trellis-bench"

var benchRingMember = shard.Member{Ring: benchRing}

// replicas are manager processes by name: a ring's shards, or a leader
// and its standby.
type replicas map[string]*managerProc

func (r replicas) names() []string {
	names := make([]string, 0, len(r))
	for n := range r {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// writes is the replicas' API writes so far, summed (Leases aside). A
// replica that cannot be scraped counts as an unknown (NaN) number of
// writes, so that no check for zero writes passes on it.
func (r replicas) writes() writeCounts {
	out := writeCounts{}
	for _, m := range r {
		w, err := m.writes()
		if err != nil {
			log("scraping a replica: %v", err)
			out["unscraped"] = math.NaN()
		}
		for k, v := range w {
			out[k] += v
		}
	}
	return out
}

// reconciles is the MarkdownView reconciles of the replicas since each started.
func (r replicas) reconciles() float64 {
	total := 0.0
	for _, m := range r {
		n, err := m.reconciles("markdownview")
		if err != nil {
			log("scraping a replica: %v", err)
		}
		total += n
	}
	return total
}

// conflicts is the replicas' 409 answers so far, summed.
func (r replicas) conflicts() float64 {
	total := 0.0
	for _, m := range r {
		n, err := m.conflicts()
		if err != nil {
			log("scraping a replica: %v", err)
		}
		total += n
	}
	return total
}

// cpu is the replicas' CPU seconds so far, summed.
func (r replicas) cpu() float64 {
	total := 0.0
	for _, m := range r {
		if v, err := cpuSeconds(m.cmd.Process.Pid); err == nil {
			total += v
		}
	}
	return total
}

// memory is what the replicas hold, in MiB: RSS (with the binary's
// mapped pages) and anonymous RSS (without), each as the largest peak of a
// replica, the largest now and the sum now.
type memory struct {
	peak, largest, total, anonPeak, anonLargest, anonTotal float64
	// heapLargest is the largest Go heap in use of a replica now (what the
	// sharding project's evaluation compares).
	heapLargest float64
}

func (r replicas) memory() (memory, error) {
	var out memory
	for _, m := range r {
		peak, err := m.peakRSS()
		if err != nil {
			return out, err
		}
		now, err := m.rss()
		if err != nil {
			return out, err
		}
		anon, err := m.anon()
		if err != nil {
			return out, err
		}
		const mib = 1 << 20
		out.peak, out.largest, out.total = max(out.peak, peak/mib), max(out.largest, now/mib), out.total+now/mib
		out.anonPeak = max(out.anonPeak, max(float64(m.anonPeak.Load()), anon)/mib)
		out.anonLargest, out.anonTotal = max(out.anonLargest, anon/mib), out.anonTotal+anon/mib
		heap, err := m.gauge("go_memstats_heap_inuse_bytes")
		if err != nil {
			return out, err
		}
		out.heapLargest = max(out.heapLargest, heap/mib)
	}
	return out, nil
}

func (r replicas) stop() {
	for _, m := range r {
		m.stop()
	}
}

// side is what one side of the comparison measured.
type side struct {
	restart, failover               time.Duration
	restartAPIServerCPU, restartCPU float64
	restartWrites, failoverWrites   writeCounts
	failoverConflicts               float64
	quietWrites, quietAfterFailover float64
	started                         memory // after starting over every view
	movedOnFailover                 int
}

func (b *bench) shardsScenario() error {
	if err := testenv.SharderBuilt(); err != nil {
		return err
	}
	ctx := context.Background()
	// The views are the shards' alone, then the one manager's alone: the
	// bench's own manager (other scenarios' objects) stops meanwhile.
	if single := b.mgr; single != nil {
		single.stop()
		b.mgr = nil
		defer func() {
			if err := b.startManager(); err != nil {
				log("starting the manager again: %v", err)
			}
		}()
	}
	sharder, err := testenv.StartSharder(ctx, b.restCfg)
	if err != nil {
		return err
	}
	defer func() { _ = sharder.Stop() }()
	ring, err := b.createRing(ctx)
	if err != nil {
		return fmt.Errorf("%w\nthe sharder's log:\n%s", err, sharder.Log())
	}
	// The ring's webhook configuration goes with it (an owner reference).
	defer func() { _ = b.c.Delete(ctx, ring) }()

	n, count := b.cfg.shardViews, b.cfg.shardCount
	shards := replicas{}
	defer func() { shards.stop() }()
	for i := range count {
		name := fmt.Sprintf("bench-shard-%d", i)
		m, err := b.launchManager(name, "--controller-ring", benchRing, "--pod-name", name)
		if m != nil {
			shards[name] = m
		}
		if err != nil {
			return fmt.Errorf("shard %s: %w", name, err)
		}
	}

	// The shards create the views.
	run := b.viewRun("shard", n)
	if err := b.createNamespaces(ctx, run); err != nil {
		return err
	}
	cpu0, err := b.cpu()
	if err != nil {
		return err
	}
	shardCPU0, w0 := shards.cpu(), shards.writes()
	start := time.Now()
	if err := parallel(n, b.cfg.workers, func(i int) error { return b.c.Create(ctx, markdownView(run.namespace(i), i)) }); err != nil {
		return err
	}
	end, err := b.waitMarkdownViewsReady(ctx, run)
	if err != nil {
		return fmt.Errorf("%d views on %d shards: %w", n, count, err)
	}
	created := end.Sub(start)
	time.Sleep(2 * time.Second) // the last status writes and Events land
	cpu1, err := b.cpu()
	if err != nil {
		return err
	}
	createWrites := shards.writes().sub(w0)
	createMem, err := shards.memory()
	if err != nil {
		return err
	}
	held, err := b.heldByShard(ctx, shards.names())
	if err != nil {
		return err
	}
	log("shards: %d views Ready in %s; held %v; writes %s", n, created, held, createWrites)
	scenario := fmt.Sprintf("%d MarkdownViews created at once on %d shards", n, count)
	b.add(row{Scenario: scenario, Figure: "time until all Ready", Value: created.Seconds(), Unit: "s", Target: "report", Met: true})
	b.add(row{Scenario: "same", Figure: "kube-apiserver CPU", Value: cpu1.minus(cpu0)["kube-apiserver"], Unit: "s", Target: "report", Met: true})
	b.add(row{Scenario: "same", Figure: "shards' CPU, all together", Value: shards.cpu() - shardCPU0, Unit: "s", Target: "report", Met: true})
	perView := createWrites.withoutEvents() / float64(n)
	// As on one manager: 4, and 5 for a view Ready after its first
	// status' two minutes (docs/markdownview.md), which at scale is many.
	b.add(row{Scenario: "same", Figure: "API writes per view, Events excluded", Value: perView, Unit: "writes",
		Target: fmt.Sprintf("%d to %d", viewWritesMinimum, viewWritesMinimum+1), Met: perView >= viewWritesMinimum && perView <= viewWritesMinimum+1})
	least, most := spread(held)
	b.add(row{Scenario: "same", Figure: "views on the fullest shard", Value: float64(most), Unit: "views", Target: "report", Met: true})
	b.add(row{Scenario: "same", Figure: "views on the emptiest shard", Value: float64(least), Unit: "views", Target: "report", Met: true})
	b.add(row{Scenario: "same", Figure: "peak RSS of a shard while creating", Value: createMem.peak, Unit: "MiB", Target: "report", Met: true})
	b.add(row{Scenario: "same", Figure: "peak anonymous RSS of a shard while creating", Value: createMem.anonPeak, Unit: "MiB", Target: "report", Met: true})

	if pid := sharder.Pid(); pid != 0 {
		rss, _ := procStatus(pid, "VmHWM:")
		cpu, _ := cpuSeconds(pid)
		b.add(row{Scenario: "same", Figure: "the sharder's peak RSS", Value: rss / (1 << 20), Unit: "MiB", Target: "report", Met: true})
		b.add(row{Scenario: "same", Figure: "the sharder's CPU since it started", Value: cpu, Unit: "s", Target: "report", Met: true})
	}
	total, err := b.viewCount(ctx)
	if err != nil {
		return err
	}
	var sharded side
	if err := b.restartShards(ctx, shards, held, &sharded); err != nil {
		return err
	}
	if err := b.failOverShards(ctx, shards, held, total, &sharded); err != nil {
		return err
	}
	// The sharder stops first: stopping the shards would have it move their
	// views from one to the next while one manager starts over them.
	if err := sharder.Stop(); err != nil {
		return err
	}
	shards.stop()

	var one side
	if err := b.singleSide(ctx, total, &one); err != nil {
		return err
	}
	b.compareSides(total, count, sharded, one)
	// Writes where nothing changed are a fault at any size, the smoke
	// run's too; the other targets are figures.
	for _, w := range []struct {
		what string
		n    float64
	}{{"shards started over their views", sharded.restartWrites.withoutEvents()}, {"shards left alone", sharded.quietWrites},
		{"shards left alone after the failover", sharded.quietAfterFailover}, {"one manager started over the views", one.restartWrites.withoutEvents()},
		{"one manager left alone", one.quietWrites}, {"the standby left alone after the failover", one.quietAfterFailover}} {
		if w.n != 0 {
			err = errors.Join(err, fmt.Errorf("%s: %g writes, where nothing changed", w.what, w.n))
		}
	}
	if err != nil {
		return errors.Join(err, b.save())
	}
	return nil
}

// createRing creates the ControllerRing of MarkdownViews and their
// children and waits until the sharder has made it Ready.
func (b *bench) createRing(ctx context.Context) (*unstructured.Unstructured, error) {
	ring := testenv.ViewRing(benchRing)
	if err := b.c.Create(ctx, ring); err != nil {
		return nil, fmt.Errorf("ControllerRing: %w", err)
	}
	return ring, waitFor(time.Minute, func() (bool, error) {
		if err := b.c.Get(ctx, client.ObjectKeyFromObject(ring), ring); err != nil {
			return false, err
		}
		conds, _, _ := unstructured.NestedSlice(ring.Object, "status", "conditions")
		for _, c := range conds {
			if c, ok := c.(map[string]any); ok && c["type"] == "Ready" && c["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
}

// heldByShard counts the views the sharder assigned to each shard.
func (b *bench) heldByShard(ctx context.Context, names []string) (map[string]int, error) {
	held := map[string]int{}
	for _, name := range names {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(viewv1.GroupVersion.WithKind("MarkdownViewList"))
		if err := b.c.List(ctx, list, client.MatchingLabels{benchRingMember.ShardLabel(): name}); err != nil {
			return nil, err
		}
		held[name] = len(list.Items)
	}
	return held, nil
}

// viewCount is the number of MarkdownViews in the cluster: every one of
// them is a replica's to reconcile.
func (b *bench) viewCount(ctx context.Context) (int, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(viewv1.GroupVersion.WithKind("MarkdownViewList"))
	if err := b.c.List(ctx, list); err != nil {
		return 0, err
	}
	return len(list.Items), nil
}

func spread(held map[string]int) (least, most int) {
	first := true
	for _, n := range held {
		if first || n < least {
			least = n
		}
		most = max(most, n)
		first = false
	}
	return least, most
}

// restartShards kills every shard and starts it again under the same name,
// as a container restarted in its pod: it takes its own Lease back at
// once, so the sharder moves nothing, and each shard lists and reconciles
// its views from nothing.
func (b *bench) restartShards(ctx context.Context, shards replicas, held map[string]int, s *side) error {
	for _, m := range shards {
		m.kill()
	}
	cpu0, err := b.cpu()
	if err != nil {
		return err
	}
	start := time.Now()
	for _, name := range shards.names() {
		m, err := b.launchManager(name, "--controller-ring", benchRing, "--pod-name", name)
		if m != nil {
			shards[name] = m
		}
		if err != nil {
			return fmt.Errorf("shard %s again: %w", name, err)
		}
	}
	if err := waitFor(30*time.Minute, func() (bool, error) {
		for name, m := range shards {
			if r, err := m.reconciles("markdownview"); err != nil || r < float64(held[name]) {
				return false, err
			}
		}
		return true, nil
	}); err != nil {
		return fmt.Errorf("shards restarted: %w", err)
	}
	s.restart = time.Since(start)
	time.Sleep(3 * time.Second)
	cpu1, err := b.cpu()
	if err != nil {
		return err
	}
	s.restartAPIServerCPU, s.restartCPU = cpu1.minus(cpu0)["kube-apiserver"], shards.cpu()
	s.restartWrites = shards.writes()
	// Restarted under their own names, the shards keep their views.
	again, err := b.heldByShard(ctx, shards.names())
	if err != nil {
		return err
	}
	if !maps.Equal(again, held) {
		return fmt.Errorf("the sharder moved views while the shards restarted: %v, then %v", held, again)
	}
	if err := shardsReportTheirOwn(shards, held); err != nil {
		return err
	}
	if s.started, err = shards.memory(); err != nil {
		return err
	}
	log("shards restarted in %s; writes %s; memory %+v", s.restart, s.restartWrites, s.started)
	s.quietWrites = b.quietWindow(shards)
	return nil
}

// shardsReportTheirOwn checks what the alerts read: each shard says it is
// one (trellis_shard_info), and counts as Ready the views it holds, no
// more, so that summing the shards' series counts each view once. The
// count follows the shard's cache, which may trail its reconciles by a
// moment.
func shardsReportTheirOwn(shards replicas, held map[string]int) error {
	var last error
	err := waitFor(30*time.Second, func() (bool, error) {
		last = nil
		for name, m := range shards {
			fams, err := m.scrape()
			if err != nil {
				return false, err
			}
			if info := sumCounter(fams, "trellis_shard_info", map[string]string{"ring": benchRing, "shard": name}); info != 1 {
				return false, fmt.Errorf("shard %s: trellis_shard_info of its ring is %g, not 1", name, info)
			}
			ready := sumCounter(fams, "trellis_objects", map[string]string{"kind": "MarkdownView", "condition": "Ready"})
			if int(ready) != held[name] {
				last = fmt.Errorf("shard %s counts %g MarkdownViews Ready, and holds %d", name, ready, held[name])
			}
		}
		return last == nil, nil
	})
	if err != nil && last != nil {
		return last
	}
	return err
}

// failOverShards kills one shard and waits until the sharder has moved its
// views to the others and they have reconciled them; then every view must
// be Ready for its generation, and a quiet window must write nothing.
func (b *bench) failOverShards(ctx context.Context, shards replicas, held map[string]int, total int, s *side) error {
	names := shards.names()
	victim := names[len(names)-1]
	shards[victim].kill()
	delete(shards, victim)
	s.movedOnFailover = held[victim]
	r0, w0, c0 := shards.reconciles(), shards.writes(), shards.conflicts()
	start := time.Now()
	if err := waitFor(30*time.Minute, func() (bool, error) {
		left, err := b.heldByShard(ctx, []string{victim})
		if err != nil || left[victim] > 0 {
			return false, err
		}
		return shards.reconciles()-r0 >= float64(s.movedOnFailover), nil
	}); err != nil {
		return fmt.Errorf("failover of %s: %w", victim, err)
	}
	s.failover = time.Since(start)
	s.failoverWrites = shards.writes().sub(w0)
	s.failoverConflicts = shards.conflicts() - c0
	log("shard %s killed: its %d views moved and reconciled in %s (writes %s, of which answered 409: %g)", victim, s.movedOnFailover, s.failover, s.failoverWrites, s.failoverConflicts)
	if err := b.allViewsReady(ctx, total, names[:len(names)-1]); err != nil {
		return fmt.Errorf("after the failover: %w", err)
	}
	s.quietAfterFailover = b.quietWindow(shards)
	return nil
}

// allViewsReady checks that there are total views, each Ready for its
// generation and held by one of live.
func (b *bench) allViewsReady(ctx context.Context, total int, live []string) error {
	list := &viewv1.MarkdownViewList{}
	if err := b.c.List(ctx, list); err != nil {
		return err
	}
	if len(list.Items) != total {
		return fmt.Errorf("%d views, not %d", len(list.Items), total)
	}
	var errs []error
	for i := range list.Items {
		v := &list.Items[i]
		ready := meta.FindStatusCondition(v.Status.Conditions, conditions.Ready)
		switch {
		case live != nil && !slices.Contains(live, v.Labels[benchRingMember.ShardLabel()]):
			errs = append(errs, fmt.Errorf("%s/%s is on shard %q", v.Namespace, v.Name, v.Labels[benchRingMember.ShardLabel()]))
		case ready == nil || ready.Status != metav1.ConditionTrue || v.Status.ObservedGeneration != v.Generation:
			errs = append(errs, fmt.Errorf("%s/%s is not Ready for generation %d", v.Namespace, v.Name, v.Generation))
		}
		if len(errs) >= 10 {
			break
		}
	}
	return errors.Join(errs...)
}

// quietWindow is what the replicas write while nothing changes.
func (b *bench) quietWindow(r replicas) float64 {
	before := r.writes()
	time.Sleep(b.cfg.quiet)
	w := r.writes().sub(before).total()
	log("quiet window %s: %g writes", b.cfg.quiet, w)
	return w
}

// singleSide runs one manager (the MarkdownView controller, as on a shard)
// with leader election over the same views, then its standby, and kills
// the leader.
func (b *bench) singleSide(ctx context.Context, total int, s *side) error {
	args := []string{"--leader-elect", "--controllers", "markdownview", "--leader-election-id", "trellis-bench-single"}
	one := replicas{}
	defer func() { one.stop() }()
	cpu0, err := b.cpu()
	if err != nil {
		return err
	}
	start := time.Now()
	leader, err := b.launchManager("single-leader", args...)
	if leader != nil {
		one["leader"] = leader
	}
	if err != nil {
		return fmt.Errorf("one manager: %w", err)
	}
	if err := waitFor(30*time.Minute, func() (bool, error) {
		r, err := leader.reconciles("markdownview")
		return r >= float64(total), err
	}); err != nil {
		return fmt.Errorf("one manager: %w", err)
	}
	s.restart = time.Since(start)
	time.Sleep(3 * time.Second)
	cpu1, err := b.cpu()
	if err != nil {
		return err
	}
	s.restartAPIServerCPU, s.restartCPU = cpu1.minus(cpu0)["kube-apiserver"], one.cpu()
	s.restartWrites = one.writes()
	if s.started, err = one.memory(); err != nil {
		return err
	}
	log("one manager started over %d views in %s; writes %s; memory %+v", total, s.restart, s.restartWrites, s.started)

	standby, err := b.launchManager("single-standby", args...)
	if standby != nil {
		one["standby"] = standby
	}
	if err != nil {
		return fmt.Errorf("the standby: %w", err)
	}
	s.quietWrites = b.quietWindow(one) // the standby's cache fills meanwhile
	both, err := one.memory()
	if err != nil {
		return err
	}
	s.started.total, s.started.anonTotal = both.total, both.anonTotal
	delete(one, "leader")
	leader.kill()
	w0, c0 := one.writes(), one.conflicts()
	start = time.Now()
	if err := waitFor(30*time.Minute, func() (bool, error) {
		r, err := standby.reconciles("markdownview")
		return r >= float64(total), err
	}); err != nil {
		return fmt.Errorf("the standby after the leader's kill: %w", err)
	}
	s.failover = time.Since(start)
	s.failoverWrites = one.writes().sub(w0)
	s.failoverConflicts = one.conflicts() - c0
	s.movedOnFailover = total
	log("leader killed: the standby reconciled the %d views in %s", total, s.failover)
	if err := b.allViewsReady(ctx, total, nil); err != nil {
		return fmt.Errorf("after the failover: %w", err)
	}
	s.quietAfterFailover = b.quietWindow(one)
	return nil
}

// compareSides adds the side-by-side rows: the shards' figure, with the
// one manager's as the floor.
func (b *bench) compareSides(total, count int, sh, one side) {
	scenario := fmt.Sprintf("%d views: %d shards (floor: one manager + standby)", total, count)
	cmp := func(figure string, v, floor float64, unit, target string, met bool) {
		b.add(row{Scenario: scenario, Figure: figure, Value: v, Floor: floor, Ratio: v / floor, Unit: unit, Target: target, Met: met})
		scenario = "same"
	}
	ratio := func(a, b float64) bool { return a <= 0.40*b }
	sm, om := sh.started, one.started
	cmp("peak RSS of a replica, started over all views", sm.peak, om.peak, "MiB", "≤ 0.40× one manager", ratio(sm.peak, om.peak))
	cmp("RSS of the largest replica, after", sm.largest, om.largest, "MiB", "≤ 0.40× one manager", ratio(sm.largest, om.largest))
	cmp("RSS of all replicas together (one manager: with its standby)", sm.total, om.total, "MiB", "report", true)
	cmp("peak anonymous RSS of a replica (RSS less the binary's pages)", sm.anonPeak, om.anonPeak, "MiB", "≤ 0.40× one manager", ratio(sm.anonPeak, om.anonPeak))
	cmp("anonymous RSS of the largest replica, after", sm.anonLargest, om.anonLargest, "MiB", "≤ 0.40× one manager", ratio(sm.anonLargest, om.anonLargest))
	cmp("anonymous RSS of all replicas together", sm.anonTotal, om.anonTotal, "MiB", "report", true)
	cmp("Go heap in use of the largest replica, after", sm.heapLargest, om.heapLargest, "MiB", "report", true)
	cmp("time until every view reconciled again", sh.restart.Seconds(), one.restart.Seconds(), "s", "report", true)
	cmp("kube-apiserver CPU meanwhile", sh.restartAPIServerCPU, one.restartAPIServerCPU, "s", "report", true)
	cmp("replicas' CPU meanwhile", sh.restartCPU, one.restartCPU, "s", "report", true)
	cmp("API writes meanwhile, Events excluded", sh.restartWrites.withoutEvents(), one.restartWrites.withoutEvents(), "writes", "0",
		sh.restartWrites.withoutEvents() == 0 && one.restartWrites.withoutEvents() == 0)
	cmp(fmt.Sprintf("writes in a %s quiet window", b.cfg.quiet), sh.quietWrites, one.quietWrites, "writes", "0", sh.quietWrites == 0 && one.quietWrites == 0)
	cmp("kill -9 of a replica: until its views are reconciled elsewhere", sh.failover.Seconds(), one.failover.Seconds(), "s", "report", true)
	cmp("views that moved", float64(sh.movedOnFailover), float64(one.movedOnFailover), "views", "report", true)
	cmp("API writes meanwhile", sh.failoverWrites.total(), one.failoverWrites.total(), "writes", "report", true)
	cmp("of which answered 409 (AlreadyExists: nothing written)", sh.failoverConflicts, one.failoverConflicts, "writes", "report", true)
	cmp(fmt.Sprintf("writes in a %s quiet window after it", b.cfg.quiet), sh.quietAfterFailover, one.quietAfterFailover, "writes", "0",
		sh.quietAfterFailover == 0 && one.quietAfterFailover == 0)
}
