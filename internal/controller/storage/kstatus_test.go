package storage

import (
	"testing"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/s3"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// TestKStatusReadsEveryStatus: what GitOps tools make of each status of a
// StorageBucket and an ObjectStore.
func TestKStatusReadsEveryStatus(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := storagev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	storeDown := conditions.Summary{Progress: conditions.Working, Reason: string(s3.ReasonStoreUnreachable), Message: "no answer"}
	deleteBlocked := conditions.Summary{Progress: conditions.Blocked, Reason: ReasonDeleteBlocked, Message: "holds 2 objects"}
	t.Run("StorageBucket", func(t *testing.T) {
		cases := map[string]struct {
			res      checkResult
			deleting bool
			want     kstatus.Status
		}{
			"healthy":          {res: checkResult{summary: healthy(testBucket, "store-a"), claim: storagev1.BucketClaimed}, want: kstatus.CurrentStatus},
			"creating":         {res: checkResult{summary: conditions.Summary{Progress: conditions.Working, Reason: ReasonCreating, Message: "creating"}}, want: kstatus.InProgressStatus},
			"store down":       {res: checkResult{summary: storeDown}, want: kstatus.InProgressStatus},
			"store not ready":  {res: checkResult{summary: conditions.Summary{Progress: conditions.Working, Reason: ReasonStoreNotReady, Message: "not checked"}}, want: kstatus.InProgressStatus},
			"conflict":         {res: blocked(ReasonConflict, "someone else's"), want: kstatus.FailedStatus},
			"no such store":    {res: blocked(ReasonStoreNotFound, "no store"), want: kstatus.FailedStatus},
			"keys refused":     {res: blocked(string(s3.ReasonAccessDenied), "refused"), want: kstatus.FailedStatus},
			"being deleted":    {res: checkResult{summary: healthy(testBucket, "store-a")}, deleting: true, want: kstatus.TerminatingStatus},
			"delete held back": {res: checkResult{summary: deleteBlocked}, deleting: true, want: kstatus.TerminatingStatus},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				g := NewWithT(t)
				b := statusBucket(2, storagev1.StorageBucketStatus{})
				b.Status = computeBucketStatus(b, tc.res)
				if tc.deleting {
					b.DeletionTimestamp = &now
				}
				res, err := testenv.KStatus(b, scheme)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(res.Status).To(Equal(tc.want), res.Message)
				if tc.res.summary.Reason == ReasonDeleteBlocked {
					// kstatus calls anything being deleted Terminating; Stalled
					// still tells a person (and kubectl wait) it will not finish alone.
					g.Expect(conditions.IsTrue(b.Status.Conditions, conditions.Stalled)).To(BeTrue())
				}
			})
		}
	})
	t.Run("ObjectStore", func(t *testing.T) {
		cases := map[string]struct {
			summary conditions.Summary
			want    kstatus.Status
		}{
			"reachable":      {summary: conditions.Summary{Progress: conditions.Done, Reason: ReasonReachable, Message: "answers"}, want: kstatus.CurrentStatus},
			"unreachable":    {summary: storeDown, want: kstatus.InProgressStatus},
			"no credentials": {summary: conditions.Summary{Progress: conditions.Blocked, Reason: string(s3.ReasonCredentialsMissing), Message: "missing"}, want: kstatus.FailedStatus},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				g := NewWithT(t)
				store := testStore("a")
				store.Status.ObservedGeneration = store.Generation
				conditions.Summarize(&store.Status.Conditions, store.Generation, tc.summary)
				res, err := testenv.KStatus(store, scheme)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(res.Status).To(Equal(tc.want), res.Message)
			})
		}
	})
}
