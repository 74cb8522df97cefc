package tenancy

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/outcome"
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
		failed     error

		ready       metav1.ConditionStatus
		readyReason string
		// The condition besides Ready that must be True ("" for none): a
		// person must act (Stalled), or Trellis is still at work (Reconciling).
		alsoTrue string
		// Substrings of the Ready message.
		readyMsg []string
	}{
		{
			name:       "all ready",
			namespaces: []tenancyv1.TenantNamespaceStatus{nsStatus("acme-dev", tenancyv1.NamespaceReady, ""), nsStatus("acme-prod", tenancyv1.NamespaceReady, "")},
			ready:      metav1.ConditionTrue, readyReason: conditions.ReasonReady,
			readyMsg: []string{"2 namespaces ready", "Group acme-admins"},
		},
		{
			name: "one conflict",
			namespaces: []tenancyv1.TenantNamespaceStatus{
				nsStatus("acme-dev", tenancyv1.NamespaceConflict, conflictMsg), nsStatus("acme-prod", tenancyv1.NamespaceReady, ""),
			},
			ready: metav1.ConditionFalse, readyReason: ReasonNamespaceConflict, alsoTrue: conditions.Stalled,
			readyMsg: []string{"1 of 2 namespaces ready", conflictMsg},
		},
		{
			name:       "protected only",
			namespaces: []tenancyv1.TenantNamespaceStatus{nsStatus("default", tenancyv1.NamespaceProtected, protectedMsg)},
			ready:      metav1.ConditionFalse, readyReason: ReasonProtectedNamespace, alsoTrue: conditions.Stalled,
			readyMsg: []string{"0 of 1 namespaces ready", "namespace default " + protectedMsg},
		},
		{
			name:       "rbac conflict only",
			namespaces: []tenancyv1.TenantNamespaceStatus{nsStatus("acme-dev", tenancyv1.NamespaceReady, "")},
			rbac:       rbacMsg,
			ready:      metav1.ConditionFalse, readyReason: ReasonRBACConflict, alsoTrue: conditions.Stalled,
			readyMsg: []string{"1 of 1 namespaces ready", rbacMsg},
		},
		{
			name: "conflict wins over an earlier protected name",
			namespaces: []tenancyv1.TenantNamespaceStatus{
				nsStatus("default", tenancyv1.NamespaceProtected, protectedMsg), nsStatus("acme-dev", tenancyv1.NamespaceConflict, conflictMsg),
			},
			rbac:  rbacMsg,
			ready: metav1.ConditionFalse, readyReason: ReasonNamespaceConflict, alsoTrue: conditions.Stalled,
			readyMsg: []string{"0 of 2 namespaces ready", "namespace default " + protectedMsg + "; " + conflictMsg + "; " + rbacMsg},
		},
		{
			name: "conflict wins over a later protected name",
			namespaces: []tenancyv1.TenantNamespaceStatus{
				nsStatus("acme-dev", tenancyv1.NamespaceConflict, conflictMsg), nsStatus("default", tenancyv1.NamespaceProtected, protectedMsg),
			},
			ready: metav1.ConditionFalse, readyReason: ReasonNamespaceConflict, alsoTrue: conditions.Stalled,
			readyMsg: []string{conflictMsg + "; namespace default " + protectedMsg},
		},
		{
			name:       "protected wins over rbac conflict",
			namespaces: []tenancyv1.TenantNamespaceStatus{nsStatus("default", tenancyv1.NamespaceProtected, protectedMsg)},
			rbac:       rbacMsg,
			ready:      metav1.ConditionFalse, readyReason: ReasonProtectedNamespace, alsoTrue: conditions.Stalled,
			readyMsg: []string{protectedMsg, rbacMsg},
		},
		{
			name: "terminating",
			namespaces: []tenancyv1.TenantNamespaceStatus{
				nsStatus("acme-dev", tenancyv1.NamespaceReady, ""), nsStatus("acme-prod", tenancyv1.NamespaceTerminating, "being deleted"),
			},
			ready: metav1.ConditionFalse, readyReason: ReasonTerminating, alsoTrue: conditions.Reconciling,
			readyMsg: []string{"1 of 2 namespaces ready", "being deleted"},
		},
		{
			name:       "an error is retried, and shown",
			namespaces: []tenancyv1.TenantNamespaceStatus{nsStatus("acme-dev", tenancyv1.NamespaceReady, "")},
			failed:     errors.New("etcdserver: request timed out"),
			ready:      metav1.ConditionFalse, readyReason: conditions.ReasonReconcileError, alsoTrue: conditions.Reconciling,
			readyMsg: []string{"request timed out"},
		},
		{
			name:       "a block outweighs an error on Ready",
			namespaces: []tenancyv1.TenantNamespaceStatus{nsStatus("acme-dev", tenancyv1.NamespaceReady, "")},
			rbac:       rbacMsg,
			failed:     errors.New("etcdserver: request timed out"),
			ready:      metav1.ConditionFalse, readyReason: ReasonRBACConflict, alsoTrue: conditions.Stalled,
			readyMsg: []string{"1 of 1 namespaces ready", rbacMsg},
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

			st := computeStatus(tenant, obs, outcome.Of(tt.failed))

			g.Expect(st.ObservedGeneration).To(Equal(int64(7)))
			g.Expect(st.Namespaces).To(Equal(tt.namespaces))
			ready := conditions.Get(st.Conditions, conditions.Ready)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(tt.ready))
			g.Expect(ready.Reason).To(Equal(tt.readyReason))
			g.Expect(ready.ObservedGeneration).To(Equal(int64(7)))
			for _, m := range tt.readyMsg {
				g.Expect(ready.Message).To(ContainSubstring(m))
			}
			for _, typ := range []string{conditions.Reconciling, conditions.Stalled} {
				c := conditions.Get(st.Conditions, typ)
				if typ != tt.alsoTrue {
					g.Expect(c).To(BeNil(), "%s must be absent", typ)
					continue
				}
				g.Expect(c).NotTo(BeNil(), "%s must be set", typ)
				g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
				g.Expect(c.Reason).To(Equal(tt.readyReason))
			}
			// blocked agrees with Stalled: a person must act exactly when it is True.
			g.Expect(obs.blocked()).To(Equal(tt.alsoTrue == conditions.Stalled))
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

			first := computeStatus(tenant, obs, outcome.Outcome{})
			tenant.Status = *first.DeepCopy()
			time.Sleep(5 * time.Millisecond) // a new transition time would differ
			second := computeStatus(tenant, obs, outcome.Outcome{})

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
		{Type: conditions.Ready, Status: metav1.ConditionTrue, ObservedGeneration: 3, LastTransitionTime: statusLongAgo, Reason: conditions.ReasonReady, Message: "old"},
	}

	same := computeStatus(tenant, &observation{namespaces: []tenancyv1.TenantNamespaceStatus{nsStatus("a-dev", tenancyv1.NamespaceReady, "")}}, outcome.Outcome{})
	g.Expect(conditions.Get(same.Conditions, conditions.Ready).LastTransitionTime).To(Equal(statusLongAgo))
	g.Expect(conditions.Get(same.Conditions, conditions.Ready).ObservedGeneration).To(Equal(int64(4)))

	before := time.Now().Add(-time.Second)
	flipped := computeStatus(tenant, &observation{namespaces: []tenancyv1.TenantNamespaceStatus{nsStatus("a-dev", tenancyv1.NamespaceConflict, "taken")}}, outcome.Outcome{})
	g.Expect(conditions.Get(flipped.Conditions, conditions.Ready).LastTransitionTime.Time).To(BeTemporally(">", before))
	g.Expect(conditions.Get(flipped.Conditions, conditions.Stalled).LastTransitionTime.Time).To(BeTemporally(">", before))
}

func TestComputeStatusDoesNotAlias(t *testing.T) {
	g := NewWithT(t)
	tenant := unitTenant("a", "uid-a", "a-", "dev")
	tenant.Generation = 1
	tenant.Status.Conditions = []metav1.Condition{
		{Type: conditions.Ready, Status: metav1.ConditionTrue, LastTransitionTime: statusLongAgo, Reason: conditions.ReasonReady, Message: "old"},
	}
	tenant.Status.Namespaces = []tenancyv1.TenantNamespaceStatus{nsStatus("a-dev", tenancyv1.NamespaceReady, "")}
	oldStatus := *tenant.Status.DeepCopy()
	obs := &observation{}
	obs.set("a-dev", tenancyv1.NamespaceConflict, "taken")

	st := computeStatus(tenant, obs, outcome.Outcome{})

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
	g.Expect(obs.blocked()).To(BeTrue())

	obs.set("c", tenancyv1.NamespaceReady, "")
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

func TestComputeStatusRefusedGuardrailIsStalled(t *testing.T) {
	g := NewWithT(t)
	tenant := unitTenant("a", "uid-a", "a-", "dev")
	obs := &observation{refused: []string{"the API server refused LimitRange a-dev/trellis-tenant-limits: min > max"}}
	obs.set("a-dev", tenancyv1.NamespaceReady, "")
	st := computeStatus(tenant, obs, outcome.Outcome{})
	ready := conditions.Get(st.Conditions, conditions.Ready)
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Reason).To(Equal(ReasonGuardrailRefused))
	g.Expect(ready.Message).To(ContainSubstring("min > max"))
	g.Expect(conditions.IsTrue(st.Conditions, conditions.Stalled)).To(BeTrue())
	g.Expect(obs.blocked()).To(BeTrue(), "looked at again on the foreign-child schedule, not hot-looped")
}

func TestComputeStatusSubjectsFound(t *testing.T) {
	g := NewWithT(t)
	tenant := unitTenant("a", "uid-a", "a-", "dev")
	tenant.Generation = 2
	ready := func() *observation {
		o := &observation{}
		o.set("a-dev", tenancyv1.NamespaceReady, "")
		return o
	}

	missing := ready()
	missing.subjectsChecked, missing.missingSubjects = true, []string{"ServiceAccount ci/deployer"}
	st := computeStatus(tenant, missing, outcome.Outcome{})
	c := conditions.Get(st.Conditions, ConditionSubjectsFound)
	g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(c.Reason).To(Equal(ReasonSubjectNamespaceMissing))
	g.Expect(c.Message).To(ContainSubstring("ServiceAccount ci/deployer"))
	g.Expect(conditions.IsTrue(st.Conditions, conditions.Ready)).To(BeTrue(), "the bindings are as declared")

	// Not checked again (unchanged spec): the verdict stands.
	tenant.Status = st
	again := computeStatus(tenant, ready(), outcome.Outcome{})
	g.Expect(conditions.Get(again.Conditions, ConditionSubjectsFound).Status).To(Equal(metav1.ConditionFalse))

	found := ready()
	found.subjectsChecked = true
	g.Expect(conditions.IsTrue(computeStatus(tenant, found, outcome.Outcome{}).Conditions, ConditionSubjectsFound)).To(BeTrue())

	// A reconcile that stopped before the check claims nothing: the
	// condition stays absent, and the next reconcile checks.
	fresh := unitTenant("b", "uid-b", "b-", "dev")
	g.Expect(conditions.Get(computeStatus(fresh, ready(), outcome.Outcome{}).Conditions, ConditionSubjectsFound)).To(BeNil())
}

func TestAddQuotaSumsAndCountsMissingUsageAsZero(t *testing.T) {
	g := NewWithT(t)
	hard := corev1.ResourceList{"pods": resource.MustParse("10"), "requests.memory": resource.MustParse("1Gi")}
	obs := &observation{}
	obs.addQuota(hard, nil) // a quota the quota controller has not counted yet
	obs.addQuota(hard, corev1.ResourceList{"pods": resource.MustParse("4"), "requests.memory": resource.MustParse("512Mi"), "services": resource.MustParse("9")})
	g.Expect(obs.quotaHard.Pods().Value()).To(Equal(int64(20)))
	g.Expect(obs.quotaHard.Memory().Value()).To(Equal(int64(0)), "keys are the resource names as declared")
	mem := obs.quotaHard["requests.memory"]
	g.Expect(mem.Value()).To(Equal(int64(2 << 30)))
	g.Expect(obs.quotaUsed.Pods().Value()).To(Equal(int64(4)))
	used := obs.quotaUsed["requests.memory"]
	g.Expect(used.Value()).To(Equal(int64(512 << 20)))
	g.Expect(obs.quotaUsed).NotTo(HaveKey(corev1.ResourceName("services")), "only what the quota limits")

	// The quota controller's first count (all zeros) changes nothing.
	zero := &observation{}
	zero.addQuota(hard, corev1.ResourceList{"pods": resource.MustParse("0"), "requests.memory": resource.MustParse("0")})
	uncounted := &observation{}
	uncounted.addQuota(hard, nil)
	g.Expect(equality.Semantic.DeepEqual(zero.quotaUsed, uncounted.quotaUsed)).To(BeTrue())
}

// A namespace the reconcile stopped before (an error first) is written with
// the state last reported, or not at all: never without a state, which the
// API server refuses (and with it the whole status).
func TestComputeStatusNeverWritesANamespaceWithoutAState(t *testing.T) {
	g := NewWithT(t)
	tenant := unitTenant("a", "uid-a", "a-", "dev", "prod", "new")
	tenant.Status.Namespaces = []tenancyv1.TenantNamespaceStatus{
		nsStatus("a-dev", tenancyv1.NamespaceReady, ""), nsStatus("a-prod", tenancyv1.NamespaceConflict, "taken"),
	}
	obs := newObservation(namespaceNames(tenant), nil)
	obs.set("a-dev", tenancyv1.NamespaceTerminating, "going")

	st := computeStatus(tenant, obs, outcome.Of(errors.New("the API server did not answer")))

	g.Expect(st.Namespaces).To(Equal([]tenancyv1.TenantNamespaceStatus{
		nsStatus("a-dev", tenancyv1.NamespaceTerminating, "going"), nsStatus("a-prod", tenancyv1.NamespaceConflict, "taken"),
	}), "a-prod as last reported; a-new, never looked at, left out")
	g.Expect(conditions.Get(st.Conditions, conditions.Ready).Reason).To(Equal(conditions.ReasonReconcileError))
}
