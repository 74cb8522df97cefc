package view

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/operate"
	"github.com/trellis-dev/trellis/internal/controller/outcome"
)

// Condition reasons of a MarkdownView, as documented in docs/markdownview.md
// (Ready and ReconcileError are every kind's: conditions.ReasonReady and
// conditions.ReasonReconcileError).
const (
	ReasonChildConflict            = "ChildConflict"
	ReasonMarkdownsTooLarge        = "MarkdownsTooLarge"
	ReasonRollingOut               = "RollingOut"
	ReasonMinimumReplicasAvailable = "MinimumReplicasAvailable"
	ReasonNoReplicasAvailable      = "NoReplicasAvailable"
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	ReasonReplicaFailure           = "ReplicaFailure"
	ReasonImageNotAllowed          = "ImageNotAllowed"
	ReasonPodSettingsTooLarge      = "PodSettingsTooLarge"
	ReasonChildRejected            = "ChildRejected"
	ReasonGatewayAPIUnavailable    = "GatewayAPIUnavailable"
	ReasonRouteNotAccepted         = "RouteNotAccepted"
)

// observation is what one reconcile saw of the world. How it ended (a
// person must act, an error) is its outcome, beside it.
type observation struct {
	// deployment is the live viewer Deployment; nil when it does not exist yet.
	deployment *appsv1.Deployment
	// artifact is the sound artifact of spec.source the viewers are to
	// serve; artifactWritten says their ConfigMap names it.
	artifact        *artifact
	artifactWritten bool
	// sourceWaiting says why the viewers keep the artifact they have while
	// the manager retries (no artifact yet, a digest that does not match).
	sourceWaiting *conditions.Summary
	// gone: the MarkdownView turned out to be gone, or replaced by a new
	// object of the same name, since the cache read it; no status is written.
	gone bool
}

// computeStatus derives the whole status from the spec, the observation and
// how the reconcile ended (out): a person must act (a child name taken by an
// object we do not own, files too large for a ConfigMap, an image not
// allowed, a child the API server refuses, an HTTPRoute without the Gateway
// API or refused by its Gateway), or an error retried with back-off. It is
// a pure function so that "write only on change" is a plain comparison.
func computeStatus(mv *viewv1.MarkdownView, obs observation, out outcome.Outcome) viewv1.MarkdownViewStatus {
	st := *mv.Status.DeepCopy()
	gen := mv.Generation
	st.ObservedGeneration = gen
	st.LastHandledReconcileAt = operate.RequestedAt(mv)
	operate.Resume(&st.Conditions)
	st.URL = siteURL(mv)
	switch {
	case mv.Spec.Source.Kind == "":
		st.Source = viewv1.SourceStatus{}
	case obs.artifactWritten:
		st.Source = viewv1.SourceStatus{Revision: obs.artifact.Revision, Digest: obs.artifact.Digest}
	}

	d := obs.deployment
	st.AvailableReplicas = 0
	if d != nil {
		st.AvailableReplicas = d.Status.AvailableReplicas
	}
	if d != nil && deploymentCondition(d, appsv1.DeploymentAvailable, corev1.ConditionTrue) != nil && d.Status.AvailableReplicas > 0 {
		conditions.Set(&st.Conditions, gen, conditions.Available, true, ReasonMinimumReplicasAvailable,
			fmt.Sprintf("%d viewer replicas available", d.Status.AvailableReplicas))
	} else {
		conditions.Set(&st.Conditions, gen, conditions.Available, false, ReasonNoReplicasAvailable, "no viewer replica is available yet")
	}

	conditions.Summarize(&st.Conditions, gen, summarize(mv, obs, out, st))
	return st
}

// summarize says where the MarkdownView stands: what the outcome says, when
// it says anything (a person must act, an error being retried); otherwise
// blocked on its Deployment, still rolling out, or serving its site.
func summarize(mv *viewv1.MarkdownView, obs observation, out outcome.Outcome, st viewv1.MarkdownViewStatus) conditions.Summary {
	want := mv.Spec.Replicas
	if want == 0 {
		want = 1
	}
	if s, says := out.Summary(); says {
		return s
	}
	if obs.sourceWaiting != nil {
		return *obs.sourceWaiting
	}
	d := obs.deployment
	if d == nil {
		// Not created yet and not rolled out yet read the same, so the
		// reconciles in between write nothing (and a new view's first status
		// waits for news: firstStatusWait).
		return conditions.Summary{Progress: conditions.Working, Reason: ReasonRollingOut, Message: rolloutMessage(0, want)}
	}
	if c := deploymentCondition(d, appsv1.DeploymentProgressing, corev1.ConditionFalse); c != nil && c.Reason == ReasonProgressDeadlineExceeded {
		return conditions.Summary{Progress: conditions.Blocked, Reason: ReasonProgressDeadlineExceeded, Message: c.Message}
	}
	if c := deploymentCondition(d, appsv1.DeploymentReplicaFailure, corev1.ConditionTrue); c != nil {
		// Pods the cluster refuses to create (quota, admission) stay refused
		// until someone changes the quota, the policy or the spec.
		return conditions.Summary{Progress: conditions.Blocked, Reason: ReasonReplicaFailure, Message: c.Message}
	}
	if d.Status.ObservedGeneration < d.Generation || d.Status.UpdatedReplicas < want ||
		d.Status.AvailableReplicas < want || d.Status.Replicas > want {
		return conditions.Summary{Progress: conditions.Working, Reason: ReasonRollingOut,
			Message: rolloutMessage(min(d.Status.UpdatedReplicas, d.Status.AvailableReplicas), want)}
	}
	if !conditions.IsTrue(st.Conditions, conditions.Available) {
		return conditions.Summary{Progress: conditions.Working, Reason: ReasonNoReplicasAvailable, Message: "no viewer replica is available yet"}
	}
	return conditions.Summary{Progress: conditions.Done, Reason: conditions.ReasonReady,
		Message: fmt.Sprintf("%d viewer replicas serve %s", st.AvailableReplicas, st.URL)}
}

// firstStatusGrace is how long a new MarkdownView may roll out before its
// status says so. A thousand views created at once on the bench's cluster
// are all Ready within about 110 s (docs/performance.md); a rollout still
// going after this is worth a look.
const firstStatusGrace = 2 * time.Minute

// firstStatusWait says how long the first status of mv may wait, when next
// has nothing to say that its status does not already say: 0 when next is
// to be written now.
//
// A MarkdownView no controller has written to holds the status the CRD
// defaults, observedGeneration 0, which kstatus reads as InProgress
// (generation not observed) and people as no verdict yet. That stays true
// while the viewer rolls out, so the first status is written when there is
// news: Ready, a Stalled reason, an error being retried, or a rollout still
// going after firstStatusGrace (RollingOut). A new view then costs one
// status write. Any status already written (Ready for an older generation,
// above all) is rewritten at once: it would say what no longer holds.
func firstStatusWait(mv *viewv1.MarkdownView, next viewv1.MarkdownViewStatus, now time.Time) time.Duration {
	if !equality.Semantic.DeepEqual(mv.Status, viewv1.MarkdownViewStatus{}) {
		return 0
	}
	if next.Source != (viewv1.SourceStatus{}) {
		return 0 // the revision the viewers were pointed at is news
	}
	if ready := conditions.Get(next.Conditions, conditions.Ready); ready == nil || ready.Reason != ReasonRollingOut {
		return 0
	}
	age := now.Sub(mv.CreationTimestamp.Time)
	if age >= firstStatusGrace {
		return 0
	}
	return min(firstStatusGrace-age, firstStatusGrace) // a clock behind the API server's: no longer
}

func rolloutMessage(done, want int32) string {
	return fmt.Sprintf("%d of %d viewer replicas updated and available", done, want)
}

func deploymentCondition(d *appsv1.Deployment, typ appsv1.DeploymentConditionType, status corev1.ConditionStatus) *appsv1.DeploymentCondition {
	for i := range d.Status.Conditions {
		if c := &d.Status.Conditions[i]; c.Type == typ && c.Status == status {
			return c
		}
	}
	return nil
}
