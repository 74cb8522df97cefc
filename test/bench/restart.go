package main

import (
	"fmt"
	"time"
)

// The restart scenario: the manager is restarted with every object of the
// earlier scenarios in the cluster; how long until all are reconciled again,
// what that writes (nothing), and the manager's memory per object.

func (b *bench) restartScenario() error {
	want := b.objectsLeft(b.bucketsLeft())
	objects := want["markdownview"] + want["tenant"] + want["storagebucket"]
	// What the status patcher saved while the scenarios before ran (since
	// the manager's last start): the restart zeroes the counters.
	sent, saved, err := b.mgr.statusWrites()
	if err != nil {
		return err
	}
	b.add(row{Scenario: "the scenarios before, since the manager's last start", Figure: "status writes sent", Value: sent, Unit: "writes", Target: "report", Met: true})
	b.add(row{Scenario: "same", Figure: "status writes saved (cache behind Trellis' own write)", Value: saved, Unit: "writes", Target: "report", Met: true})
	log("restarting the manager with %d objects", objects)
	took, err := b.restartManager(want)
	if err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	time.Sleep(3 * time.Second)
	w, err := b.mgr.writes()
	if err != nil {
		return err
	}
	peak, err := b.mgr.peakRSS()
	if err != nil {
		return err
	}
	rss, err := b.mgr.rss()
	if err != nil {
		return err
	}
	// After a forced GC, the heap allocated is what the manager keeps.
	if err := b.heapProfile("restart manager heap"); err != nil {
		return err
	}
	live, err := b.mgr.gauge("go_memstats_heap_alloc_bytes")
	if err != nil {
		return err
	}
	scenario := fmt.Sprintf("manager restarted with %d objects (%d views, %d tenants, %d buckets)", objects, want["markdownview"], want["tenant"], want["storagebucket"])
	b.add(row{Scenario: scenario, Figure: "time until synced and every object re-reconciled", Value: took.Seconds(), Unit: "s", Target: "report", Met: true})
	b.add(row{Scenario: "same", Figure: "API writes after restart", Value: w.total(), Unit: "writes", Target: "0", Met: w.total() == 0})
	b.add(row{Scenario: "same", Figure: "manager RSS after the restart (peak)", Value: peak / (1 << 20), Unit: "MiB", Target: "report", Met: true})
	b.add(row{Scenario: "same", Figure: "manager RSS per object", Value: rss / float64(max(objects, 1)) / 1024, Unit: "KiB", Target: "report", Met: true})
	perObject := live / float64(max(objects, 1)) / 1024
	b.add(row{Scenario: "same", Figure: "manager live heap per object (after a GC)", Value: perObject, Unit: "KiB", Target: "≤ 16 KiB", Met: perObject <= 16})
	return nil
}

// objectsLeft is how many objects of each controller the scenarios that
// ran have left in the cluster, with buckets StorageBuckets.
func (b *bench) objectsLeft(buckets int) map[string]int {
	want := map[string]int{"markdownview": 0, "tenant": 0, "storagebucket": buckets}
	if b.ran("markdownview") {
		want["markdownview"] = b.totalViews()
	}
	if b.ran("tenant") {
		want["tenant"] = b.tenantCount()
	}
	return want
}

// restartManager stops the manager, starts it again and waits until every
// controller has reconciled at least want of its objects; it returns the
// time from the stop.
func (b *bench) restartManager(want map[string]int) (time.Duration, error) {
	b.mgr.stop()
	start := time.Now()
	if err := b.startManager(); err != nil {
		return 0, err
	}
	err := b.waitReconciled(want)
	return time.Since(start), err
}

// waitReconciled waits until the manager has reconciled, since it started,
// at least as many objects as want says, by controller.
func (b *bench) waitReconciled(want map[string]int) error {
	return waitFor(30*time.Minute, func() (bool, error) {
		for controller, n := range want {
			r, err := b.mgr.reconciles(controller)
			if err != nil || r < float64(n) {
				return false, err
			}
		}
		return true, nil
	})
}

// ran reports whether a scenario is part of this run.
func (b *bench) ran(scenario string) bool {
	for _, s := range splitList(b.cfg.scenarios) {
		if s == scenario {
			return true
		}
	}
	return false
}
