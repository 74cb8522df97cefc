package main

import (
	"context"
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
)

// The MarkdownView scenarios: N views created at once against a floor that
// creates the same children directly; writes per view; a quiet window; a
// restart; edit latency.

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
