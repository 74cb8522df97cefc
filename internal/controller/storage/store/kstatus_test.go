package store

import (
	"testing"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/storage/storagetest"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/s3"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// TestKStatusReadsEveryStatus: what GitOps tools make of each status of an
// ObjectStore.
func TestKStatusReadsEveryStatus(t *testing.T) {
	now := metav1.Now()
	cases := map[string]struct {
		summary  conditions.Summary
		deleting bool
		want     kstatus.Status
	}{
		"reachable":        {summary: conditions.Summary{Progress: conditions.Done, Reason: ReasonReachable, Message: "answers"}, want: kstatus.CurrentStatus},
		"unreachable":      {summary: storagetest.StoreDown, want: kstatus.InProgressStatus},
		"no credentials":   {summary: conditions.Summary{Progress: conditions.Blocked, Reason: string(s3.ReasonCredentialsMissing), Message: "missing"}, want: kstatus.FailedStatus},
		"invalid selector": {summary: conditions.Summary{Progress: conditions.Blocked, Reason: ReasonInvalidSelector, Message: "bad operator"}, want: kstatus.FailedStatus},
		"in use, deleting": {summary: conditions.Summary{Progress: conditions.Blocked, Reason: stores.ReasonInUse, Message: "accesses remain"}, deleting: true, want: kstatus.TerminatingStatus},
		"an API error":     {summary: storagetest.APIError, want: kstatus.InProgressStatus},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			s := storagetest.NewStore("a")
			s.Status.ObservedGeneration = s.Generation
			if tc.deleting {
				s.DeletionTimestamp = &now
			}
			conditions.Summarize(&s.Status.Conditions, s.Generation, tc.summary)
			res, err := testenv.KStatus(s, storagetest.Scheme)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Status).To(Equal(tc.want), res.Message)
		})
	}
}
