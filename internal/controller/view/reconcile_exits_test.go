package view

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clientgoac "k8s.io/client-go/applyconfigurations"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gatewayac "sigs.k8s.io/gateway-api/applyconfiguration"
	gatewayv1ac "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/apierr"
	"github.com/trellis-dev/trellis/internal/controller/children"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/controller/status"
	"github.com/trellis-dev/trellis/internal/imagepolicy"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// TestMarkdownViewReconcileExits drives Reconcile through every exit, on
// testenv.Fake (the errors of a row injected by verb and kind) whose cache
// holds labelled children only, MarkdownViews and ConfigMaps trimmed by the
// controller's own transforms, and is as far behind as a row says.
// Each row names the exit and checks the result, the class of the error,
// the status written (Ready's reason, Reconciling or Stalled, the
// observedGeneration), how many status writes and which child writes
// reached the API server, and the Events.
//
// The exits of Reconcile:
//
//	R1 reading the view from the cache fails: the error, nothing written,
//	   nothing forgotten (its metrics kept)
//	R2 the view is not found: nothing, its metrics forgotten
//	R3 the view is being deleted: nothing (its children go with it through
//	   their owner references; Trellis puts no finalizer on a MarkdownView)
//	R4 a child write conflicts: no error, no status written, again at once
//	   and counted in trellis_reconcile_conflicts_total
//	R5 the status write fails: the error (joined to the reconcile's own),
//	   no requeue
//	R6 the end: the status written when it changed, then
//	   a. a child someone else holds: ChildConflict, again in ForeignChildRetry
//	   b. blocked (outcome.Block: an image not allowed, files too large, no
//	      Gateway API, a route its Gateway refused): Stalled, no error
//	   c. refused by the API server (Invalid, Forbidden): ChildRejected,
//	      again in ForeignChildRetry
//	   d. any other error: ReconcileError, the error
//	   e. no error: RollingOut, Ready, or Stalled on what the Deployment
//	      says (ProgressDeadlineExceeded, ReplicaFailure)
//	R7 the view is gone from the API server, or replaced, when its files are
//	   read (errGone): nothing more written. This test found the reconcile
//	   going on there, applying the children of a view that was no more and
//	   writing its status onto its successor.
//
// And the returns of the steps it runs, each of which ends in one of those:
//
//	checkSpec: image not allowed, spec.pod too large, files too large (as the
//	  cache counted them), nil
//	reconcileConfigMap: cache read fails; someone else's in the cache; up to
//	  date by the cache's hashes; files: read fails, gone, replaced; files
//	  too large as read; up to date once the files are read; owner reference
//	  cannot be set; created; create fails (refused, other); AlreadyExists:
//	  re-read fails, someone else's, ours and up to date (this test found it
//	  updated all the same: the hash was taken of the trimmed copy's absent
//	  data), ours and updated; update fails (conflict, invalid, other);
//	  updated
//	reconcileDeployment, reconcileService (side by side; the Deployment's
//	  error wins), reconcileIngress, reconcileHTTPRoute apply: ApplyOwned's
//	  cache read, confirming API read, someone else's, extract fails, unchanged,
//	  apply fails (conflict, invalid, forbidden, other), applied
//	removeOwned (Ingress, HTTPRoute no longer asked for): not there, read
//	  fails, someone else's, delete fails (conflict, forbidden, gone, other),
//	  deleted
//	reconcileHTTPRoute: no Gateway API, asked for or not; applied; unchanged
//	  and refused by its Gateway; unchanged and not refused
//
// One return is not reached: desiredDeployment's error, which only a
// toleration, affinity or spread constraint that encoding/json cannot
// round-trip would produce, and typed API values always can.
func TestMarkdownViewReconcileExits(t *testing.T) {
	// A view whose files the cache does not keep: reconciling its ConfigMap
	// reads them from the API server.
	manyFiles := func(mv *viewv1.MarkdownView) {
		for _, name := range []string{"a", "b", "c", "d", "e", "f", "g", "h", "i"} {
			mv.Spec.Markdowns[name+".md"] = viewv1.MarkdownText("# " + name)
		}
	}
	withHost := func(mv *viewv1.MarkdownView) { mv.Spec.Expose.Ingress.Host = "docs.example.com" }
	route := func(mv *viewv1.MarkdownView) { withRoute(mv, "docs.example.com") }
	newText := func(mv *viewv1.MarkdownView) { mv.Spec.Markdowns["index.md"] = "# Handbook, second edition" }
	newSite := []string{"create ConfigMap", "apply Deployment", "apply Service"}
	rejected := rxExit{requeue: true, ready: ReasonChildRejected, also: conditions.Stalled, statusWrites: 1,
		events: []string{"Warning ChildRejected"}}
	conflict := rxExit{requeue: true, ready: ReasonChildConflict, also: conditions.Stalled, statusWrites: 1,
		events: []string{"Warning ChildConflict"}}
	failed := rxExit{err: apierr.Transient, ready: conditions.ReasonReconcileError, also: conditions.Reconciling, statusWrites: 1}
	rollingOut := rxExit{ready: ReasonRollingOut, also: conditions.Reconciling, statusWrites: 1}
	with := func(e rxExit, writes ...string) rxExit { e.writes = writes; return e }
	cases := map[string]struct {
		view     *viewv1.MarkdownView // nil: none
		world    []client.Object
		noRoutes bool // the cluster did not serve HTTPRoutes when the manager started
		// setup runs on the world before the reconcile: earlier reconciles,
		// edits, the failures to inject, the cache's lag.
		setup func(Gomega, *rxFixture, *Reconciler)
		want  rxExit
		check func(Gomega, *rxFixture, *viewv1.MarkdownView, error)
	}{
		// R1–R3
		"R1 reading the view from the cache fails: the error, nothing written, its metrics kept": {
			view: rxView(),
			setup: func(_ Gomega, f *rxFixture, _ *Reconciler) {
				readyGauge.WithLabelValues(rxNS, rxName).Set(1)
				availableGauge.WithLabelValues(rxNS, rxName).Set(1)
				f.Fail(testenv.Get, "MarkdownView", rxUnavailable)
			},
			want: rxExit{err: apierr.Transient},
			check: func(g Gomega, _ *rxFixture, _ *viewv1.MarkdownView, _ error) {
				g.Expect(readyGauge.DeleteLabelValues(rxNS, rxName)).To(BeTrue(), "a read that failed is no deletion")
				g.Expect(availableGauge.DeleteLabelValues(rxNS, rxName)).To(BeTrue(), "a read that failed is no deletion")
			},
		},
		"R2 not found: nothing written, its metrics forgotten": {
			setup: func(_ Gomega, _ *rxFixture, _ *Reconciler) { readyGauge.WithLabelValues(rxNS, rxName).Set(1) },
			check: func(g Gomega, _ *rxFixture, _ *viewv1.MarkdownView, _ error) {
				g.Expect(readyGauge.DeleteLabelValues(rxNS, rxName)).To(BeFalse(), "the series was dropped")
			},
		},
		"R3 being deleted: left to the garbage collector, nothing written": {
			view: rxView(func(mv *viewv1.MarkdownView) {
				mv.Finalizers = []string{rxHold}
				mv.DeletionTimestamp = &metav1.Time{Time: time.Now()}
			}),
		},

		// R6e, the way through
		"new: ConfigMap created, Deployment and Service applied, RollingOut": {
			view: rxView(), want: with(rollingOut, newSite...),
			check: func(g Gomega, f *rxFixture, mv *viewv1.MarkdownView, _ error) {
				g.Expect(mv.Status.URL).To(Equal("http://viewer-handbook.docs.svc"))
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: rxNS, Name: "markdowns-handbook"}}
				g.Expect(f.raw.Get(context.Background(), client.ObjectKeyFromObject(cm), cm)).To(Succeed())
				g.Expect(cm.Data).To(Equal(map[string]string{"index.md": "# Handbook"}))
				g.Expect(metav1.IsControlledBy(cm, mv)).To(BeTrue())
			},
		},
		"settled, the Deployment available: Ready": {
			view: rxView(),
			setup: func(g Gomega, f *rxFixture, r *Reconciler) {
				f.settle(g, r)
				f.markAvailable(g)
			},
			want: rxExit{ready: conditions.ReasonReady, statusWrites: 1, events: []string{"Normal Ready"}},
		},
		"settled and Ready, reconciled again: nothing written": {
			view: rxView(withHost, route),
			setup: func(g Gomega, f *rxFixture, r *Reconciler) {
				f.settle(g, r)
				f.markAvailable(g)
				f.settle(g, r)
			},
			want: rxExit{ready: conditions.ReasonReady},
		},
		"settled, the spec changed: the Deployment applied again": {
			view: rxView(),
			setup: func(g Gomega, f *rxFixture, r *Reconciler) {
				f.settle(g, r)
				f.edit(g, func(mv *viewv1.MarkdownView) { mv.Spec.Replicas = 3 })
			},
			want: with(rollingOut, "apply Deployment"),
			check: func(g Gomega, _ *rxFixture, mv *viewv1.MarkdownView, _ error) {
				g.Expect(conditions.Get(mv.Status.Conditions, conditions.Ready).Message).To(ContainSubstring("of 3 viewer replicas"))
			},
		},

		// A new view's first status waits for news (firstStatusWait). rxView
		// has no creationTimestamp, so reads as created long ago; these rows
		// make it young.
		"young, rolling out: the children written, the status held until the grace ends": {
			view: rxView(young), want: rxExit{held: true, writes: newSite},
		},
		"young, held, reconciled again: nothing written, held again": {
			view:  rxView(young),
			setup: func(g Gomega, f *rxFixture, r *Reconciler) { f.settle(g, r) },
			want:  rxExit{held: true},
		},
		"young, the Deployment available: Ready is the first status written": {
			view: rxView(young),
			setup: func(g Gomega, f *rxFixture, r *Reconciler) {
				f.settle(g, r)
				f.markAvailable(g)
			},
			want: rxExit{ready: conditions.ReasonReady, statusWrites: 1, events: []string{"Normal Ready"}},
		},
		"young, an API error: ReconcileError at once": {
			view:  rxView(young),
			setup: func(_ Gomega, f *rxFixture, _ *Reconciler) { f.Fail(testenv.Apply, "Deployment", rxUnavailable) },
			want:  with(failed, "create ConfigMap", "apply Service"),
		},
		"young, the ConfigMap someone else's: ChildConflict at once": {
			view: rxView(young), world: []client.Object{rxTaken(&corev1.ConfigMap{}, "markdowns-handbook", true)},
			want: conflict,
		},
		"young and Ready, the spec changed: RollingOut at once": {
			view: rxView(young),
			setup: func(g Gomega, f *rxFixture, r *Reconciler) {
				f.settle(g, r)
				f.markAvailable(g)
				f.settle(g, r)
				f.edit(g, func(mv *viewv1.MarkdownView) { mv.Spec.Replicas = 3 })
			},
			want: with(rollingOut, "apply Deployment"),
		},

		// checkSpec: R6b
		"image not allowed: ImageNotAllowed, nothing written but the status": {
			view: rxView(func(mv *viewv1.MarkdownView) { mv.Spec.ViewerImage = "evil.example.net/miner:1" }),
			want: rxExit{ready: ReasonImageNotAllowed, also: conditions.Stalled, statusWrites: 1,
				events: []string{"Warning ImageNotAllowed"}},
		},
		"spec.pod too large: PodSettingsTooLarge": {
			view: rxView(func(mv *viewv1.MarkdownView) {
				mv.Spec.Pod.NodeSelector = map[string]viewv1.LabelValue{"big": viewv1.LabelValue(strings.Repeat("x", maxPodSettingsBytes))}
			}),
			want: rxExit{ready: ReasonPodSettingsTooLarge, also: conditions.Stalled, statusWrites: 1,
				events: []string{"Warning PodSettingsTooLarge"}},
		},
		"files too large, as the cache counted them: MarkdownsTooLarge, not read": {
			view: rxView(func(mv *viewv1.MarkdownView) {
				mv.Spec.Markdowns["big.md"] = viewv1.MarkdownText(strings.Repeat("x", maxConfigMapBytes))
			}),
			want: rxExit{ready: ReasonMarkdownsTooLarge, also: conditions.Stalled, statusWrites: 1,
				events: []string{"Warning MarkdownsTooLarge"}},
			check: func(g Gomega, f *rxFixture, _ *viewv1.MarkdownView, _ error) {
				g.Expect(f.APIReads()).NotTo(ContainElement("apiget MarkdownView"))
			},
		},

		// reconcileConfigMap
		"files too large as read, the cache's copy behind: MarkdownsTooLarge": {
			view: rxView(func(mv *viewv1.MarkdownView) {
				mv.Spec.Markdowns["big.md"] = viewv1.MarkdownText(strings.Repeat("x", maxConfigMapBytes))
			}),
			setup: func(_ Gomega, f *rxFixture, _ *Reconciler) {
				f.stale = func(mv *viewv1.MarkdownView) {
					mv.Annotations[cachedContentBytes] = "100"
					mv.Annotations[cachedContentHash] = "before"
				}
			},
			want: rxExit{ready: ReasonMarkdownsTooLarge, also: conditions.Stalled, statusWrites: 1,
				events: []string{"Warning MarkdownsTooLarge"}},
			check: func(g Gomega, f *rxFixture, _ *viewv1.MarkdownView, _ error) {
				g.Expect(f.APIReads()).To(ContainElement("apiget MarkdownView"))
			},
		},
		"ConfigMap up to date, the cache's copy of the view behind: not written": {
			view: rxView(),
			setup: func(g Gomega, f *rxFixture, r *Reconciler) {
				f.settle(g, r)
				f.stale = func(mv *viewv1.MarkdownView) { mv.Annotations[cachedContentHash] = "before" }
			},
			want: rxExit{ready: ReasonRollingOut, also: conditions.Reconciling},
		},
		"reading the ConfigMap from the cache fails: ReconcileError": {
			view:  rxView(),
			setup: func(_ Gomega, f *rxFixture, _ *Reconciler) { f.Fail(testenv.Get, "ConfigMap", rxUnavailable) },
			want:  failed,
		},
		"ConfigMap someone else's, in the cache: ChildConflict": {
			view: rxView(), world: []client.Object{rxTaken(&corev1.ConfigMap{}, "markdowns-handbook", true)},
			want: conflict,
			check: func(g Gomega, _ *rxFixture, mv *viewv1.MarkdownView, _ error) {
				g.Expect(conditions.Get(mv.Status.Conditions, conditions.Ready).Message).To(HavePrefix("ConfigMap markdowns-handbook already exists"))
			},
		},
		"ConfigMap someone else's, outside the cache: the create refused, ChildConflict": {
			view: rxView(), world: []client.Object{rxTaken(&corev1.ConfigMap{}, "markdowns-handbook", false)},
			want: conflict,
		},
		"reading the view's files fails: ReconcileError": {
			view:  rxView(manyFiles),
			setup: func(_ Gomega, f *rxFixture, _ *Reconciler) { f.Fail(testenv.APIGet, "MarkdownView", rxUnavailable) },
			want:  failed,
		},
		"R7 the view gone when its files are read: nothing more written": {
			view:  rxView(manyFiles),
			setup: func(_ Gomega, f *rxFixture, _ *Reconciler) { f.Fail(testenv.APIGet, "MarkdownView", rxGone) },
		},
		"R7 the view replaced when its files are read: its successor's status untouched": {
			view: rxView(manyFiles),
			setup: func(_ Gomega, f *rxFixture, _ *Reconciler) {
				f.stale = func(mv *viewv1.MarkdownView) { mv.UID, mv.Generation = "uid-predecessor", 7 }
			},
		},
		"the ConfigMap's owner reference cannot be set: ReconcileError": {
			view: rxView(),
			setup: func(_ Gomega, _ *rxFixture, r *Reconciler) {
				r.client = rxSchemeless{Client: r.client} // a manager built without the view's types
			},
			want: failed,
		},
		"ConfigMap forbidden by a quota: ChildRejected, with the API server's words": {
			view:  rxView(),
			setup: func(_ Gomega, f *rxFixture, _ *Reconciler) { f.Fail(testenv.Create, "ConfigMap", rxQuota) },
			want:  rejected,
			check: func(g Gomega, _ *rxFixture, mv *viewv1.MarkdownView, _ error) {
				g.Expect(conditions.Get(mv.Status.Conditions, conditions.Ready).Message).To(ContainSubstring("exceeded quota"))
			},
		},
		"creating the ConfigMap fails: ReconcileError": {
			view:  rxView(),
			setup: func(_ Gomega, f *rxFixture, _ *Reconciler) { f.Fail(testenv.Create, "ConfigMap", rxUnavailable) },
			want:  failed,
		},
		"ConfigMap ours, the cache behind, up to date: not written": {
			view: rxView(),
			setup: func(g Gomega, f *rxFixture, r *Reconciler) {
				f.settle(g, r)
				f.unseen["ConfigMap"] = true
			},
			want: rxExit{ready: ReasonRollingOut, also: conditions.Reconciling},
		},
		"ConfigMap ours, the cache behind, files changed: updated": {
			view: rxView(),
			setup: func(g Gomega, f *rxFixture, r *Reconciler) {
				f.settle(g, r)
				f.edit(g, newText)
				f.unseen["ConfigMap"] = true
			},
			want:  with(rollingOut, "update ConfigMap"),
			check: rxHolds("# Handbook, second edition"),
		},
		"ConfigMap there after all, reading it fails: ReconcileError": {
			view: rxView(),
			setup: func(g Gomega, f *rxFixture, r *Reconciler) {
				f.settle(g, r)
				f.edit(g, newText)
				f.unseen["ConfigMap"] = true
				f.Fail(testenv.APIGet, "ConfigMap", rxUnavailable)
			},
			want: failed,
		},
		"files changed: the ConfigMap updated": {
			view: rxView(manyFiles),
			setup: func(g Gomega, f *rxFixture, r *Reconciler) {
				f.settle(g, r)
				f.edit(g, newText)
			},
			want:  with(rollingOut, "update ConfigMap"),
			check: rxHolds("# Handbook, second edition"),
		},
		"R4 the ConfigMap update conflicts: retried at once, no status": {
			view: rxView(),
			setup: func(g Gomega, f *rxFixture, r *Reconciler) {
				f.settle(g, r)
				f.edit(g, newText)
				f.Fail(testenv.Update, "ConfigMap", rxConflict)
			},
			want:  rxExit{err: apierr.Conflict, ready: ReasonRollingOut, also: conditions.Reconciling},
			check: rxHolds("# Handbook"),
		},
		"the ConfigMap update is invalid: ChildRejected": {
			view: rxView(),
			setup: func(g Gomega, f *rxFixture, r *Reconciler) {
				f.settle(g, r)
				f.edit(g, newText)
				f.Fail(testenv.Update, "ConfigMap", rxInvalid)
			},
			want: rejected,
		},
		"the ConfigMap update fails: ReconcileError": {
			view: rxView(),
			setup: func(g Gomega, f *rxFixture, r *Reconciler) {
				f.settle(g, r)
				f.edit(g, newText)
				f.Fail(testenv.Update, "ConfigMap", rxUnavailable)
			},
			want: failed,
		},

		// The Deployment and the Service
		"Deployment someone else's, outside the cache: ChildConflict": {
			view: rxView(), world: []client.Object{rxTaken(&appsv1.Deployment{}, "viewer-handbook", false)},
			want: with(conflict, "create ConfigMap", "apply Service"),
		},
		"Deployment not in the cache, the API read fails: ReconcileError": {
			view:  rxView(),
			setup: func(_ Gomega, f *rxFixture, _ *Reconciler) { f.Fail(testenv.APIGet, "Deployment", rxUnavailable) },
			want:  with(failed, "create ConfigMap", "apply Service"),
		},
		"reading the Deployment from the cache fails: ReconcileError": {
			view:  rxView(),
			setup: func(_ Gomega, f *rxFixture, _ *Reconciler) { f.Fail(testenv.Get, "Deployment", rxUnavailable) },
			want:  with(failed, "create ConfigMap", "apply Service"),
		},
		"the Deployment's applied fields unreadable: ReconcileError": {
			view: rxView(),
			setup: func(g Gomega, f *rxFixture, r *Reconciler) {
				f.settle(g, r)
				f.edit(g, newText)
				f.staleChild = rxUnreadable
			},
			want: with(failed, "update ConfigMap"),
			check: func(g Gomega, _ *rxFixture, _ *viewv1.MarkdownView, err error) {
				g.Expect(err).To(MatchError(ContainSubstring("extracting Deployment viewer-handbook")))
			},
		},
		"R4 the Deployment apply conflicts: retried at once, no status": {
			view:  rxView(),
			setup: func(_ Gomega, f *rxFixture, _ *Reconciler) { f.Fail(testenv.Apply, "Deployment", rxConflict) },
			want:  rxExit{err: apierr.Conflict, writes: []string{"create ConfigMap", "apply Service"}},
		},
		"the Deployment is invalid: ChildRejected": {
			view:  rxView(),
			setup: func(_ Gomega, f *rxFixture, _ *Reconciler) { f.Fail(testenv.Apply, "Deployment", rxInvalid) },
			want:  with(rejected, "create ConfigMap", "apply Service"),
		},
		"the Deployment is forbidden by admission: ChildRejected": {
			view:  rxView(),
			setup: func(_ Gomega, f *rxFixture, _ *Reconciler) { f.Fail(testenv.Apply, "Deployment", rxAdmission) },
			want:  with(rejected, "create ConfigMap", "apply Service"),
			check: func(g Gomega, _ *rxFixture, mv *viewv1.MarkdownView, _ error) {
				g.Expect(conditions.Get(mv.Status.Conditions, conditions.Ready).Message).To(ContainSubstring("denied the request"))
			},
		},
		"the Deployment apply fails: ReconcileError": {
			view:  rxView(),
			setup: func(_ Gomega, f *rxFixture, _ *Reconciler) { f.Fail(testenv.Apply, "Deployment", rxUnavailable) },
			want:  with(failed, "create ConfigMap", "apply Service"),
		},
		"Service someone else's, in the cache: ChildConflict": {
			view: rxView(), world: []client.Object{rxTaken(&corev1.Service{}, "viewer-handbook", true)},
			want: with(conflict, "create ConfigMap", "apply Deployment"),
		},
		"the Service is forbidden by a quota: ChildRejected": {
			view:  rxView(),
			setup: func(_ Gomega, f *rxFixture, _ *Reconciler) { f.Fail(testenv.Apply, "Service", rxQuota) },
			want:  with(rejected, "create ConfigMap", "apply Deployment"),
		},
		"R4 the Service apply conflicts: retried at once, no status": {
			view:  rxView(),
			setup: func(_ Gomega, f *rxFixture, _ *Reconciler) { f.Fail(testenv.Apply, "Service", rxConflict) },
			want:  rxExit{err: apierr.Conflict, writes: []string{"create ConfigMap", "apply Deployment"}},
		},
		"the Deployment and the Service both fail: the Deployment's error is reported": {
			view: rxView(), world: []client.Object{rxTaken(&corev1.Service{}, "viewer-handbook", true)},
			setup: func(_ Gomega, f *rxFixture, _ *Reconciler) { f.Fail(testenv.Apply, "Deployment", rxUnavailable) },
			want:  with(failed, "create ConfigMap"),
		},

		// The Ingress
		"Ingress asked for: applied, the URL its host": {
			view: rxView(withHost), want: with(rollingOut, append(newSite, "apply Ingress")...),
			check: func(g Gomega, _ *rxFixture, mv *viewv1.MarkdownView, _ error) {
				g.Expect(mv.Status.URL).To(Equal("http://docs.example.com"))
			},
		},
		"Ingress someone else's: ChildConflict": {
			view: rxView(withHost), world: []client.Object{rxTaken(&networkingv1.Ingress{}, "viewer-handbook", true)},
			want: with(conflict, newSite...),
		},
		"the Ingress is invalid: ChildRejected": {
			view:  rxView(withHost),
			setup: func(_ Gomega, f *rxFixture, _ *Reconciler) { f.Fail(testenv.Apply, "Ingress", rxInvalid) },
			want:  with(rejected, newSite...),
		},
		"Ingress no longer asked for: deleted": {
			view: rxView(withHost),
			setup: func(g Gomega, f *rxFixture, r *Reconciler) {
				f.settle(g, r)
				f.edit(g, func(mv *viewv1.MarkdownView) { mv.Spec.Expose.Ingress.Host = "" })
			},
			want: with(rollingOut, "delete Ingress"),
		},
		"Ingress no longer asked for, reading it fails: ReconcileError": {
			view: rxView(withHost),
			setup: func(g Gomega, f *rxFixture, r *Reconciler) {
				f.settle(g, r)
				f.edit(g, func(mv *viewv1.MarkdownView) { mv.Spec.Expose.Ingress.Host = "" })
				f.Fail(testenv.Get, "Ingress", rxUnavailable)
			},
			want: failed,
		},
		"Ingress not asked for, someone else's: left alone": {
			view: rxView(), world: []client.Object{rxTaken(&networkingv1.Ingress{}, "viewer-handbook", true)},
			want: with(rollingOut, newSite...),
		},
		"R4 Ingress no longer asked for, the delete conflicts: retried at once": {
			view: rxView(withHost),
			setup: func(g Gomega, f *rxFixture, r *Reconciler) {
				f.settle(g, r)
				f.edit(g, func(mv *viewv1.MarkdownView) { mv.Spec.Expose.Ingress.Host = "" })
				f.Fail(testenv.Delete, "Ingress", rxConflict)
			},
			want: rxExit{err: apierr.Conflict, ready: ReasonRollingOut, also: conditions.Reconciling},
		},
		"Ingress no longer asked for, gone meanwhile: nothing to delete": {
			view: rxView(withHost),
			setup: func(g Gomega, f *rxFixture, r *Reconciler) {
				f.settle(g, r)
				f.edit(g, func(mv *viewv1.MarkdownView) { mv.Spec.Expose.Ingress.Host = "" })
				f.Fail(testenv.Delete, "Ingress", apierrors.NewNotFound(schema.GroupResource{Group: "networking.k8s.io", Resource: "ingresses"}, "viewer-handbook"))
			},
			want: rollingOut,
		},
		"Ingress no longer asked for, the delete forbidden: ChildRejected": {
			view: rxView(withHost),
			setup: func(g Gomega, f *rxFixture, r *Reconciler) {
				f.settle(g, r)
				f.edit(g, func(mv *viewv1.MarkdownView) { mv.Spec.Expose.Ingress.Host = "" })
				f.Fail(testenv.Delete, "Ingress", rxAdmission)
			},
			want: rejected,
		},
		"Ingress no longer asked for, the delete fails: ReconcileError": {
			view: rxView(withHost),
			setup: func(g Gomega, f *rxFixture, r *Reconciler) {
				f.settle(g, r)
				f.edit(g, func(mv *viewv1.MarkdownView) { mv.Spec.Expose.Ingress.Host = "" })
				f.Fail(testenv.Delete, "Ingress", rxUnavailable)
			},
			want: failed,
		},

		// The HTTPRoute
		"HTTPRoute asked for, no Gateway API: GatewayAPIUnavailable, the rest applied": {
			view: rxView(route), noRoutes: true,
			want: rxExit{ready: ReasonGatewayAPIUnavailable, also: conditions.Stalled, statusWrites: 1,
				writes: newSite, events: []string{"Warning GatewayAPIUnavailable"}},
		},
		"no Gateway API, no HTTPRoute asked for: RollingOut": {
			view: rxView(), noRoutes: true, want: with(rollingOut, newSite...),
		},
		"HTTPRoute asked for: applied, the URL its hostname": {
			view: rxView(route), want: with(rollingOut, append(newSite, "apply HTTPRoute")...),
			check: func(g Gomega, _ *rxFixture, mv *viewv1.MarkdownView, _ error) {
				g.Expect(mv.Status.URL).To(Equal("https://docs.example.com"))
			},
		},
		"HTTPRoute refused by its Gateway: RouteNotAccepted": {
			view: rxView(route),
			setup: func(g Gomega, f *rxFixture, r *Reconciler) {
				f.settle(g, r)
				f.refuseRoute(g)
			},
			want: rxExit{ready: ReasonRouteNotAccepted, also: conditions.Stalled, statusWrites: 1,
				events: []string{"Warning RouteNotAccepted"}},
			check: func(g Gomega, _ *rxFixture, mv *viewv1.MarkdownView, _ error) {
				g.Expect(conditions.Get(mv.Status.Conditions, conditions.Ready).Message).To(ContainSubstring("Gateway infra/shared does not accept"))
			},
		},
		"HTTPRoute someone else's: ChildConflict": {
			view: rxView(route), world: []client.Object{rxTaken(&gatewayv1.HTTPRoute{}, "viewer-handbook", false)},
			want: with(conflict, newSite...),
		},
		"R4 the HTTPRoute apply conflicts: retried at once, no status": {
			view:  rxView(route),
			setup: func(_ Gomega, f *rxFixture, _ *Reconciler) { f.Fail(testenv.Apply, "HTTPRoute", rxConflict) },
			want:  rxExit{err: apierr.Conflict, writes: newSite},
		},
		"HTTPRoute no longer asked for: deleted": {
			view: rxView(route),
			setup: func(g Gomega, f *rxFixture, r *Reconciler) {
				f.settle(g, r)
				f.edit(g, func(mv *viewv1.MarkdownView) { mv.Spec.Expose.HTTPRoute = viewv1.HTTPRouteExpose{} })
			},
			want: with(rollingOut, "delete HTTPRoute"),
			check: func(g Gomega, _ *rxFixture, mv *viewv1.MarkdownView, _ error) {
				g.Expect(mv.Status.URL).To(Equal("http://viewer-handbook.docs.svc"))
			},
		},

		// R5
		"R5 the status write fails: the error, no Event": {
			view:  rxView(),
			setup: func(_ Gomega, f *rxFixture, _ *Reconciler) { f.Fail(testenv.Status, "MarkdownView", rxUnavailable) },
			want:  rxExit{err: apierr.Transient, writes: newSite},
		},
		"R5 the status write fails after a failed step: both errors": {
			view: rxView(),
			setup: func(_ Gomega, f *rxFixture, _ *Reconciler) {
				f.Fail(testenv.Apply, "Deployment", rxUnavailable)
				f.Fail(testenv.Status, "MarkdownView", rxUnavailable)
			},
			want: rxExit{err: apierr.Transient, writes: []string{"create ConfigMap", "apply Service"}},
			check: func(g Gomega, _ *rxFixture, _ *viewv1.MarkdownView, err error) {
				g.Expect(err).To(MatchError(ContainSubstring("applying Deployment")))
				g.Expect(err).To(MatchError(ContainSubstring("writing status")))
			},
		},
		"R5 the status write fails while blocked: the error, not the retry": {
			view: rxView(), world: []client.Object{rxTaken(&corev1.ConfigMap{}, "markdowns-handbook", true)},
			setup: func(_ Gomega, f *rxFixture, _ *Reconciler) { f.Fail(testenv.Status, "MarkdownView", rxUnavailable) },
			want:  rxExit{err: apierr.Transient},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			world := tc.world
			if tc.view != nil {
				world = append(world, tc.view)
			}
			f := newRxFixture(world...)
			r := f.reconciler(g, !tc.noRoutes)
			if tc.setup != nil {
				tc.setup(g, f, r)
			}
			before := rxConflicts(g)
			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: rxNS, Name: rxName}})
			f.conflicts = rxConflicts(g) - before
			mv := tc.want.check(g, f, res, err)
			if tc.check != nil {
				tc.check(g, f, mv, err)
			}
		})
	}
}

const (
	rxNS   = "docs"
	rxName = "handbook"
	rxUID  = "uid-handbook"
	rxHold = "example.com/hold" // someone else's finalizer
)

var (
	// Schemes of the built-in types only and of the Gateway API's only.
	rxClientGoScheme = func() *k8sruntime.Scheme {
		s := k8sruntime.NewScheme()
		utilruntime.Must(clientgoscheme.AddToScheme(s))
		return s
	}()
	rxGatewayScheme = func() *k8sruntime.Scheme {
		s := k8sruntime.NewScheme()
		utilruntime.Must(gatewayv1.Install(s))
		return s
	}()
	rxScheme = func() *k8sruntime.Scheme {
		s := k8sruntime.NewScheme()
		utilruntime.Must(clientgoscheme.AddToScheme(s))
		utilruntime.Must(viewv1.AddToScheme(s))
		utilruntime.Must(gatewayv1.Install(s))
		return s
	}()
	// Errors the fake API server answers with.
	rxConflict = apierrors.NewConflict(schema.GroupResource{Group: "apps", Resource: "deployments"}, "viewer-handbook",
		errors.New("the object has been modified; please apply your changes to the latest version and try again"))
	rxUnavailable = apierrors.NewServiceUnavailable("the API server did not answer")
	rxQuota       = apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "markdowns-handbook",
		errors.New("exceeded quota: team, requested: count/configmaps=1, used: count/configmaps=10, limited: count/configmaps=10"))
	rxAdmission = apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "deployments"}, "viewer-handbook",
		errors.New(`admission webhook "policy.example.com" denied the request`))
	rxInvalid = apierrors.NewInvalid(schema.GroupKind{Group: "apps", Kind: "Deployment"}, "viewer-handbook",
		field.ErrorList{field.Invalid(field.NewPath("spec", "template"), "x", "refused by policy")})
	rxGone = apierrors.NewNotFound(schema.GroupResource{Group: viewv1.GroupVersion.Group, Resource: "markdownviews"}, rxName)
)

// youngAge is how old a young view is: well within firstStatusGrace.
const youngAge = 10 * time.Second

// young makes a view youngAge old.
func young(mv *viewv1.MarkdownView) {
	mv.CreationTimestamp = metav1.NewTime(time.Now().Add(-youngAge))
}

// rxView is MarkdownView docs/handbook, one small file, generation 2.
func rxView(edits ...func(*viewv1.MarkdownView)) *viewv1.MarkdownView {
	mv := &viewv1.MarkdownView{
		ObjectMeta: metav1.ObjectMeta{Namespace: rxNS, Name: rxName, UID: rxUID, Generation: 2},
		Spec: viewv1.MarkdownViewSpec{Replicas: 1,
			Markdowns: map[string]viewv1.MarkdownText{"index.md": "# Handbook"}},
	}
	for _, edit := range edits {
		edit(mv)
	}
	return mv
}

// rxTaken is obj named name in the view's namespace, someone else's:
// labelled as Trellis' children are and controlled by another MarkdownView
// (so in the cache), or neither (so outside it).
func rxTaken(obj client.Object, name string, labelled bool) client.Object {
	obj.SetNamespace(rxNS)
	obj.SetName(name)
	obj.SetUID("uid-taken")
	if labelled {
		obj.SetLabels(map[string]string{setup.ManagedByLabel: setup.ManagedByValue})
		obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: viewv1.GroupVersion.String(), Kind: "MarkdownView",
			Name: "other", UID: "uid-other", Controller: ptr.To(true)}})
	}
	return obj
}

// rxUnreadable gives the cache's copy of the Deployment two env entries of
// one name, as an edit may leave them (the API server accepts them): the
// configuration Trellis applied cannot be extracted from such an object.
func rxUnreadable(obj client.Object) {
	if d, ok := obj.(*appsv1.Deployment); ok {
		d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "a"}, {Name: "MODE", Value: "b"}}
	}
}

// rxHolds checks what the view's ConfigMap holds in index.md.
func rxHolds(text string) func(Gomega, *rxFixture, *viewv1.MarkdownView, error) {
	return func(g Gomega, f *rxFixture, _ *viewv1.MarkdownView, _ error) {
		cm := &corev1.ConfigMap{}
		g.Expect(f.raw.Get(context.Background(), types.NamespacedName{Namespace: rxNS, Name: "markdowns-handbook"}, cm)).To(Succeed())
		g.Expect(cm.Data).To(HaveKeyWithValue("index.md", text))
		g.Expect(cm.Annotations).To(HaveKeyWithValue(contentHashAnnotation, contentHash(cm.Data, cm.BinaryData)))
		g.Expect(cm.Annotations).NotTo(HaveKey(cachedContentHash))
	}
}

// rxConflicts is trellis_reconcile_conflicts_total of the controller.
func rxConflicts(g Gomega) float64 {
	n, err := testenv.Counter("trellis_reconcile_conflicts_total", "controller", ControllerName)
	g.Expect(err).NotTo(HaveOccurred())
	return n
}

// rxExit is what a row expects of one reconcile.
type rxExit struct {
	// err is the class of what the reconcile ended with: the error returned
	// (None: no error), or Conflict: no error, again after about
	// apierr.ConflictRetry, counted in trellis_reconcile_conflicts_total.
	err apierr.Class
	// requeue: again in about setup.ForeignChildRetry; otherwise no requeue
	// at all, unless held.
	requeue bool
	// held: a new view's first status was held back, again when its grace
	// ends (firstStatusGrace from its creation).
	held bool
	// ready is Ready's reason afterwards; "" when the view has none (no
	// status was ever written) or is gone.
	ready string
	// also is the one of Reconciling and Stalled expected True.
	also string
	// statusWrites is how many status writes reached the API server.
	statusWrites int
	// writes are the child writes the API server carried out ("<verb>
	// <Kind>"), in any order: the Deployment and the Service are written
	// side by side.
	writes []string
	// events are "<type> <reason>" of the Events raised, in order.
	events []string
}

// check checks what a reconcile did and returns the view as the API server
// now holds it (nil when there is none).
func (w rxExit) check(g Gomega, f *rxFixture, res ctrl.Result, err error) *viewv1.MarkdownView {
	if w.err == apierr.Conflict {
		g.Expect(err).NotTo(HaveOccurred(), "a conflict is no error")
		g.Expect(f.conflicts).To(BeNumerically(">=", 1), "counted")
	} else {
		g.Expect(apierr.Classify(err)).To(Equal(w.err), "error %v", err)
	}
	switch {
	case w.err == apierr.Conflict:
		g.Expect(res.RequeueAfter).To(BeNumerically("~", apierr.ConflictRetry, apierr.ConflictRetry/10), "again at once")
	case w.requeue:
		g.Expect(res.RequeueAfter).To(BeNumerically("~", setup.ForeignChildRetry, setup.ForeignChildRetry/10))
	case w.held:
		// From the view's creation, not from when the table was built: a
		// row may run seconds later on a loaded machine.
		created := &viewv1.MarkdownView{}
		g.Expect(f.raw.Get(context.Background(), types.NamespacedName{Namespace: rxNS, Name: rxName}, created)).To(Succeed())
		g.Expect(res.RequeueAfter).To(BeNumerically("~", time.Until(created.CreationTimestamp.Add(firstStatusGrace)), 5*time.Second))
	default:
		g.Expect(res).To(Equal(ctrl.Result{}))
	}
	g.Expect(f.statusWrites()).To(Equal(w.statusWrites), "status writes %v", f.Writes())
	g.Expect(f.childWrites()).To(ConsistOf(w.writes))
	g.Expect(f.events()).To(Equal(w.events))

	mv := &viewv1.MarkdownView{}
	readErr := f.raw.Get(context.Background(), types.NamespacedName{Namespace: rxNS, Name: rxName}, mv)
	if apierrors.IsNotFound(readErr) {
		g.Expect(w.ready).To(BeEmpty(), "no view")
		return nil
	}
	g.Expect(readErr).NotTo(HaveOccurred())
	ready := conditions.Get(mv.Status.Conditions, conditions.Ready)
	if w.ready == "" {
		g.Expect(ready).To(BeNil(), "no status written")
		return mv
	}
	g.Expect(ready).NotTo(BeNil())
	g.Expect(ready.Reason).To(Equal(w.ready), ready.Message)
	for _, typ := range []string{conditions.Reconciling, conditions.Stalled} {
		g.Expect(conditions.IsTrue(mv.Status.Conditions, typ)).To(Equal(typ == w.also), typ)
	}
	if w.statusWrites > 0 {
		g.Expect(mv.Status.ObservedGeneration).To(Equal(mv.Generation), "observedGeneration")
		g.Expect(ready.ObservedGeneration).To(Equal(mv.Generation), "Ready's observedGeneration")
	}
	return mv
}

// rxFixture is the rows' fake API server (testenv.Fake) with a fake of
// the manager's cache in front of it.
type rxFixture struct {
	*testenv.Fake
	// raw is the API server as the test, another actor, reads and writes it.
	raw client.Client
	rec *events.FakeRecorder

	// unseen are the kinds whose objects the cache has not caught up with.
	unseen map[string]bool
	// stale, when set, edits the cache's copy of the view: a cache behind.
	stale func(*viewv1.MarkdownView)
	// staleChild, when set, edits the cache's copy of a child.
	staleChild func(client.Object)

	// conflicts is how many conflicts the reconcile counted (at least: the
	// manager of the envtest suite counts under the same name).
	conflicts float64
}

func newRxFixture(objs ...client.Object) *rxFixture {
	f := &rxFixture{rec: events.NewFakeRecorder(50), unseen: map[string]bool{}}
	f.Fake = testenv.NewFake(fake.NewClientBuilder().WithScheme(rxScheme).WithObjects(objs...).WithReturnManagedFields().
		WithStatusSubresource(&viewv1.MarkdownView{}, &gatewayv1.HTTPRoute{}).
		// The Gateway API's schema too, so that an HTTPRoute's managed
		// fields are keyed as a real API server keys them.
		WithTypeConverters(clientgoac.NewTypeConverter(rxClientGoScheme), gatewayac.NewTypeConverter(rxGatewayScheme),
			managedfields.NewDeducedTypeConverter()))
	f.raw = f.Others()
	f.Cache = f.cached
	return f
}

// reconciler is the Reconciler NewReconciler builds, on the fixture's
// clients, with the manager's default image allow-list.
func (f *rxFixture) reconciler(g Gomega, routesServed bool) *Reconciler {
	allow, err := imagepolicy.Parse("", testViewerImage)
	g.Expect(err).NotTo(HaveOccurred())
	return &Reconciler{
		client:     f.Client,
		uncached:   f.APIReader,
		children:   children.Clients{Cached: f.Client, Uncached: f.APIReader},
		configMaps: children.Clients{Cached: f.Client, Uncached: trimmedReader{Reader: f.APIReader, trim: trimConfigMap}},
		status: status.NewPatcher(f.Client, f.rec,
			func(mv *viewv1.MarkdownView) *viewv1.MarkdownViewStatus { return &mv.Status }, statusEvents...),
		viewerImage:  testViewerImage,
		imageAllow:   allow,
		routesServed: routesServed,
	}
}

// settle reconciles the view as it stands, without failures, and then
// forgets the writes and Events: a view some reconciles old.
func (f *rxFixture) settle(g Gomega, r *Reconciler) {
	_, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: rxNS, Name: rxName}})
	g.Expect(err).NotTo(HaveOccurred())
	f.ForgetWrites()
	f.events()
}

// edit changes the view's spec on the API server, which moves its generation.
func (f *rxFixture) edit(g Gomega, change func(*viewv1.MarkdownView)) {
	ctx := context.Background()
	mv := &viewv1.MarkdownView{}
	g.Expect(f.raw.Get(ctx, types.NamespacedName{Namespace: rxNS, Name: rxName}, mv)).To(Succeed())
	change(mv)
	mv.Generation++
	g.Expect(f.raw.Update(ctx, mv)).To(Succeed())
}

// markAvailable plays the Deployment controller: the viewer rolled out.
func (f *rxFixture) markAvailable(g Gomega) {
	ctx := context.Background()
	d := &appsv1.Deployment{}
	g.Expect(f.raw.Get(ctx, types.NamespacedName{Namespace: rxNS, Name: "viewer-handbook"}, d)).To(Succeed())
	n := *d.Spec.Replicas
	d.Status = appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
		},
	}
	g.Expect(f.raw.Status().Update(ctx, d)).To(Succeed())
}

// refuseRoute plays the Gateway: it does not accept the view's HTTPRoute.
func (f *rxFixture) refuseRoute(g Gomega) {
	ctx := context.Background()
	route := &gatewayv1.HTTPRoute{}
	g.Expect(f.raw.Get(ctx, types.NamespacedName{Namespace: rxNS, Name: "viewer-handbook"}, route)).To(Succeed())
	route.Status.Parents = []gatewayv1.RouteParentStatus{{
		ParentRef:      gatewayv1.ParentReference{Name: "shared", Namespace: ptr.To(gatewayv1.Namespace("infra"))},
		ControllerName: "gateway.example.com/controller",
		Conditions: []metav1.Condition{{Type: string(gatewayv1.RouteConditionAccepted), Status: metav1.ConditionFalse,
			ObservedGeneration: route.Generation, Reason: "NotAllowedByListeners", Message: "no listener allows routes from docs",
			LastTransitionTime: metav1.Now()}},
	}}
	g.Expect(f.raw.Status().Update(ctx, route)).To(Succeed())
}

// cached is the manager's cache, as Fake's Cache: MarkdownViews trimmed
// (and as stale as the row says), children only when labelled
// managed-by=trellis and their kind not unseen, ConfigMaps trimmed.
func (f *rxFixture) cached(obj client.Object) (bool, error) {
	if f.unseen[rxKind(obj)] {
		return false, nil
	}
	if mv, ok := obj.(*viewv1.MarkdownView); ok {
		if _, err := trimMarkdownView(mv); err != nil {
			return false, err
		}
		if f.stale != nil {
			f.stale(mv)
		}
		return true, nil
	}
	if obj.GetLabels()[setup.ManagedByLabel] != setup.ManagedByValue {
		return false, nil
	}
	if _, err := trimConfigMap(obj); err != nil {
		return false, err
	}
	if f.staleChild != nil {
		f.staleChild(obj)
	}
	return true, nil
}

// rxKind is the kind of an object or of an apply configuration.
func rxKind(obj any) string {
	switch obj.(type) {
	case *appsv1ac.DeploymentApplyConfiguration:
		return "Deployment"
	case *corev1ac.ServiceApplyConfiguration:
		return "Service"
	case *networkingv1ac.IngressApplyConfiguration:
		return "Ingress"
	case *gatewayv1ac.HTTPRouteApplyConfiguration:
		return "HTTPRoute"
	}
	o, ok := obj.(k8sruntime.Object)
	if !ok {
		return "?"
	}
	gvk, err := apiutil.GVKForObject(o, rxScheme)
	if err != nil {
		return "?"
	}
	return gvk.Kind
}

// events returns "<type> <reason>" of each Event raised, in order.
func (f *rxFixture) events() []string { return testenv.EventReasons(f.rec) }

// statusWrites counts the status writes the API server carried out.
func (f *rxFixture) statusWrites() int { return testenv.StatusWrites(f.Writes()) }

// childWrites are the writes the API server carried out but the status writes.
func (f *rxFixture) childWrites() []string {
	var out []string
	for _, w := range f.Writes() {
		if !strings.HasPrefix(w, "status ") {
			out = append(out, w)
		}
	}
	return out
}

// rxSchemeless is a client whose scheme knows none of Trellis' types.
type rxSchemeless struct{ client.Client }

func (rxSchemeless) Scheme() *k8sruntime.Scheme { return rxClientGoScheme }
