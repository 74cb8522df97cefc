package bucket

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/outcome"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/s3"
)

// statusLongAgo is an old transition time, so "kept" and "moved" are told apart.
var statusLongAgo = metav1.NewTime(time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC))

func statusBucket(generation int64, status storagev1.StorageBucketStatus) *storagev1.StorageBucket {
	return &storagev1.StorageBucket{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "assets", Generation: generation, UID: "uid-1"},
		Spec:       storagev1.StorageBucketSpec{StoreRef: storagev1.StoreReference{Name: "store-a"}},
		Status:     status,
	}
}

func statusCondition(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: "old", ObservedGeneration: 1, LastTransitionTime: statusLongAgo}
}

var wasReady = storagev1.StorageBucketStatus{
	ObservedGeneration: 1, BucketName: "team-assets", Claim: storagev1.BucketClaimed,
	Conditions: []metav1.Condition{
		statusCondition(conditions.Ready, metav1.ConditionTrue, ReasonHealthy),
	},
}

func TestComputeBucketStatus(t *testing.T) {
	tests := map[string]struct {
		prior storagev1.StorageBucketStatus
		res   checkResult
		// want: Ready's status and reason, the condition besides Ready that
		// is True ("" for none), and the claim recorded.
		ready     metav1.ConditionStatus
		reason    string
		alsoTrue  string
		claim     storagev1.BucketClaim
		readyKept bool // Ready did not flip: its transition time stays
	}{
		"first check creates and claims": {
			res:   checkResult{summary: healthy("team-assets", "store-a"), claim: storagev1.BucketClaimed},
			ready: metav1.ConditionTrue, reason: ReasonHealthy, claim: storagev1.BucketClaimed,
		},
		"healthy again": {
			prior: wasReady, res: checkResult{summary: healthy("team-assets", "store-a")},
			ready: metav1.ConditionTrue, reason: ReasonHealthy, claim: storagev1.BucketClaimed, readyKept: true,
		},
		"store down: still the claim, and Reconciling": {
			prior: wasReady,
			res:   checkResult{summary: conditions.Summary{Progress: conditions.Working, Reason: string(s3.ReasonStoreUnreachable), Message: "down"}},
			ready: metav1.ConditionFalse, reason: string(s3.ReasonStoreUnreachable), alsoTrue: conditions.Reconciling, claim: storagev1.BucketClaimed,
		},
		"conflict: Stalled": {
			res:   blocked(ReasonConflict, "someone else's"),
			ready: metav1.ConditionFalse, reason: ReasonConflict, alsoTrue: conditions.Stalled,
		},
		"a name recorded without a claim is derived again": {
			prior: storagev1.StorageBucketStatus{BucketName: "old-name"},
			res:   blocked(ReasonConflict, "someone else's"),
			ready: metav1.ConditionFalse, reason: ReasonConflict, alsoTrue: conditions.Stalled,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			b := statusBucket(4, tt.prior)
			before := b.DeepCopy()

			st := computeBucketStatus(b, checked(tt.res), outcome.Outcome{})

			g.Expect(b).To(Equal(before), "the bucket itself is not modified")
			g.Expect(st.ObservedGeneration).To(Equal(int64(4)))
			g.Expect(st.BucketName).To(Equal("team-assets"))
			g.Expect(st.Claim).To(Equal(tt.claim))
			ready := conditions.Get(st.Conditions, conditions.Ready)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(tt.ready))
			g.Expect(ready.Reason).To(Equal(tt.reason))
			g.Expect(ready.ObservedGeneration).To(Equal(int64(4)))
			if tt.readyKept {
				g.Expect(ready.LastTransitionTime).To(Equal(statusLongAgo))
			} else {
				g.Expect(ready.LastTransitionTime.Time).To(BeTemporally("~", time.Now(), time.Minute))
			}
			for _, typ := range []string{conditions.Reconciling, conditions.Stalled} {
				if typ == tt.alsoTrue {
					g.Expect(conditions.IsTrue(st.Conditions, typ)).To(BeTrue(), typ)
				} else {
					g.Expect(conditions.Get(st.Conditions, typ)).To(BeNil(), typ)
				}
			}
		})
	}
}

// TestRecordedBucketNameIsKept: a StorageBucket that created or claimed its
// bucket under a name an earlier rule derived keeps that name; one that
// claimed nothing under it, or names its bucket, does not.
func TestRecordedBucketNameIsKept(t *testing.T) {
	g := NewWithT(t)
	b := statusBucket(1, storagev1.StorageBucketStatus{BucketName: "team-assets-0123456789", Claim: storagev1.BucketClaimed})
	b.Namespace = "team-a"
	g.Expect(stores.BucketName(b)).To(Equal("team-assets-0123456789"))
	st := computeBucketStatus(b, checked(checkResult{summary: healthy("team-assets-0123456789", "store-a")}), outcome.Outcome{})
	g.Expect(st.BucketName).To(Equal("team-assets-0123456789"))
	g.Expect(st.Claim).To(Equal(storagev1.BucketClaimed))

	b.Status.Claim = storagev1.BucketCreating
	g.Expect(stores.BucketName(b)).To(Equal("team-assets-0123456789"), "the intent to create is a claim too")
	b.Status.Claim = ""
	g.Expect(stores.BucketName(b)).To(Equal(s3.DeriveBucketName("team-a", "assets")))
	b.Spec.BucketName = "team-a-named"
	b.Status.Claim = storagev1.BucketClaimed
	g.Expect(stores.BucketName(b)).To(Equal("team-a-named"))
}

// checked is the observation of a reconcile that ran one check.
func checked(res checkResult) *bucketObservation { return &bucketObservation{checked: &res} }

// TestComputeBucketStatusBeyondChecks: what a reconcile that did not end
// with a check records. Nothing observed writes nothing; an error is
// ReconcileError, keeping what is known, and recording what was found
// before it; a deletion that waits says why.
func TestComputeBucketStatusBeyondChecks(t *testing.T) {
	errAPI := errors.New("listing the BucketAccesses: timed out")
	created := checkResult{summary: healthy("team-assets", "store-a"), claim: storagev1.BucketClaimed}
	inUse := conditions.Summary{Progress: conditions.Blocked, Reason: stores.ReasonInUse, Message: "delete them first"}
	tests := map[string]struct {
		prior storagev1.StorageBucketStatus
		obs   *bucketObservation
		out   outcome.Outcome
		// wantReason is Ready's reason, alsoTrue the condition besides it
		// that is True; unchanged: the prior status comes back as it was.
		wantReason, alsoTrue string
		wantClaim            storagev1.BucketClaim
		unchanged            bool
	}{
		"no check due: untouched": {prior: wasReady, obs: &bucketObservation{}, unchanged: true},
		"an error before any check: ReconcileError, the claim kept": {
			prior: wasReady, obs: &bucketObservation{}, out: outcome.Of(errAPI),
			wantReason: conditions.ReasonReconcileError, alsoTrue: conditions.Reconciling, wantClaim: storagev1.BucketClaimed,
		},
		"an error after a check: what it found is recorded": {
			obs: &bucketObservation{checked: &created}, out: outcome.Of(errAPI),
			wantReason: conditions.ReasonReconcileError, alsoTrue: conditions.Reconciling, wantClaim: storagev1.BucketClaimed,
		},
		"a deletion waiting for its accesses": {
			prior: wasReady, obs: &bucketObservation{waits: &inUse},
			wantReason: stores.ReasonInUse, alsoTrue: conditions.Stalled, wantClaim: storagev1.BucketClaimed,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			b := statusBucket(4, *tt.prior.DeepCopy())

			st := computeBucketStatus(b, tt.obs, tt.out)

			if tt.unchanged {
				g.Expect(st).To(Equal(tt.prior))
				return
			}
			g.Expect(st.ObservedGeneration).To(Equal(int64(4)))
			g.Expect(st.Claim).To(Equal(tt.wantClaim))
			ready := conditions.Get(st.Conditions, conditions.Ready)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Reason).To(Equal(tt.wantReason))
			g.Expect(conditions.IsTrue(st.Conditions, tt.alsoTrue)).To(BeTrue(), tt.alsoTrue)
			if tt.out.Err() != nil {
				g.Expect(ready.Message).To(Equal(errAPI.Error()))
			}
		})
	}
}

// A bucket checked again with the same result produces the very same status,
// so a healthy bucket costs no status write.
func TestComputeBucketStatusIsIdempotent(t *testing.T) {
	results := map[string]checkResult{
		"healthy":             {summary: healthy("team-assets", "store-a")},
		"healthy and claimed": {summary: healthy("team-assets", "store-a"), claim: storagev1.BucketClaimed},
		"failing":             {summary: conditions.Summary{Progress: conditions.Working, Reason: string(s3.ReasonStoreUnreachable), Message: "down"}},
		"stalled":             blocked(ReasonConflict, "taken"),
	}
	for name, res := range results {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			b := statusBucket(3, storagev1.StorageBucketStatus{})
			first := computeBucketStatus(b, checked(res), outcome.Outcome{})
			b.Status = first

			time.Sleep(2 * time.Millisecond) // a churning transition time would differ
			second := computeBucketStatus(b, checked(res), outcome.Outcome{})

			g.Expect(second).To(Equal(first))
		})
	}
}
