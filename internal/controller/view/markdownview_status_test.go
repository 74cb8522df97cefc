package view

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/outcome"
)

// These tests exercise computeStatus alone; they make no API calls.

const (
	statusTestGeneration = 3
	statusTestURL        = "http://viewer-docs.team-a.svc"
)

func statusTestView(replicas int32) *viewv1.MarkdownView {
	return &viewv1.MarkdownView{
		ObjectMeta: metav1.ObjectMeta{Name: "docs", Namespace: "team-a", Generation: statusTestGeneration, UID: "mv-uid"},
		Spec: viewv1.MarkdownViewSpec{
			Markdowns: map[string]viewv1.MarkdownText{"README.md": "# Hello"},
			Replicas:  replicas,
		},
	}
}

// statusTestDeployment is a viewer Deployment whose controller has seen its
// latest spec, with the given replica counts and conditions.
func statusTestDeployment(replicas, updated, available int32, conds ...appsv1.DeploymentCondition) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "viewer-docs", Namespace: "team-a", Generation: 2},
		Status: appsv1.DeploymentStatus{
			ObservedGeneration: 2,
			Replicas:           replicas,
			UpdatedReplicas:    updated,
			ReadyReplicas:      available,
			AvailableReplicas:  available,
			Conditions:         conds,
		},
	}
}

var (
	deployAvailable   = appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"}
	deployUnavailable = appsv1.DeploymentCondition{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionFalse, Reason: "MinimumReplicasUnavailable"}
	deployProgressing = appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"}
	deployPaused      = appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionUnknown, Reason: "DeploymentPaused"}
	deployStalled     = appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
		Reason: "ProgressDeadlineExceeded", Message: `ReplicaSet "viewer-docs-abc" has timed out progressing.`}
	deployRSCreateError = appsv1.DeploymentCondition{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse,
		Reason: "ReplicaSetCreateError", Message: "transient"}
	deployReplicaFailure = appsv1.DeploymentCondition{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionTrue,
		Reason: "FailedCreate", Message: `pods "viewer-docs-abc-" is forbidden: exceeded quota`}
	deployNoReplicaFailure = appsv1.DeploymentCondition{Type: appsv1.DeploymentReplicaFailure, Status: corev1.ConditionFalse, Reason: "Recovered"}
)

type wantCondition struct {
	status  metav1.ConditionStatus
	reason  string
	message string // exact
}

type statusCase struct {
	name          string
	replicas      int32
	obs           observation
	out           outcome.Outcome
	wantAvailable int32
	want          map[string]wantCondition
}

var (
	availableNo     = wantCondition{metav1.ConditionFalse, ReasonNoReplicasAvailable, "no viewer replica is available yet"}
	conflictMessage = "Service viewer-docs already exists and is not controlled by this MarkdownView; delete or rename it"
	tooLargeMessage = "markdowns take 1100000 bytes, more than a ConfigMap holds"
)

func statusCases() []statusCase {
	return []statusCase{
		{
			name:     "no deployment yet",
			replicas: 1,
			obs:      observation{},
			want: map[string]wantCondition{
				conditions.Ready:       {metav1.ConditionFalse, ReasonRollingOut, "0 of 1 viewer replicas updated and available"},
				conditions.Available:   availableNo,
				conditions.Reconciling: {metav1.ConditionTrue, ReasonRollingOut, "0 of 1 viewer replicas updated and available"},
			},
		},
		{
			name:          "rolling out: fewer updated than desired",
			replicas:      3,
			obs:           observation{deployment: statusTestDeployment(3, 1, 3, deployAvailable, deployProgressing)},
			wantAvailable: 3,
			want: map[string]wantCondition{
				conditions.Ready:       {metav1.ConditionFalse, ReasonRollingOut, "1 of 3 viewer replicas updated and available"},
				conditions.Available:   {metav1.ConditionTrue, ReasonMinimumReplicasAvailable, "3 viewer replicas available"},
				conditions.Reconciling: {metav1.ConditionTrue, ReasonRollingOut, "1 of 3 viewer replicas updated and available"},
			},
		},
		{
			name:          "rolling out: fewer available than desired",
			replicas:      3,
			obs:           observation{deployment: statusTestDeployment(3, 3, 2, deployAvailable, deployProgressing)},
			wantAvailable: 2,
			want: map[string]wantCondition{
				conditions.Ready:       {metav1.ConditionFalse, ReasonRollingOut, "2 of 3 viewer replicas updated and available"},
				conditions.Available:   {metav1.ConditionTrue, ReasonMinimumReplicasAvailable, "2 viewer replicas available"},
				conditions.Reconciling: {metav1.ConditionTrue, ReasonRollingOut, "2 of 3 viewer replicas updated and available"},
			},
		},
		{
			name:     "rolling out: nothing available yet",
			replicas: 2,
			obs:      observation{deployment: statusTestDeployment(2, 2, 0, deployUnavailable, deployProgressing)},
			want: map[string]wantCondition{
				conditions.Ready:       {metav1.ConditionFalse, ReasonRollingOut, "0 of 2 viewer replicas updated and available"},
				conditions.Available:   availableNo,
				conditions.Reconciling: {metav1.ConditionTrue, ReasonRollingOut, "0 of 2 viewer replicas updated and available"},
			},
		},
		{
			name:          "scaling down: more replicas than desired",
			replicas:      1,
			obs:           observation{deployment: statusTestDeployment(2, 1, 2, deployAvailable, deployProgressing)},
			wantAvailable: 2,
			want: map[string]wantCondition{
				conditions.Ready:       {metav1.ConditionFalse, ReasonRollingOut, "1 of 1 viewer replicas updated and available"},
				conditions.Available:   {metav1.ConditionTrue, ReasonMinimumReplicasAvailable, "2 viewer replicas available"},
				conditions.Reconciling: {metav1.ConditionTrue, ReasonRollingOut, "1 of 1 viewer replicas updated and available"},
			},
		},
		{
			name: "deployment status not yet observed its generation",
			obs: observation{deployment: func() *appsv1.Deployment {
				d := statusTestDeployment(2, 2, 2, deployAvailable, deployProgressing)
				d.Generation = 3
				return d
			}()},
			replicas:      2,
			wantAvailable: 2,
			want: map[string]wantCondition{
				conditions.Ready:       {metav1.ConditionFalse, ReasonRollingOut, "2 of 2 viewer replicas updated and available"},
				conditions.Available:   {metav1.ConditionTrue, ReasonMinimumReplicasAvailable, "2 viewer replicas available"},
				conditions.Reconciling: {metav1.ConditionTrue, ReasonRollingOut, "2 of 2 viewer replicas updated and available"},
			},
		},
		{
			name:          "complete and available",
			replicas:      2,
			obs:           observation{deployment: statusTestDeployment(2, 2, 2, deployAvailable, deployProgressing)},
			wantAvailable: 2,
			want: map[string]wantCondition{
				conditions.Ready:     {metav1.ConditionTrue, conditions.ReasonReady, "2 viewer replicas serve " + statusTestURL},
				conditions.Available: {metav1.ConditionTrue, ReasonMinimumReplicasAvailable, "2 viewer replicas available"},
			},
		},
		{
			name:          "replicas unset is treated as 1",
			replicas:      0,
			obs:           observation{deployment: statusTestDeployment(1, 1, 1, deployAvailable, deployProgressing)},
			wantAvailable: 1,
			want: map[string]wantCondition{
				conditions.Ready:     {metav1.ConditionTrue, conditions.ReasonReady, "1 viewer replicas serve " + statusTestURL},
				conditions.Available: {metav1.ConditionTrue, ReasonMinimumReplicasAvailable, "1 viewer replicas available"},
			},
		},
		{
			name:          "replicas unset and none running yet",
			replicas:      0,
			obs:           observation{deployment: statusTestDeployment(0, 0, 0)},
			wantAvailable: 0,
			want: map[string]wantCondition{
				conditions.Ready:       {metav1.ConditionFalse, ReasonRollingOut, "0 of 1 viewer replicas updated and available"},
				conditions.Available:   availableNo,
				conditions.Reconciling: {metav1.ConditionTrue, ReasonRollingOut, "0 of 1 viewer replicas updated and available"},
			},
		},
		{
			name:          "Available condition True with no replica available yet",
			replicas:      1,
			obs:           observation{deployment: statusTestDeployment(1, 1, 0, deployAvailable, deployProgressing)},
			wantAvailable: 0,
			want: map[string]wantCondition{
				conditions.Ready:       {metav1.ConditionFalse, ReasonRollingOut, "0 of 1 viewer replicas updated and available"},
				conditions.Available:   availableNo,
				conditions.Reconciling: {metav1.ConditionTrue, ReasonRollingOut, "0 of 1 viewer replicas updated and available"},
			},
		},
		{
			name:          "Progressing False for another reason than the deadline is not degraded",
			replicas:      1,
			obs:           observation{deployment: statusTestDeployment(1, 1, 1, deployAvailable, deployRSCreateError)},
			wantAvailable: 1,
			want: map[string]wantCondition{
				conditions.Ready:     {metav1.ConditionTrue, conditions.ReasonReady, "1 viewer replicas serve " + statusTestURL},
				conditions.Available: {metav1.ConditionTrue, ReasonMinimumReplicasAvailable, "1 viewer replicas available"},
			},
		},
		{
			name:          "rolled out but the Available condition is not True",
			replicas:      1,
			obs:           observation{deployment: statusTestDeployment(1, 1, 1, deployUnavailable, deployProgressing)},
			wantAvailable: 1,
			want: map[string]wantCondition{
				conditions.Ready:       {metav1.ConditionFalse, ReasonNoReplicasAvailable, "no viewer replica is available yet"},
				conditions.Available:   availableNo,
				conditions.Reconciling: {metav1.ConditionTrue, ReasonNoReplicasAvailable, "no viewer replica is available yet"},
			},
		},
		{
			name:          "paused deployment is not degraded",
			replicas:      1,
			obs:           observation{deployment: statusTestDeployment(1, 1, 1, deployAvailable, deployPaused)},
			wantAvailable: 1,
			want: map[string]wantCondition{
				conditions.Ready:     {metav1.ConditionTrue, conditions.ReasonReady, "1 viewer replicas serve " + statusTestURL},
				conditions.Available: {metav1.ConditionTrue, ReasonMinimumReplicasAvailable, "1 viewer replicas available"},
			},
		},
		{
			name:          "child conflict while the viewer runs",
			replicas:      2,
			obs:           observation{deployment: statusTestDeployment(2, 2, 2, deployAvailable, deployProgressing)},
			out:           outcome.Stalled(ReasonChildConflict, conflictMessage),
			wantAvailable: 2,
			want: map[string]wantCondition{
				conditions.Ready:     {metav1.ConditionFalse, ReasonChildConflict, conflictMessage},
				conditions.Available: {metav1.ConditionTrue, ReasonMinimumReplicasAvailable, "2 viewer replicas available"},
				conditions.Stalled:   {metav1.ConditionTrue, ReasonChildConflict, conflictMessage},
			},
		},
		{
			name:     "child conflict before any deployment: Stalled, not Reconciling",
			replicas: 1,
			obs:      observation{},
			out:      outcome.Stalled(ReasonChildConflict, conflictMessage),
			want: map[string]wantCondition{
				conditions.Ready:     {metav1.ConditionFalse, ReasonChildConflict, conflictMessage},
				conditions.Available: availableNo,
				conditions.Stalled:   {metav1.ConditionTrue, ReasonChildConflict, conflictMessage},
			},
		},
		{
			name:     "markdowns too large",
			replicas: 1,
			obs:      observation{},
			out:      outcome.Stalled(ReasonMarkdownsTooLarge, tooLargeMessage),
			want: map[string]wantCondition{
				conditions.Ready:     {metav1.ConditionFalse, ReasonMarkdownsTooLarge, tooLargeMessage},
				conditions.Available: availableNo,
				conditions.Stalled:   {metav1.ConditionTrue, ReasonMarkdownsTooLarge, tooLargeMessage},
			},
		},
		{
			name:     "progress deadline exceeded",
			replicas: 2,
			obs:      observation{deployment: statusTestDeployment(2, 1, 0, deployUnavailable, deployStalled)},
			want: map[string]wantCondition{
				conditions.Ready:     {metav1.ConditionFalse, ReasonProgressDeadlineExceeded, deployStalled.Message},
				conditions.Available: availableNo,
				conditions.Stalled:   {metav1.ConditionTrue, ReasonProgressDeadlineExceeded, deployStalled.Message},
			},
		},
		{
			name:          "replica failure",
			replicas:      2,
			obs:           observation{deployment: statusTestDeployment(1, 1, 1, deployAvailable, deployProgressing, deployReplicaFailure)},
			wantAvailable: 1,
			want: map[string]wantCondition{
				conditions.Ready:     {metav1.ConditionFalse, ReasonReplicaFailure, deployReplicaFailure.Message},
				conditions.Available: {metav1.ConditionTrue, ReasonMinimumReplicasAvailable, "1 viewer replicas available"},
				conditions.Stalled:   {metav1.ConditionTrue, ReasonReplicaFailure, deployReplicaFailure.Message},
			},
		},
		{
			name:          "replica failure condition False is not degraded",
			replicas:      1,
			obs:           observation{deployment: statusTestDeployment(1, 1, 1, deployAvailable, deployProgressing, deployNoReplicaFailure)},
			wantAvailable: 1,
			want: map[string]wantCondition{
				conditions.Ready:     {metav1.ConditionTrue, conditions.ReasonReady, "1 viewer replicas serve " + statusTestURL},
				conditions.Available: {metav1.ConditionTrue, ReasonMinimumReplicasAvailable, "1 viewer replicas available"},
			},
		},
		{
			name:     "progress deadline wins over replica failure",
			replicas: 2,
			obs:      observation{deployment: statusTestDeployment(1, 0, 0, deployUnavailable, deployReplicaFailure, deployStalled)},
			want: map[string]wantCondition{
				conditions.Ready:     {metav1.ConditionFalse, ReasonProgressDeadlineExceeded, deployStalled.Message},
				conditions.Available: availableNo,
				conditions.Stalled:   {metav1.ConditionTrue, ReasonProgressDeadlineExceeded, deployStalled.Message},
			},
		},
		{
			name:          "blocked wins over a stalled deployment",
			replicas:      2,
			obs:           observation{deployment: statusTestDeployment(1, 0, 0, deployUnavailable, deployStalled)},
			out:           outcome.Stalled(ReasonChildConflict, conflictMessage),
			wantAvailable: 0,
			want: map[string]wantCondition{
				conditions.Ready:     {metav1.ConditionFalse, ReasonChildConflict, conflictMessage},
				conditions.Available: availableNo,
				conditions.Stalled:   {metav1.ConditionTrue, ReasonChildConflict, conflictMessage},
			},
		},
	}
}

func TestComputeStatus(t *testing.T) {
	for _, tc := range statusCases() {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			mv := statusTestView(tc.replicas)
			before := time.Now().Add(-time.Second)

			st := computeStatus(mv, tc.obs, tc.out)

			g.Expect(st.ObservedGeneration).To(Equal(int64(statusTestGeneration)))
			g.Expect(st.URL).To(Equal(statusTestURL))
			g.Expect(st.AvailableReplicas).To(Equal(tc.wantAvailable))
			g.Expect(st.Conditions).To(HaveLen(len(tc.want)))
			for typ, want := range tc.want {
				c := conditions.Get(st.Conditions, typ)
				g.Expect(c).NotTo(BeNil(), "condition %s", typ)
				g.Expect(c.Status).To(Equal(want.status), "status of %s", typ)
				g.Expect(c.Reason).To(Equal(want.reason), "reason of %s", typ)
				g.Expect(c.Message).To(Equal(want.message), "message of %s", typ)
				g.Expect(c.ObservedGeneration).To(Equal(int64(statusTestGeneration)), "observedGeneration of %s", typ)
				g.Expect(c.LastTransitionTime.Time).To(BeTemporally(">", before), "lastTransitionTime of %s", typ)
			}
		})
	}
}

// TestComputeStatusIsIdempotent is what makes an unchanged MarkdownView cost
// zero writes: feeding computeStatus its own output changes nothing.
func TestComputeStatusIsIdempotent(t *testing.T) {
	for _, tc := range statusCases() {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			mv := statusTestView(tc.replicas)
			first := computeStatus(mv, tc.obs, tc.out)

			mv.Status = first
			second := computeStatus(mv, tc.obs, tc.out)
			g.Expect(equality.Semantic.DeepEqual(first, second)).To(BeTrue())
			g.Expect(second).To(Equal(first))

			// The same holds for what the API server hands back: timestamps
			// truncated to seconds must survive untouched.
			stored := roundTrip(g, first)
			mv.Status = stored
			third := computeStatus(mv, tc.obs, tc.out)
			g.Expect(equality.Semantic.DeepEqual(stored, third)).To(BeTrue())
			g.Expect(third).To(Equal(stored))
		})
	}
}

func roundTrip(g Gomega, st viewv1.MarkdownViewStatus) viewv1.MarkdownViewStatus {
	raw, err := json.Marshal(st)
	g.Expect(err).NotTo(HaveOccurred())
	var out viewv1.MarkdownViewStatus
	g.Expect(json.Unmarshal(raw, &out)).To(Succeed())
	return out
}

// backdate moves every transition time to a fixed point in the past.
func backdate(st *viewv1.MarkdownViewStatus, when metav1.Time) {
	for i := range st.Conditions {
		st.Conditions[i].LastTransitionTime = when
	}
}

func TestComputeStatusMovesTransitionTimeOnlyOnFlip(t *testing.T) {
	g := NewWithT(t)
	old := metav1.NewTime(time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC))
	mv := statusTestView(1)
	mv.Status = computeStatus(mv, observation{}, outcome.Outcome{})
	backdate(&mv.Status, old)
	before := time.Now().Add(-time.Second)

	st := computeStatus(mv, observation{deployment: statusTestDeployment(1, 1, 1, deployAvailable, deployProgressing)}, outcome.Outcome{})

	// Ready and Available flipped; Reconciling is gone (absent reads False).
	for _, typ := range []string{conditions.Ready, conditions.Available} {
		c := conditions.Get(st.Conditions, typ)
		g.Expect(c.LastTransitionTime.Time).To(BeTemporally(">", before), typ)
	}
	g.Expect(conditions.Get(st.Conditions, conditions.Reconciling)).To(BeNil())
	g.Expect(conditions.IsTrue(st.Conditions, conditions.Ready)).To(BeTrue())

	// A reconcile that changes nothing keeps every transition time.
	backdate(&st, old)
	mv.Status = st
	again := computeStatus(mv, observation{deployment: statusTestDeployment(1, 1, 1, deployAvailable, deployProgressing)}, outcome.Outcome{})
	for _, c := range again.Conditions {
		g.Expect(c.LastTransitionTime).To(Equal(old), c.Type)
	}
}

func TestComputeStatusKeepsTransitionTimeWhenOnlyReasonChanges(t *testing.T) {
	g := NewWithT(t)
	old := metav1.NewTime(time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC))
	mv := statusTestView(2)
	mv.Status = computeStatus(mv, observation{deployment: statusTestDeployment(2, 1, 0, deployUnavailable, deployProgressing)}, outcome.Outcome{})
	backdate(&mv.Status, old)
	before := time.Now().Add(-time.Second)

	// RollingOut -> ProgressDeadlineExceeded: Ready stays False with a new reason.
	st := computeStatus(mv, observation{deployment: statusTestDeployment(2, 1, 0, deployUnavailable, deployStalled)}, outcome.Outcome{})

	ready := conditions.Get(st.Conditions, conditions.Ready)
	g.Expect(ready.Reason).To(Equal(ReasonProgressDeadlineExceeded))
	g.Expect(ready.Message).To(Equal(deployStalled.Message))
	g.Expect(ready.LastTransitionTime).To(Equal(old))
	g.Expect(conditions.Get(st.Conditions, conditions.Available).LastTransitionTime).To(Equal(old))
	// Reconciling gave way to Stalled, which is new.
	g.Expect(conditions.Get(st.Conditions, conditions.Reconciling)).To(BeNil())
	g.Expect(conditions.Get(st.Conditions, conditions.Stalled).LastTransitionTime.Time).To(BeTemporally(">", before))
}

// TestComputeStatusNewDeploymentCostsNoWrite: a Deployment not created yet and
// one created but not rolled out yet read the same, so the reconciles between
// the two write no status.
func TestComputeStatusNewDeploymentCostsNoWrite(t *testing.T) {
	for _, replicas := range []int32{0, 1, 3} {
		t.Run(fmt.Sprintf("replicas=%d", replicas), func(t *testing.T) {
			g := NewWithT(t)
			mv := statusTestView(replicas)
			mv.Status = roundTrip(g, computeStatus(mv, observation{}, outcome.Outcome{}))

			fresh := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "viewer-docs", Namespace: "team-a", Generation: 1}}
			for _, d := range []*appsv1.Deployment{fresh, statusTestDeployment(0, 0, 0)} {
				st := computeStatus(mv, observation{deployment: d}, outcome.Outcome{})
				g.Expect(equality.Semantic.DeepEqual(mv.Status, st)).To(BeTrue(), "%+v", st)
			}
		})
	}
}

func TestComputeStatusFollowsGeneration(t *testing.T) {
	g := NewWithT(t)
	old := metav1.NewTime(time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC))
	obs := observation{deployment: statusTestDeployment(1, 1, 1, deployAvailable, deployProgressing)}
	mv := statusTestView(1)
	mv.Status = computeStatus(mv, obs, outcome.Outcome{})
	backdate(&mv.Status, old)

	mv.Generation = 9
	st := computeStatus(mv, obs, outcome.Outcome{})

	g.Expect(st.ObservedGeneration).To(Equal(int64(9)))
	g.Expect(st.Conditions).To(HaveLen(2)) // Ready and Available
	for _, c := range st.Conditions {
		g.Expect(c.ObservedGeneration).To(Equal(int64(9)), c.Type)
		g.Expect(c.LastTransitionTime).To(Equal(old), c.Type)
	}
	g.Expect(equality.Semantic.DeepEqual(mv.Status, st)).To(BeFalse(), "a new generation must be written")
}

func TestComputeStatusDoesNotMutateInput(t *testing.T) {
	g := NewWithT(t)
	mv := statusTestView(1)
	mv.Status = computeStatus(mv, observation{}, outcome.Outcome{})
	want := mv.DeepCopy()

	_ = computeStatus(mv, observation{deployment: statusTestDeployment(1, 1, 1, deployAvailable, deployProgressing)},
		outcome.Stalled(ReasonChildConflict, conflictMessage))

	g.Expect(mv).To(Equal(want))
}

func TestComputeStatusResetsAvailableReplicasWhenDeploymentIsGone(t *testing.T) {
	g := NewWithT(t)
	mv := statusTestView(2)
	mv.Status = computeStatus(mv, observation{deployment: statusTestDeployment(2, 2, 2, deployAvailable, deployProgressing)}, outcome.Outcome{})
	g.Expect(mv.Status.AvailableReplicas).To(Equal(int32(2)))

	st := computeStatus(mv, observation{}, outcome.Outcome{})

	g.Expect(st.AvailableReplicas).To(BeZero())
	g.Expect(conditions.IsTrue(st.Conditions, conditions.Available)).To(BeFalse())
	g.Expect(conditions.Get(st.Conditions, conditions.Ready).Reason).To(Equal(ReasonRollingOut))
}

func TestComputeStatusURLFollowsNameAndNamespace(t *testing.T) {
	g := NewWithT(t)
	mv := statusTestView(1)
	mv.Name, mv.Namespace = "handbook", "eng"

	g.Expect(computeStatus(mv, observation{}, outcome.Outcome{}).URL).To(Equal("http://viewer-handbook.eng.svc"))
}

func BenchmarkComputeStatus(b *testing.B) {
	mv := statusTestView(2)
	obs := observation{deployment: statusTestDeployment(2, 2, 2, deployAvailable, deployProgressing)}
	mv.Status = computeStatus(mv, obs, outcome.Outcome{})
	b.ReportAllocs()
	for b.Loop() {
		_ = computeStatus(mv, obs, outcome.Outcome{})
	}
}

func TestComputeStatusOfAnExposedSite(t *testing.T) {
	g := NewWithT(t)
	mv := statusTestView(1)
	mv.Spec.Expose.Ingress = viewv1.IngressExpose{Host: "docs.example.com", TLSSecretName: "docs-tls"}

	st := computeStatus(mv, observation{deployment: statusTestDeployment(1, 1, 1, deployAvailable, deployProgressing)}, outcome.Outcome{})

	g.Expect(st.URL).To(Equal("https://docs.example.com"))
	ready := conditions.Get(st.Conditions, conditions.Ready)
	g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(ready.Message).To(Equal("1 viewer replicas serve https://docs.example.com"))

	// Exposure refused: the URL still names what the spec asks for, Ready
	// says why it is not served there.
	st = computeStatus(mv, observation{deployment: statusTestDeployment(1, 1, 1, deployAvailable, deployProgressing)}, outcome.Stalled(ReasonChildConflict, conflictMessage))
	g.Expect(st.URL).To(Equal("https://docs.example.com"))
	g.Expect(conditions.Get(st.Conditions, conditions.Stalled).Reason).To(Equal(ReasonChildConflict))
	g.Expect(conditions.IsTrue(st.Conditions, conditions.Available)).To(BeTrue(), "the pods serve the site inside the cluster meanwhile")
}

// TestFirstStatusWaitsOnlyForNews: a view no status was written to keeps the
// status the CRD defaults while its viewer rolls out, for at most
// firstStatusGrace; anything else is written at once.
func TestFirstStatusWaitsOnlyForNews(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	rolling := observation{deployment: statusTestDeployment(2, 1, 0, deployUnavailable, deployProgressing)}
	served := observation{deployment: statusTestDeployment(2, 2, 2, deployAvailable, deployProgressing)}
	cases := map[string]struct {
		age time.Duration
		// before is what the status written for the previous generation
		// was computed from; nil: none was written.
		before *observation
		// foreign is a status someone else wrote.
		foreign *viewv1.MarkdownViewStatus
		obs     observation
		out     outcome.Outcome
		want    time.Duration
	}{
		"new, no Deployment yet":                           {obs: observation{}, want: firstStatusGrace},
		"new, rolling out":                                 {age: 30 * time.Second, obs: rolling, want: firstStatusGrace - 30*time.Second},
		"new, rolling out for as long as the grace":        {age: firstStatusGrace, obs: rolling},
		"new, served":                                      {age: time.Second, obs: served},
		"new, an error being retried":                      {age: time.Second, obs: observation{}, out: outcome.Of(errors.New("connection refused"))},
		"new, blocked":                                     {age: time.Second, obs: observation{}, out: outcome.Stalled(ReasonChildConflict, conflictMessage)},
		"new, pods refused":                                {age: time.Second, obs: observation{deployment: statusTestDeployment(2, 0, 0, deployUnavailable, deployReplicaFailure)}},
		"new, the manager's clock behind the API server's": {age: -time.Minute, obs: rolling, want: firstStatusGrace},
		"Ready for an older generation, rolling out again": {age: time.Second, before: &served, obs: rolling},
		"RollingOut written before, still rolling out":     {age: time.Second, before: &rolling, obs: rolling},
		"a status someone else wrote":                      {age: time.Second, foreign: &viewv1.MarkdownViewStatus{ObservedGeneration: statusTestGeneration}, obs: rolling},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			mv := statusTestView(2)
			mv.CreationTimestamp = metav1.NewTime(now.Add(-tc.age))
			switch {
			case tc.before != nil:
				mv.Generation--
				mv.Status = roundTrip(g, computeStatus(mv, *tc.before, outcome.Outcome{}))
				mv.Generation++
			case tc.foreign != nil:
				mv.Status = *tc.foreign
			}
			g.Expect(firstStatusWait(mv, computeStatus(mv, tc.obs, tc.out), now)).To(Equal(tc.want))
		})
	}
}
