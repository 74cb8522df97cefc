package view

import (
	"errors"
	"testing"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/controller/outcome"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// TestKStatusReadsEveryStatus feeds the statuses the controller writes to
// kstatus, as Flux, kpt and cli-utils appliers would: a site rolling out is
// InProgress, a served site Current, one only a person can unblock Failed.
func TestKStatusReadsEveryStatus(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := viewv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	cases := map[string]struct {
		obs      observation
		out      outcome.Outcome
		replicas int32
		deleting bool
		want     kstatus.Status
	}{
		"no Deployment yet":  {obs: observation{}, replicas: 1, want: kstatus.InProgressStatus},
		"rolling out":        {obs: observation{deployment: statusTestDeployment(2, 1, 1, deployAvailable, deployProgressing)}, replicas: 2, want: kstatus.InProgressStatus},
		"served":             {obs: observation{deployment: statusTestDeployment(1, 1, 1, deployAvailable, deployProgressing)}, replicas: 1, want: kstatus.CurrentStatus},
		"foreign child":      {obs: observation{}, out: outcome.Stalled(ReasonChildConflict, conflictMessage), replicas: 1, want: kstatus.FailedStatus},
		"too large":          {obs: observation{}, out: outcome.Stalled(ReasonMarkdownsTooLarge, tooLargeMessage), replicas: 1, want: kstatus.FailedStatus},
		"deadline exceeded":  {obs: observation{deployment: statusTestDeployment(1, 0, 0, deployUnavailable, deployStalled)}, replicas: 1, want: kstatus.FailedStatus},
		"pods refused":       {obs: observation{deployment: statusTestDeployment(1, 0, 0, deployUnavailable, deployProgressing, deployReplicaFailure)}, replicas: 1, want: kstatus.FailedStatus},
		"being deleted":      {obs: observation{deployment: statusTestDeployment(1, 1, 1, deployAvailable, deployProgressing)}, replicas: 1, deleting: true, want: kstatus.TerminatingStatus},
		"an error, retrying": {obs: observation{}, out: outcome.Of(errors.New("connection refused")), replicas: 1, want: kstatus.InProgressStatus},
		// A served site whose spec asks for something Trellis refuses is
		// Failed all the same: the spec is not what runs.
		"image not allowed": {obs: observation{}, out: outcome.Stalled(ReasonImageNotAllowed, "viewerImage evil:1 is not allowed"),
			replicas: 1, want: kstatus.FailedStatus},
		"pod settings too large": {obs: observation{}, out: outcome.Stalled(ReasonPodSettingsTooLarge, "spec.pod takes 9000 bytes"),
			replicas: 1, want: kstatus.FailedStatus},
		"child refused by the API server": {obs: observation{deployment: statusTestDeployment(1, 1, 1, deployAvailable, deployProgressing)}, out: outcome.Stalled(ReasonChildRejected, "Deployment.apps viewer-docs is invalid"), replicas: 1, want: kstatus.FailedStatus},
		"no Gateway API":                  {obs: observation{deployment: statusTestDeployment(1, 1, 1, deployAvailable, deployProgressing)}, out: outcome.Stalled(ReasonGatewayAPIUnavailable, "install the Gateway API CRDs"), replicas: 1, want: kstatus.FailedStatus},
		"route refused by its Gateway":    {obs: observation{deployment: statusTestDeployment(1, 1, 1, deployAvailable, deployProgressing)}, out: outcome.Stalled(ReasonRouteNotAccepted, "Gateway team-a/public does not accept HTTPRoute viewer-docs"), replicas: 1, want: kstatus.FailedStatus},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			mv := statusTestView(tc.replicas)
			mv.Status = computeStatus(mv, tc.obs, tc.out)
			if tc.deleting {
				mv.DeletionTimestamp = &now
			}
			res, err := testenv.KStatus(mv, scheme)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Status).To(Equal(tc.want), res.Message)
		})
	}

	t.Run("a status from an older generation is not Current", func(t *testing.T) {
		g := NewWithT(t)
		mv := statusTestView(1)
		mv.Status = computeStatus(mv, observation{deployment: statusTestDeployment(1, 1, 1, deployAvailable, deployProgressing)}, outcome.Outcome{})
		mv.Generation++
		res, err := testenv.KStatus(mv, scheme)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Status).To(Equal(kstatus.InProgressStatus), res.Message)
	})
}
