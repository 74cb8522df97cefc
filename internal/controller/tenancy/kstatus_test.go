package tenancy

import (
	"errors"
	"testing"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/outcome"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// TestKStatusReadsEveryStatus: what GitOps tools make of each Tenant status.
func TestKStatusReadsEveryStatus(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := tenancyv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	ready := func(name string) tenancyv1.TenantNamespaceStatus { return nsStatus(name, tenancyv1.NamespaceReady, "") }
	cases := map[string]struct {
		obs         *observation
		out         outcome.Outcome
		deleting    bool
		podSecurity tenancyv1.PodSecurityLevel
		want        kstatus.Status
	}{
		"ready":                   {obs: &observation{namespaces: []tenancyv1.TenantNamespaceStatus{ready("a-dev")}}, want: kstatus.CurrentStatus},
		"namespace taken":         {obs: &observation{namespaces: []tenancyv1.TenantNamespaceStatus{nsStatus("a-dev", tenancyv1.NamespaceConflict, "taken")}}, want: kstatus.FailedStatus},
		"protected name":          {obs: &observation{namespaces: []tenancyv1.TenantNamespaceStatus{nsStatus("default", tenancyv1.NamespaceProtected, "shared")}}, want: kstatus.FailedStatus},
		"RBAC object taken":       {obs: &observation{namespaces: []tenancyv1.TenantNamespaceStatus{ready("a-dev")}, rbacConflict: "taken"}, want: kstatus.FailedStatus},
		"a namespace terminating": {obs: &observation{namespaces: []tenancyv1.TenantNamespaceStatus{nsStatus("a-dev", tenancyv1.NamespaceTerminating, "")}}, want: kstatus.InProgressStatus},
		"an error, retrying":      {obs: &observation{namespaces: []tenancyv1.TenantNamespaceStatus{ready("a-dev")}}, out: outcome.Of(errors.New("timeout")), want: kstatus.InProgressStatus},
		"being deleted":           {obs: &observation{namespaces: []tenancyv1.TenantNamespaceStatus{ready("a-dev")}}, deleting: true, want: kstatus.TerminatingStatus},
		"a guardrail refused by the API server": {obs: &observation{namespaces: []tenancyv1.TenantNamespaceStatus{ready("a-dev")},
			refused: []string{"the API server refused LimitRange a-dev/trellis-tenant-limits: min > max"}}, want: kstatus.FailedStatus},
		// The bindings are in place as declared: Current, with SubjectsFound
		// False for people (and a Warning Event).
		"ready, a ServiceAccount's namespace missing": {obs: &observation{namespaces: []tenancyv1.TenantNamespaceStatus{ready("a-dev")},
			subjectsChecked: true, missingSubjects: []string{"ServiceAccount ci/deployer"}}, want: kstatus.CurrentStatus},
		// The level is in place for every new pod: Current, with
		// PodsMeetPodSecurity False for people (and a Warning Event).
		"ready, a pod from before the Pod Security level": {obs: &observation{namespaces: []tenancyv1.TenantNamespaceStatus{ready("a-dev")},
			pods: podsObservation{judged: true, violating: map[string]violatingPods{"a-dev": {count: 1, first: []violatingPod{{"root", "privileged"}}}}}},
			podSecurity: tenancyv1.PodSecurityRestricted, want: kstatus.CurrentStatus},
		"ready, with quota usage": {obs: &observation{namespaces: []tenancyv1.TenantNamespaceStatus{ready("a-dev")},
			quotaHard: corev1.ResourceList{"pods": resource.MustParse("10")}, quotaUsed: corev1.ResourceList{"pods": resource.MustParse("3")}},
			want: kstatus.CurrentStatus},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			tenant := unitTenant("a", "uid-a", "a-", "dev")
			tenant.Spec.PodSecurity.Enforce = tc.podSecurity
			tenant.Status = computeStatus(tenant, tc.obs, tc.out)
			if tc.podSecurity != "" {
				g.Expect(conditions.Get(tenant.Status.Conditions, ConditionPodsMeetPodSecurity).Status).To(Equal(metav1.ConditionFalse))
			}
			if tc.deleting {
				now := metav1.Now()
				tenant.DeletionTimestamp = &now
			}
			res, err := testenv.KStatus(tenant, scheme)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Status).To(Equal(tc.want), res.Message)
		})
	}
}
