package bucket

import (
	"testing"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/outcome"
	"github.com/trellis-dev/trellis/internal/controller/storage/storagetest"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/s3"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// TestKStatusReadsEveryStatus: what GitOps tools make of each status of a
// StorageBucket.
func TestKStatusReadsEveryStatus(t *testing.T) {
	now := metav1.Now()
	settingsNotSupported := settingsResult{declared: []string{settingLifecycle},
		problems: []settingProblem{{setting: settingLifecycle, reason: ReasonSettingNotSupported, blocked: true, message: "lifecycle: not implemented"}}}
	policyInvalid := settingsResult{declared: []string{settingPolicy},
		problems: []settingProblem{{setting: settingPolicy, reason: stores.ReasonInvalidPolicy, blocked: true, message: "policy: not JSON"}}}
	policyRefused := settingsResult{declared: []string{settingPolicy},
		problems: []settingProblem{{setting: settingPolicy, reason: ReasonPolicyRefused, blocked: true, message: `policy: refused: Principal "*"`}}}
	settingsApplied := settingsResult{declared: []string{settingVersioning}}
	deleteBlocked := conditions.Summary{Progress: conditions.Blocked, Reason: ReasonDeleteBlocked, Message: "holds 2 objects"}
	cases := map[string]struct {
		res      checkResult
		deleting bool
		want     kstatus.Status
	}{
		"healthy":                         {res: checkResult{summary: healthy(testBucket, "store-a"), claim: storagev1.BucketClaimed}, want: kstatus.CurrentStatus},
		"creating":                        {res: checkResult{summary: conditions.Summary{Progress: conditions.Working, Reason: ReasonCreating, Message: "creating"}}, want: kstatus.InProgressStatus},
		"store down":                      {res: checkResult{summary: storagetest.StoreDown}, want: kstatus.InProgressStatus},
		"store not ready":                 {res: checkResult{summary: conditions.Summary{Progress: conditions.Working, Reason: stores.ReasonStoreNotReady, Message: "not checked"}}, want: kstatus.InProgressStatus},
		"conflict":                        {res: blocked(ReasonConflict, "someone else's"), want: kstatus.FailedStatus},
		"no such store":                   {res: blocked(stores.ReasonStoreNotFound, "no store"), want: kstatus.FailedStatus},
		"keys refused":                    {res: blocked(string(s3.ReasonAccessDenied), "refused"), want: kstatus.FailedStatus},
		"being deleted":                   {res: checkResult{summary: healthy(testBucket, "store-a")}, deleting: true, want: kstatus.TerminatingStatus},
		"delete held back":                {res: checkResult{summary: deleteBlocked}, deleting: true, want: kstatus.TerminatingStatus},
		"store not open to the namespace": {res: blocked(stores.ReasonNamespaceNotAllowed, "not open"), want: kstatus.FailedStatus},
		"adoption not allowed":            {res: blocked(ReasonAdoptionNotAllowed, "not yours"), want: kstatus.FailedStatus},
		"bucket name not allowed":         {res: blocked(ReasonBucketNameNotAllowed, "not your name"), want: kstatus.FailedStatus},
		"setting not supported": {res: checkResult{summary: settingsNotSupported.summary(), settings: &settingsNotSupported},
			want: kstatus.FailedStatus},
		"policy invalid": {res: checkResult{summary: policyInvalid.summary(), settings: &policyInvalid}, want: kstatus.FailedStatus},
		"policy refused": {res: checkResult{summary: policyRefused.summary(), settings: &policyRefused}, want: kstatus.FailedStatus},
		"settings applied": {res: checkResult{summary: healthy(testBucket, "store-a"), claim: storagev1.BucketClaimed, settings: &settingsApplied},
			want: kstatus.CurrentStatus},
		"waiting for its accesses to go": {res: checkResult{summary: conditions.Summary{Progress: conditions.Working, Reason: stores.ReasonInUse, Message: "waits"}},
			deleting: true, want: kstatus.TerminatingStatus},
		"held by accesses still in use": {res: blocked(stores.ReasonInUse, "delete them first"), deleting: true, want: kstatus.TerminatingStatus},
		"an API error, retried":         {res: checkResult{summary: storagetest.APIError}, want: kstatus.InProgressStatus},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			b := statusBucket(2, storagev1.StorageBucketStatus{})
			b.Status = computeBucketStatus(b, checked(tc.res), outcome.Outcome{})
			if tc.deleting {
				b.DeletionTimestamp = &now
			}
			res, err := testenv.KStatus(b, storagetest.Scheme)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Status).To(Equal(tc.want), res.Message)
			if tc.res.summary.Reason == ReasonDeleteBlocked {
				// kstatus calls anything being deleted Terminating; Stalled
				// still tells a person (and kubectl wait) it will not finish alone.
				g.Expect(conditions.IsTrue(b.Status.Conditions, conditions.Stalled)).To(BeTrue())
			}
		})
	}
}
