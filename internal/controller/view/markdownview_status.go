package view

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
)

// Condition reasons of a MarkdownView, as documented in docs/markdownview.md.
const (
	ReasonReady                    = "Ready"
	ReasonAsExpected               = "AsExpected"
	ReasonChildConflict            = "ChildConflict"
	ReasonMarkdownsTooLarge        = "MarkdownsTooLarge"
	ReasonRollingOut               = "RollingOut"
	ReasonRolloutComplete          = "RolloutComplete"
	ReasonMinimumReplicasAvailable = "MinimumReplicasAvailable"
	ReasonNoReplicasAvailable      = "NoReplicasAvailable"
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	ReasonReplicaFailure           = "ReplicaFailure"
)

// observation is what one reconcile saw of the world.
type observation struct {
	// deployment is the live viewer Deployment; nil when it does not exist yet.
	deployment *appsv1.Deployment
	// blockedReason and blockedMessage say why the children could not be
	// reconciled in a way only a person can fix: a child name taken by an
	// object we do not own, or files too large for a ConfigMap.
	blockedReason, blockedMessage string
}

// computeStatus derives the whole status from the spec and the observation.
// It is a pure function so that "write only on change" is a plain comparison.
func computeStatus(mv *viewv1.MarkdownView, obs observation) viewv1.MarkdownViewStatus {
	st := *mv.Status.DeepCopy()
	gen := mv.Generation
	st.ObservedGeneration = gen
	st.URL = siteURL(mv)

	want := mv.Spec.Replicas
	if want == 0 {
		want = 1
	}
	d := obs.deployment
	st.AvailableReplicas = 0
	if d != nil {
		st.AvailableReplicas = d.Status.AvailableReplicas
	}

	// Degraded: something needs a human.
	var stalled, failure *appsv1.DeploymentCondition
	if d != nil {
		if c := deploymentCondition(d, appsv1.DeploymentProgressing, corev1.ConditionFalse); c != nil && c.Reason == "ProgressDeadlineExceeded" {
			stalled = c
		}
		failure = deploymentCondition(d, appsv1.DeploymentReplicaFailure, corev1.ConditionTrue)
	}
	switch {
	case obs.blockedReason != "":
		conditions.Set(&st.Conditions, gen, conditions.Degraded, true, obs.blockedReason, obs.blockedMessage)
	case stalled != nil:
		conditions.Set(&st.Conditions, gen, conditions.Degraded, true, ReasonProgressDeadlineExceeded, stalled.Message)
	case failure != nil:
		conditions.Set(&st.Conditions, gen, conditions.Degraded, true, ReasonReplicaFailure, failure.Message)
	default:
		conditions.Set(&st.Conditions, gen, conditions.Degraded, false, ReasonAsExpected, "")
	}

	// Progressing: the viewer is being created or rolled out.
	// A Deployment not yet created and one not yet rolled out read the same,
	// so the first reconciles of a new object write the status only once.
	switch {
	case d == nil:
		conditions.Set(&st.Conditions, gen, conditions.Progressing, true, ReasonRollingOut, rolloutMessage(0, want))
	case d.Status.ObservedGeneration < d.Generation,
		d.Status.UpdatedReplicas < want,
		d.Status.AvailableReplicas < want,
		d.Status.Replicas > want:
		conditions.Set(&st.Conditions, gen, conditions.Progressing, true, ReasonRollingOut,
			rolloutMessage(min(d.Status.UpdatedReplicas, d.Status.AvailableReplicas), want))
	default:
		conditions.Set(&st.Conditions, gen, conditions.Progressing, false, ReasonRolloutComplete, "")
	}

	// Available: at least the Deployment's minimum is serving.
	if d != nil && deploymentCondition(d, appsv1.DeploymentAvailable, corev1.ConditionTrue) != nil && d.Status.AvailableReplicas > 0 {
		conditions.Set(&st.Conditions, gen, conditions.Available, true, ReasonMinimumReplicasAvailable,
			fmt.Sprintf("%d viewer replicas available", d.Status.AvailableReplicas))
	} else {
		conditions.Set(&st.Conditions, gen, conditions.Available, false, ReasonNoReplicasAvailable, "no viewer replica is available yet")
	}

	setReady(&st, gen)
	return st
}

// setReady summarises the other conditions: Ready is True only when the site
// is served by every desired replica and nothing is wrong.
func setReady(st *viewv1.MarkdownViewStatus, gen int64) {
	var blocking *metav1.Condition
	switch {
	case conditions.IsTrue(st.Conditions, conditions.Degraded):
		blocking = conditions.Get(st.Conditions, conditions.Degraded)
	case conditions.IsTrue(st.Conditions, conditions.Progressing):
		blocking = conditions.Get(st.Conditions, conditions.Progressing)
	case !conditions.IsTrue(st.Conditions, conditions.Available):
		blocking = conditions.Get(st.Conditions, conditions.Available)
	}
	if blocking != nil {
		conditions.Set(&st.Conditions, gen, conditions.Ready, false, blocking.Reason, blocking.Message)
		return
	}
	conditions.Set(&st.Conditions, gen, conditions.Ready, true, ReasonReady,
		fmt.Sprintf("%d viewer replicas serve %s", st.AvailableReplicas, st.URL))
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
