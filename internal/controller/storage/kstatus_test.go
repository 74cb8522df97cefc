package storage

import (
	"errors"
	"testing"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/storage/storagetest"
	"github.com/trellis-dev/trellis/internal/controller/storage/store"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
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
	settingsNotSupported := settingsResult{declared: []string{settingLifecycle},
		problems: []settingProblem{{setting: settingLifecycle, reason: ReasonSettingNotSupported, blocked: true, message: "lifecycle: not implemented"}}}
	policyInvalid := settingsResult{declared: []string{settingPolicy},
		problems: []settingProblem{{setting: settingPolicy, reason: stores.ReasonInvalidPolicy, blocked: true, message: "policy: not JSON"}}}
	policyRefused := settingsResult{declared: []string{settingPolicy},
		problems: []settingProblem{{setting: settingPolicy, reason: ReasonPolicyRefused, blocked: true, message: `policy: refused: Principal "*"`}}}
	settingsApplied := settingsResult{declared: []string{settingVersioning}}
	// What a reconcile that ends with an API error records (stores.Outcome.Summary).
	apiError := *(&stores.Outcome{Failed: errors.New("etcdserver: request timed out")}).Summary(nil)
	deleteBlocked := conditions.Summary{Progress: conditions.Blocked, Reason: ReasonDeleteBlocked, Message: "holds 2 objects"}
	t.Run("StorageBucket", func(t *testing.T) {
		cases := map[string]struct {
			res      checkResult
			deleting bool
			want     kstatus.Status
		}{
			"healthy":                         {res: checkResult{summary: healthy(testBucket, "store-a"), claim: storagev1.BucketClaimed}, want: kstatus.CurrentStatus},
			"creating":                        {res: checkResult{summary: conditions.Summary{Progress: conditions.Working, Reason: ReasonCreating, Message: "creating"}}, want: kstatus.InProgressStatus},
			"store down":                      {res: checkResult{summary: storeDown}, want: kstatus.InProgressStatus},
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
			"an API error, retried":         {res: checkResult{summary: apiError}, want: kstatus.InProgressStatus},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				g := NewWithT(t)
				b := statusBucket(2, storagev1.StorageBucketStatus{})
				b.Status = computeBucketStatus(b, checked(tc.res))
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
			summary  conditions.Summary
			deleting bool
			want     kstatus.Status
		}{
			"reachable":        {summary: conditions.Summary{Progress: conditions.Done, Reason: store.ReasonReachable, Message: "answers"}, want: kstatus.CurrentStatus},
			"unreachable":      {summary: storeDown, want: kstatus.InProgressStatus},
			"no credentials":   {summary: conditions.Summary{Progress: conditions.Blocked, Reason: string(s3.ReasonCredentialsMissing), Message: "missing"}, want: kstatus.FailedStatus},
			"invalid selector": {summary: conditions.Summary{Progress: conditions.Blocked, Reason: store.ReasonInvalidSelector, Message: "bad operator"}, want: kstatus.FailedStatus},
			"in use, deleting": {summary: conditions.Summary{Progress: conditions.Blocked, Reason: stores.ReasonInUse, Message: "accesses remain"}, deleting: true, want: kstatus.TerminatingStatus},
			"an API error":     {summary: apiError, want: kstatus.InProgressStatus},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				g := NewWithT(t)
				store := storagetest.NewStore("a")
				store.Status.ObservedGeneration = store.Generation
				if tc.deleting {
					store.DeletionTimestamp = &now
				}
				conditions.Summarize(&store.Status.Conditions, store.Generation, tc.summary)
				res, err := testenv.KStatus(store, scheme)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(res.Status).To(Equal(tc.want), res.Message)
			})
		}
	})
	t.Run("BucketAccess", func(t *testing.T) {
		issued := accessResult{issued: &issuedKey{accessKeyID: keyV1, secretKey: "s"}, keysKnown: true,
			summary: conditions.Summary{Progress: conditions.Done, Reason: ReasonGranted, Message: "granted"}}
		cases := map[string]struct {
			res      accessResult
			deleting bool
			want     kstatus.Status
		}{
			"granted":              {res: issued, want: kstatus.CurrentStatus},
			"issuing":              {res: accessResult{summary: conditions.Summary{Progress: conditions.Working, Reason: ReasonIssuing, Message: "issuing"}}, want: kstatus.InProgressStatus},
			"bucket not ready":     {res: accessResult{summary: conditions.Summary{Progress: conditions.Working, Reason: ReasonBucketNotReady, Message: "waiting"}}, want: kstatus.InProgressStatus},
			"store down":           {res: accessResult{summary: storeDown, storeDown: true}, want: kstatus.InProgressStatus},
			"bucket not found":     {res: accessResult{summary: conditions.Summary{Progress: conditions.Blocked, Reason: ReasonBucketNotFound, Message: "no bucket"}}, want: kstatus.FailedStatus},
			"bucket stalled":       {res: accessResult{summary: conditions.Summary{Progress: conditions.Blocked, Reason: ReasonBucketNotReady, Message: "stalled"}}, want: kstatus.FailedStatus},
			"bucket being deleted": {res: accessResult{summary: conditions.Summary{Progress: conditions.Blocked, Reason: ReasonBucketDeleting, Message: "going"}}, want: kstatus.FailedStatus},
			"Secret not ours":      {res: accessResult{summary: conditions.Summary{Progress: conditions.Blocked, Reason: ReasonSecretConflict, Message: "taken"}}, want: kstatus.FailedStatus},
			"Secret refused":       {res: accessResult{summary: conditions.Summary{Progress: conditions.Blocked, Reason: ReasonSecretRejected, Message: "quota"}}, want: kstatus.FailedStatus},
			"an API error":         {res: accessResult{summary: apiError}, want: kstatus.InProgressStatus},
			"no account driver":    {res: accessResult{summary: conditions.Summary{Progress: conditions.Blocked, Reason: ReasonAccessNotSupported, Message: "S3"}}, want: kstatus.FailedStatus},
			"namespace not allowed": {res: accessResult{summary: conditions.Summary{Progress: conditions.Blocked, Reason: stores.ReasonNamespaceNotAllowed, Message: "closed"}},
				want: kstatus.FailedStatus},
			"store without IAM": {res: accessResult{summary: conditions.Summary{Progress: conditions.Blocked, Reason: string(s3.ReasonNotSupported), Message: "no IAM"}},
				want: kstatus.FailedStatus},
			"revoking": {res: accessResult{summary: conditions.Summary{Progress: conditions.Working, Reason: ReasonRevoking, Message: "store down"}},
				deleting: true, want: kstatus.TerminatingStatus},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				g := NewWithT(t)
				a := &storagev1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "app", Generation: 2},
					Spec: storagev1.BucketAccessSpec{BucketRef: storagev1.BucketReference{Name: "assets"}, Mode: storagev1.AccessReadOnly, SecretName: "s", KeyVersion: 1}}
				a.Status = computeAccessStatus(a, synced(tc.res))
				if tc.deleting {
					a.DeletionTimestamp = &now
				}
				res, err := testenv.KStatus(a, scheme)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(res.Status).To(Equal(tc.want), res.Message)
			})
		}
	})
}
