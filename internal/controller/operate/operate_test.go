package operate

import (
	"testing"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/trellis-dev/trellis/internal/conditions"
)

// kstatusOf is what kstatus makes of an object at generation 2 whose status
// has observedGeneration 2 and conds.
func kstatusOf(t *testing.T, conds []metav1.Condition) kstatus.Status {
	t.Helper()
	list := make([]any, 0, len(conds))
	for _, c := range conds {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&c)
		if err != nil {
			t.Fatal(err)
		}
		list = append(list, m)
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "tenancy.trellis.dev/v1", "kind": "Tenant",
		"metadata": map[string]any{"name": "a", "generation": int64(2)},
		"status":   map[string]any{"observedGeneration": int64(2), "conditions": list},
	}}
	res, err := kstatus.Compute(u)
	if err != nil {
		t.Fatal(err)
	}
	return res.Status
}

// TestSuspendedReadsSettledToKStatus: whatever state an object is suspended
// in, kstatus reads it Current or Failed, never InProgress: a GitOps tool
// waiting for it would otherwise wait for ever, for nothing is in progress.
func TestSuspendedReadsSettledToKStatus(t *testing.T) {
	working := func(c *[]metav1.Condition) {
		conditions.Summarize(c, 1, conditions.Summary{Progress: conditions.Working, Reason: "Creating", Message: "m"})
	}
	cases := map[string]struct {
		before     func(*[]metav1.Condition)
		want       kstatus.Status
		wantReady  metav1.ConditionStatus
		wantReason string
	}{
		"ready": {before: func(c *[]metav1.Condition) {
			conditions.Summarize(c, 1, conditions.Summary{Progress: conditions.Done, Reason: "Ready"})
		}, want: kstatus.CurrentStatus, wantReady: metav1.ConditionTrue, wantReason: "Ready"},
		"still working": {before: working, want: kstatus.FailedStatus, wantReady: metav1.ConditionFalse, wantReason: "Creating"},
		"stalled": {before: func(c *[]metav1.Condition) {
			conditions.Summarize(c, 1, conditions.Summary{Progress: conditions.Blocked, Reason: "Conflict", Message: "m"})
		}, want: kstatus.FailedStatus, wantReady: metav1.ConditionFalse, wantReason: "Conflict"},
		"never reconciled": {before: func(*[]metav1.Condition) {}, want: kstatus.FailedStatus, wantReady: metav1.ConditionFalse, wantReason: ReasonSuspended},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var conds []metav1.Condition
			tc.before(&conds)
			Suspend(&conds, 2)
			if got := kstatusOf(t, conds); got != tc.want {
				t.Errorf("kstatus = %s, want %s (conditions %+v)", got, tc.want, conds)
			}
			if s := conditions.Get(conds, ConditionSuspended); s == nil || s.Status != metav1.ConditionTrue || s.Reason != ReasonSuspended {
				t.Errorf("Suspended = %+v, want True/Suspended", s)
			}
			if r := conditions.Get(conds, conditions.Ready); r == nil || r.Status != tc.wantReady || r.Reason != tc.wantReason {
				t.Errorf("Ready = %+v, want %s/%s: kept as it was", r, tc.wantReady, tc.wantReason)
			}
			again := append([]metav1.Condition(nil), conds...)
			Suspend(&again, 2)
			if !equalConds(conds, again) {
				t.Errorf("a second Suspend changed the conditions: a suspended object would be written again")
			}
			Resume(&conds)
			if conditions.Get(conds, ConditionSuspended) != nil {
				t.Errorf("Suspended is left after Resume")
			}
			if s := conditions.Get(conds, conditions.Stalled); s != nil && s.Reason == ReasonSuspended {
				t.Errorf("Stalled for suspend is left after Resume")
			}
		})
	}
}

func equalConds(a, b []metav1.Condition) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestReconcileRequested(t *testing.T) {
	with := func(v string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGeneration(1)
		if v != "" {
			u.SetAnnotations(map[string]string{RequestedAtAnnotation: v})
		}
		return u
	}
	cases := map[string]struct {
		old, new string
		want     bool
	}{
		"unchanged":      {old: "1", new: "1", want: false},
		"none":           {old: "", new: "", want: false},
		"set":            {old: "", new: "1", want: true},
		"changed":        {old: "1", new: "2", want: true},
		"removed":        {old: "1", new: "", want: true},
		"same as before": {old: "2026-11-28T17:00:00Z", new: "2026-11-28T17:00:00Z", want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ReconcileRequested.Update(event.UpdateEvent{ObjectOld: with(tc.old), ObjectNew: with(tc.new)}); got != tc.want {
				t.Errorf("Update = %v, want %v", got, tc.want)
			}
		})
	}
	if ReconcileRequested.Create(event.CreateEvent{Object: with("1")}) {
		t.Error("a create passes: that is the generation predicate's to decide")
	}
}
