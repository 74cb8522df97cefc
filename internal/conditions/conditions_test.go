package conditions

import (
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// longAgo is an old transition time, so "unchanged" and "now" are told apart.
var longAgo = metav1.NewTime(time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC))

func TestSetAddsCondition(t *testing.T) {
	tests := []struct {
		name   string
		status bool
		want   metav1.ConditionStatus
	}{
		{name: "true", status: true, want: metav1.ConditionTrue},
		{name: "false", status: false, want: metav1.ConditionFalse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var conds []metav1.Condition
			before := time.Now().Add(-time.Second)

			Set(&conds, 7, Ready, tt.status, "SomeReason", "some message")

			g.Expect(conds).To(HaveLen(1))
			c := conds[0]
			g.Expect(c.Type).To(Equal(Ready))
			g.Expect(c.Status).To(Equal(tt.want))
			g.Expect(c.ObservedGeneration).To(Equal(int64(7)))
			g.Expect(c.Reason).To(Equal("SomeReason"))
			g.Expect(c.Message).To(Equal("some message"))
			g.Expect(c.LastTransitionTime.Time).To(BeTemporally(">", before))
		})
	}
}

func TestSetKeepsTransitionTimeWhenStatusUnchanged(t *testing.T) {
	for _, status := range []bool{true, false} {
		t.Run(strconv.FormatBool(status), func(t *testing.T) {
			g := NewWithT(t)
			s := metav1.ConditionFalse
			if status {
				s = metav1.ConditionTrue
			}
			conds := []metav1.Condition{{
				Type: Available, Status: s, ObservedGeneration: 1,
				LastTransitionTime: longAgo, Reason: "Old", Message: "old message",
			}}

			Set(&conds, 2, Available, status, "New", "new message")

			g.Expect(conds).To(Equal([]metav1.Condition{{
				Type: Available, Status: s, ObservedGeneration: 2,
				LastTransitionTime: longAgo, Reason: "New", Message: "new message",
			}}))
		})
	}
}

func TestSetMovesTransitionTimeOnFlip(t *testing.T) {
	tests := []struct {
		name string
		from metav1.ConditionStatus
		to   bool
		want metav1.ConditionStatus
	}{
		{name: "false to true", from: metav1.ConditionFalse, to: true, want: metav1.ConditionTrue},
		{name: "true to false", from: metav1.ConditionTrue, to: false, want: metav1.ConditionFalse},
		{name: "unknown to true", from: metav1.ConditionUnknown, to: true, want: metav1.ConditionTrue},
		{name: "unknown to false", from: metav1.ConditionUnknown, to: false, want: metav1.ConditionFalse},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			conds := []metav1.Condition{{
				Type: Stalled, Status: tt.from, ObservedGeneration: 4,
				LastTransitionTime: longAgo, Reason: "Old", Message: "old",
			}}
			before := time.Now().Add(-time.Second)

			Set(&conds, 5, Stalled, tt.to, "New", "new")

			g.Expect(conds).To(HaveLen(1))
			c := conds[0]
			g.Expect(c.Status).To(Equal(tt.want))
			g.Expect(c.LastTransitionTime.Time).To(BeTemporally(">", before))
			g.Expect(c.ObservedGeneration).To(Equal(int64(5)))
			g.Expect(c.Reason).To(Equal("New"))
			g.Expect(c.Message).To(Equal("new"))
		})
	}
}

func TestSetLeavesOtherConditionsAlone(t *testing.T) {
	g := NewWithT(t)
	other := metav1.Condition{
		Type: Reconciling, Status: metav1.ConditionTrue, ObservedGeneration: 1,
		LastTransitionTime: longAgo, Reason: "RollingOut", Message: "m",
	}
	conds := []metav1.Condition{other}

	Set(&conds, 2, Ready, false, "RollingOut", "m")

	g.Expect(conds).To(HaveLen(2))
	g.Expect(Get(conds, Reconciling)).To(HaveValue(Equal(other)))
	g.Expect(Get(conds, Ready).ObservedGeneration).To(Equal(int64(2)))
}

func TestSetIsIdempotent(t *testing.T) {
	g := NewWithT(t)
	var conds []metav1.Condition
	Set(&conds, 3, Ready, true, "Ready", "ok")
	first := append([]metav1.Condition(nil), conds...)

	Set(&conds, 3, Ready, true, "Ready", "ok")

	g.Expect(conds).To(Equal(first))
}

func TestIsTrueAndGet(t *testing.T) {
	g := NewWithT(t)
	conds := []metav1.Condition{
		{Type: Ready, Status: metav1.ConditionTrue, Reason: "Ready"},
		{Type: Stalled, Status: metav1.ConditionFalse, Reason: "AsExpected"},
		{Type: Reconciling, Status: metav1.ConditionUnknown, Reason: "Unknown"},
	}

	g.Expect(IsTrue(conds, Ready)).To(BeTrue())
	g.Expect(IsTrue(conds, Stalled)).To(BeFalse())
	g.Expect(IsTrue(conds, Reconciling)).To(BeFalse())
	g.Expect(IsTrue(conds, Available)).To(BeFalse())
	g.Expect(IsTrue(nil, Ready)).To(BeFalse())

	g.Expect(Get(conds, Stalled)).To(HaveValue(HaveField("Reason", "AsExpected")))
	g.Expect(Get(conds, Available)).To(BeNil())
	g.Expect(Get(nil, Ready)).To(BeNil())

	// Get points into the slice, so callers see (and may edit) the stored condition.
	Get(conds, Ready).Message = "edited"
	g.Expect(conds[0].Message).To(Equal("edited"))
}

func TestSummarize(t *testing.T) {
	tests := map[string]struct {
		reason string
		s      Summary
		// want is the status of Ready, Reconciling and Stalled ("" = absent).
		wantReady, wantReconciling, wantStalled metav1.ConditionStatus
	}{
		"done: Ready, nothing else": {
			s: Summary{Progress: Done, Reason: "Ready", Message: "all good"}, wantReady: metav1.ConditionTrue,
		},
		"working: Reconciling, not Ready": {
			s: Summary{Progress: Working, Reason: "RollingOut", Message: "1 of 2"}, wantReady: metav1.ConditionFalse, wantReconciling: metav1.ConditionTrue,
		},
		"blocked: Stalled, not Ready": {
			s: Summary{Progress: Blocked, Reason: "ChildConflict", Message: "taken"}, wantReady: metav1.ConditionFalse, wantStalled: metav1.ConditionTrue,
		},
	}
	status := func(conds []metav1.Condition, typ string) metav1.ConditionStatus {
		if c := Get(conds, typ); c != nil {
			return c.Status
		}
		return ""
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			// Start from the opposite state, so stale conditions must be cleared.
			var conds []metav1.Condition
			Summarize(&conds, 1, Summary{Progress: Working, Reason: "Old", Message: "old"})
			Summarize(&conds, 1, Summary{Progress: Blocked, Reason: "Old", Message: "old"})

			Summarize(&conds, 3, tt.s)

			g.Expect(status(conds, Ready)).To(Equal(tt.wantReady))
			g.Expect(status(conds, Reconciling)).To(Equal(tt.wantReconciling))
			g.Expect(status(conds, Stalled)).To(Equal(tt.wantStalled))
			for _, c := range conds {
				g.Expect(c.Reason).To(Equal(tt.s.Reason), "condition %s", c.Type)
				g.Expect(c.Message).To(Equal(tt.s.Message), "condition %s", c.Type)
				g.Expect(c.ObservedGeneration).To(Equal(int64(3)), "condition %s", c.Type)
			}
		})
	}
}
