package access

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
// BucketAccess.
func TestKStatusReadsEveryStatus(t *testing.T) {
	now := metav1.Now()
	issued := accessResult{issued: &issuedKey{Key: stores.Key{AccessKeyID: keyV1}, secretKey: "s"}, keysKnown: true,
		summary: conditions.Summary{Progress: conditions.Done, Reason: ReasonGranted, Message: "granted"}}
	cases := map[string]struct {
		res      accessResult
		deleting bool
		want     kstatus.Status
	}{
		"granted":              {res: issued, want: kstatus.CurrentStatus},
		"issuing":              {res: accessResult{summary: conditions.Summary{Progress: conditions.Working, Reason: ReasonIssuing, Message: "issuing"}}, want: kstatus.InProgressStatus},
		"bucket not ready":     {res: accessResult{summary: conditions.Summary{Progress: conditions.Working, Reason: ReasonBucketNotReady, Message: "waiting"}}, want: kstatus.InProgressStatus},
		"store down":           {res: accessResult{summary: storagetest.StoreDown, storeDown: true}, want: kstatus.InProgressStatus},
		"bucket not found":     {res: accessResult{summary: conditions.Summary{Progress: conditions.Blocked, Reason: ReasonBucketNotFound, Message: "no bucket"}}, want: kstatus.FailedStatus},
		"bucket stalled":       {res: accessResult{summary: conditions.Summary{Progress: conditions.Blocked, Reason: ReasonBucketNotReady, Message: "stalled"}}, want: kstatus.FailedStatus},
		"bucket being deleted": {res: accessResult{summary: conditions.Summary{Progress: conditions.Blocked, Reason: ReasonBucketDeleting, Message: "going"}}, want: kstatus.FailedStatus},
		"Secret not ours":      {res: accessResult{summary: conditions.Summary{Progress: conditions.Blocked, Reason: ReasonSecretConflict, Message: "taken"}}, want: kstatus.FailedStatus},
		"Secret refused":       {res: accessResult{summary: conditions.Summary{Progress: conditions.Blocked, Reason: ReasonSecretRejected, Message: "quota"}}, want: kstatus.FailedStatus},
		"an API error":         {res: accessResult{summary: storagetest.APIError}, want: kstatus.InProgressStatus},
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
			a.Status = computeAccessStatus(a, synced(tc.res), outcome.Outcome{})
			if tc.deleting {
				a.DeletionTimestamp = &now
			}
			res, err := testenv.KStatus(a, storagetest.Scheme)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(res.Status).To(Equal(tc.want), res.Message)
		})
	}
}
