package tenancy

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
)

var statusLongAgo = metav1.NewTime(time.Date(2021, 2, 3, 4, 5, 6, 0, time.UTC))

func nsStatus(name string, state tenancyv1.NamespaceState, msg string) tenancyv1.TenantNamespaceStatus {
	return tenancyv1.TenantNamespaceStatus{Name: name, State: state, Message: msg}
}

func TestComputeStatus(t *testing.T) {
	const (
		conflictMsg  = "namespace acme-dev exists and is not managed by this tenant"
		protectedMsg = "the default namespace is shared by the whole cluster"
		rbacMsg      = "ClusterRole trellis-tenant-acme exists and is not ours"
	)
	tests := []struct {
		name       string
		namespaces []tenancyv1.TenantNamespaceStatus
		rbac       string

		ready, degraded metav1.ConditionStatus
		readyReason     string
		degradedReason  string
		// Substrings of the Ready and Degraded messages; a nil
		// degradedMsg means the Degraded message is empty.
		readyMsg    []string
		degradedMsg []string
	}{
		{
			name:       "all ready",
			namespaces: []tenancyv1.TenantNamespaceStatus{nsStatus("acme-dev", tenancyv1.NamespaceReady, ""), nsStatus("acme-prod", tenancyv1.NamespaceReady, "")},
			ready:      metav1.ConditionTrue, readyReason: ReasonReady,
			degraded: metav1.ConditionFalse, degradedReason: ReasonAsExpected,
			readyMsg: []string{"2 namespaces ready", "Group acme-admins"},
		},
		{
			name: "one conflict",
			namespaces: []tenancyv1.TenantNamespaceStatus{
				nsStatus("acme-dev", tenancyv1.NamespaceConflict, conflictMsg), nsStatus("acme-prod", tenancyv1.NamespaceReady, ""),
			},
			ready: metav1.ConditionFalse, readyReason: ReasonNamespaceConflict,
			degraded: metav1.ConditionTrue, degradedReason: ReasonNamespaceConflict,
			readyMsg:    []string{"1 of 2 namespaces ready", conflictMsg},
			degradedMsg: []string{conflictMsg},
		},
		{
			name:       "protected only",
			namespaces: []tenancyv1.TenantNamespaceStatus{nsStatus("default", tenancyv1.NamespaceProtected, protectedMsg)},
			ready:      metav1.ConditionFalse, readyReason: ReasonProtectedNamespace,
			degraded: metav1.ConditionTrue, degradedReason: ReasonProtectedNamespace,
			readyMsg:    []string{"0 of 1 namespaces ready", "namespace default " + protectedMsg},
			degradedMsg: []string{"namespace default " + protectedMsg},
		},
		{
			name:       "rbac conflict only",
			namespaces: []tenancyv1.TenantNamespaceStatus{nsStatus("acme-dev", tenancyv1.NamespaceReady, "")},
			rbac:       rbacMsg,
			ready:      metav1.ConditionFalse, readyReason: ReasonRBACConflict,
			degraded: metav1.ConditionTrue, degradedReason: ReasonRBACConflict,
			readyMsg:    []string{"1 of 1 namespaces ready", rbacMsg},
			degradedMsg: []string{rbacMsg},
		},
		{
			name: "conflict wins over an earlier protected name",
			namespaces: []tenancyv1.TenantNamespaceStatus{
				nsStatus("default", tenancyv1.NamespaceProtected, protectedMsg), nsStatus("acme-dev", tenancyv1.NamespaceConflict, conflictMsg),
			},
			rbac:  rbacMsg,
			ready: metav1.ConditionFalse, readyReason: ReasonNamespaceConflict,
			degraded: metav1.ConditionTrue, degradedReason: ReasonNamespaceConflict,
			readyMsg:    []string{"0 of 2 namespaces ready", conflictMsg, protectedMsg, rbacMsg},
			degradedMsg: []string{"namespace default " + protectedMsg + "; " + conflictMsg + "; " + rbacMsg},
		},
		{
			name: "conflict wins over a later protected name",
			namespaces: []tenancyv1.TenantNamespaceStatus{
				nsStatus("acme-dev", tenancyv1.NamespaceConflict, conflictMsg), nsStatus("default", tenancyv1.NamespaceProtected, protectedMsg),
			},
			ready: metav1.ConditionFalse, readyReason: ReasonNamespaceConflict,
			degraded: metav1.ConditionTrue, degradedReason: ReasonNamespaceConflict,
			degradedMsg: []string{conflictMsg + "; namespace default " + protectedMsg},
		},
		{
			name:       "protected wins over rbac conflict",
			namespaces: []tenancyv1.TenantNamespaceStatus{nsStatus("default", tenancyv1.NamespaceProtected, protectedMsg)},
			rbac:       rbacMsg,
			ready:      metav1.ConditionFalse, readyReason: ReasonProtectedNamespace,
			degraded: metav1.ConditionTrue, degradedReason: ReasonProtectedNamespace,
			degradedMsg: []string{protectedMsg, rbacMsg},
		},
		{
			name: "terminating",
			namespaces: []tenancyv1.TenantNamespaceStatus{
				nsStatus("acme-dev", tenancyv1.NamespaceReady, ""), nsStatus("acme-prod", tenancyv1.NamespaceTerminating, "being deleted"),
			},
			ready: metav1.ConditionFalse, readyReason: ReasonTerminating,
			degraded: metav1.ConditionFalse, degradedReason: ReasonAsExpected,
			readyMsg: []string{"1 of 2 namespaces ready", "being deleted"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			tenant := unitTenant("acme", "uid-acme", "acme-", "dev", "prod")
			tenant.Generation = 7
			tenant.Status.ObservedGeneration = 3
			obs := &observation{rbacConflict: tt.rbac}
			for _, ns := range tt.namespaces {
				obs.set(ns.Name, ns.State, ns.Message)
			}

			st := computeStatus(tenant, obs)

			g.Expect(st.ObservedGeneration).To(Equal(int64(7)))
			g.Expect(st.Namespaces).To(Equal(tt.namespaces))
			g.Expect(st.Conditions).To(HaveLen(2))

			ready := conditions.Get(st.Conditions, conditions.Ready)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(tt.ready))
			g.Expect(ready.Reason).To(Equal(tt.readyReason))
			g.Expect(ready.ObservedGeneration).To(Equal(int64(7)))
			for _, m := range tt.readyMsg {
				g.Expect(ready.Message).To(ContainSubstring(m))
			}

			degraded := conditions.Get(st.Conditions, conditions.Degraded)
			g.Expect(degraded).NotTo(BeNil())
			g.Expect(degraded.Status).To(Equal(tt.degraded))
			g.Expect(degraded.Reason).To(Equal(tt.degradedReason))
			g.Expect(degraded.ObservedGeneration).To(Equal(int64(7)))
			if tt.degradedMsg == nil {
				g.Expect(degraded.Message).To(BeEmpty())
			}
			for _, m := range tt.degradedMsg {
				g.Expect(degraded.Message).To(ContainSubstring(m))
			}

			// blocked agrees with Degraded: a person must act exactly when it is True.
			g.Expect(obs.blocked()).To(Equal(tt.degraded == metav1.ConditionTrue))
		})
	}
}

func TestComputeStatusIsIdempotent(t *testing.T) {
	observations := map[string]*observation{
		"ready": {namespaces: []tenancyv1.TenantNamespaceStatus{nsStatus("a-dev", tenancyv1.NamespaceReady, "")}},
		"conflict": {namespaces: []tenancyv1.TenantNamespaceStatus{
			nsStatus("a-dev", tenancyv1.NamespaceConflict, "taken"), nsStatus("a-prod", tenancyv1.NamespaceReady, ""),
		}},
		"terminating": {namespaces: []tenancyv1.TenantNamespaceStatus{nsStatus("a-dev", tenancyv1.NamespaceTerminating, "")}},
		"rbac":        {namespaces: []tenancyv1.TenantNamespaceStatus{nsStatus("a-dev", tenancyv1.NamespaceReady, "")}, rbacConflict: "taken"},
	}
	for name, obs := range observations {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			tenant := unitTenant("a", "uid-a", "a-", "dev", "prod")
			tenant.Generation = 2

			first := computeStatus(tenant, obs)
			tenant.Status = *first.DeepCopy()
			time.Sleep(5 * time.Millisecond) // a new transition time would differ
			second := computeStatus(tenant, obs)

			g.Expect(equality.Semantic.DeepEqual(first, second)).To(BeTrue(), "first:  %+v\nsecond: %+v", first, second)
			g.Expect(second).To(Equal(first))
		})
	}
}

func TestComputeStatusKeepsTransitionTimeUnlessStatusFlips(t *testing.T) {
	g := NewWithT(t)
	tenant := unitTenant("a", "uid-a", "a-", "dev")
	tenant.Generation = 4
	tenant.Status.Conditions = []metav1.Condition{
		{Type: conditions.Ready, Status: metav1.ConditionTrue, ObservedGeneration: 3, LastTransitionTime: statusLongAgo, Reason: ReasonReady, Message: "old"},
		{Type: conditions.Degraded, Status: metav1.ConditionFalse, ObservedGeneration: 3, LastTransitionTime: statusLongAgo, Reason: ReasonAsExpected},
	}

	same := computeStatus(tenant, &observation{namespaces: []tenancyv1.TenantNamespaceStatus{nsStatus("a-dev", tenancyv1.NamespaceReady, "")}})
	g.Expect(conditions.Get(same.Conditions, conditions.Ready).LastTransitionTime).To(Equal(statusLongAgo))
	g.Expect(conditions.Get(same.Conditions, conditions.Degraded).LastTransitionTime).To(Equal(statusLongAgo))
	g.Expect(conditions.Get(same.Conditions, conditions.Ready).ObservedGeneration).To(Equal(int64(4)))

	before := time.Now().Add(-time.Second)
	flipped := computeStatus(tenant, &observation{namespaces: []tenancyv1.TenantNamespaceStatus{nsStatus("a-dev", tenancyv1.NamespaceConflict, "taken")}})
	g.Expect(conditions.Get(flipped.Conditions, conditions.Ready).LastTransitionTime.Time).To(BeTemporally(">", before))
	g.Expect(conditions.Get(flipped.Conditions, conditions.Degraded).LastTransitionTime.Time).To(BeTemporally(">", before))
}

func TestComputeStatusDoesNotAlias(t *testing.T) {
	g := NewWithT(t)
	tenant := unitTenant("a", "uid-a", "a-", "dev")
	tenant.Generation = 1
	tenant.Status.Conditions = []metav1.Condition{
		{Type: conditions.Ready, Status: metav1.ConditionTrue, LastTransitionTime: statusLongAgo, Reason: ReasonReady, Message: "old"},
		{Type: conditions.Degraded, Status: metav1.ConditionFalse, LastTransitionTime: statusLongAgo, Reason: ReasonAsExpected},
	}
	tenant.Status.Namespaces = []tenancyv1.TenantNamespaceStatus{nsStatus("a-dev", tenancyv1.NamespaceReady, "")}
	oldStatus := *tenant.Status.DeepCopy()
	obs := &observation{}
	obs.set("a-dev", tenancyv1.NamespaceConflict, "taken")

	st := computeStatus(tenant, obs)

	g.Expect(tenant.Status).To(Equal(oldStatus), "the tenant passed in is not modified")
	obs.set("a-dev", tenancyv1.NamespaceReady, "")
	g.Expect(st.Namespaces).To(Equal([]tenancyv1.TenantNamespaceStatus{nsStatus("a-dev", tenancyv1.NamespaceConflict, "taken")}),
		"the status does not share the observation's slice")
}

func TestComputeStatusObservationSet(t *testing.T) {
	g := NewWithT(t)
	obs := &observation{}
	obs.set("a", tenancyv1.NamespaceReady, "")
	obs.set("b", tenancyv1.NamespaceConflict, "taken")
	obs.set("c", tenancyv1.NamespaceTerminating, "going")
	obs.set("b", tenancyv1.NamespaceReady, "")
	obs.set("c", tenancyv1.NamespaceProtected, "reserved")

	g.Expect(obs.namespaces).To(Equal([]tenancyv1.TenantNamespaceStatus{
		nsStatus("a", tenancyv1.NamespaceReady, ""),
		nsStatus("b", tenancyv1.NamespaceReady, ""),
		nsStatus("c", tenancyv1.NamespaceProtected, "reserved"),
	}))
	g.Expect(obs.ready()).To(Equal([]string{"a", "b"}))
	g.Expect(obs.blocked()).To(BeTrue())

	obs.set("c", tenancyv1.NamespaceReady, "")
	g.Expect(obs.ready()).To(Equal([]string{"a", "b", "c"}))
	g.Expect(obs.blocked()).To(BeFalse())
	obs.rbacConflict = "taken"
	g.Expect(obs.blocked()).To(BeTrue())
}

func TestComputeStatusObservationBlocked(t *testing.T) {
	tests := map[tenancyv1.NamespaceState]bool{
		tenancyv1.NamespaceReady:       false,
		tenancyv1.NamespaceTerminating: false,
		tenancyv1.NamespaceConflict:    true,
		tenancyv1.NamespaceProtected:   true,
	}
	for state, want := range tests {
		t.Run(string(state), func(t *testing.T) {
			g := NewWithT(t)
			obs := &observation{}
			obs.set("x", state, "")
			g.Expect(obs.blocked()).To(Equal(want))
		})
	}
}

func TestComputeStatusReadyValue(t *testing.T) {
	tests := []struct {
		name  string
		conds []metav1.Condition
		want  string
	}{
		{name: "ready", conds: []metav1.Condition{{Type: conditions.Ready, Status: metav1.ConditionTrue}}, want: "True"},
		{name: "not ready", conds: []metav1.Condition{{Type: conditions.Ready, Status: metav1.ConditionFalse}}, want: "False"},
		{name: "ready unknown", conds: []metav1.Condition{{Type: conditions.Ready, Status: metav1.ConditionUnknown}}, want: "Unknown"},
		{name: "no conditions", conds: nil, want: "Unknown"},
		{name: "only degraded", conds: []metav1.Condition{{Type: conditions.Degraded, Status: metav1.ConditionTrue}}, want: "Unknown"},
		{name: "ready among others", conds: []metav1.Condition{
			{Type: conditions.Degraded, Status: metav1.ConditionTrue},
			{Type: conditions.Ready, Status: metav1.ConditionFalse},
		}, want: "False"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			tenant := unitTenant("a", "uid-a", "", "dev")
			tenant.Status.Conditions = tt.conds
			g.Expect(readyValue(tenant)).To(Equal(tt.want))
		})
	}
}

func TestComputeStatusFeedsReadyValue(t *testing.T) {
	g := NewWithT(t)
	tenant := unitTenant("a", "uid-a", "a-", "dev")
	tenant.Status = computeStatus(tenant, &observation{namespaces: []tenancyv1.TenantNamespaceStatus{nsStatus("a-dev", tenancyv1.NamespaceReady, "")}})
	g.Expect(readyValue(tenant)).To(Equal("True"))
	tenant.Status = computeStatus(tenant, &observation{namespaces: []tenancyv1.TenantNamespaceStatus{nsStatus("a-dev", tenancyv1.NamespaceTerminating, "")}})
	g.Expect(readyValue(tenant)).To(Equal("False"))
}
