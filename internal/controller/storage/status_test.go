package storage

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/s3"
)

// statusLongAgo is an old transition time, so "kept" and "moved" are told apart.
var statusLongAgo = metav1.NewTime(time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC))

func statusBucket(generation int64, status storagev1.StorageBucketStatus) *storagev1.StorageBucket {
	b := &storagev1.StorageBucket{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "assets", Generation: generation, UID: "uid-1"},
		Spec:       storagev1.StorageBucketSpec{StoreRef: storagev1.StoreReference{Name: "store-a"}},
		Status:     status,
	}
	return b
}

func statusCondition(typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: "old", ObservedGeneration: 1, LastTransitionTime: statusLongAgo}
}

func TestComputeBucketStatusHealthy(t *testing.T) {
	tests := []struct {
		name  string
		prior storagev1.StorageBucketStatus
	}{
		{name: "first check"},
		{name: "was unhealthy", prior: storagev1.StorageBucketStatus{
			ObservedGeneration: 1, BucketName: "team-a-assets",
			Conditions: []metav1.Condition{
				statusCondition(conditions.Healthy, metav1.ConditionFalse, string(s3.ReasonStoreUnreachable)),
				statusCondition(conditions.Ready, metav1.ConditionFalse, string(s3.ReasonStoreUnreachable)),
			},
		}},
		{name: "was healthy", prior: storagev1.StorageBucketStatus{
			ObservedGeneration: 1, BucketName: "team-a-assets", Claimed: true,
			Conditions: []metav1.Condition{
				statusCondition(conditions.Healthy, metav1.ConditionTrue, ReasonHealthy),
				statusCondition(conditions.Ready, metav1.ConditionTrue, ReasonReady),
			},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			b := statusBucket(4, tt.prior)
			before := b.DeepCopy()

			st := computeBucketStatus(b, bucketObservation{bucket: "team-a-assets"})

			g.Expect(b).To(Equal(before), "the bucket itself is not modified")
			g.Expect(st.ObservedGeneration).To(Equal(int64(4)))
			g.Expect(st.BucketName).To(Equal("team-a-assets"))
			g.Expect(st.Claimed).To(Equal(tt.prior.Claimed), "no claimed observation keeps the previous value")
			g.Expect(st.Conditions).To(HaveLen(2))
			for _, c := range []struct{ typ, reason string }{{conditions.Healthy, ReasonHealthy}, {conditions.Ready, ReasonReady}} {
				got := conditions.Get(st.Conditions, c.typ)
				g.Expect(got).NotTo(BeNil(), c.typ)
				g.Expect(got.Status).To(Equal(metav1.ConditionTrue), c.typ)
				g.Expect(got.Reason).To(Equal(c.reason), c.typ)
				g.Expect(got.ObservedGeneration).To(Equal(int64(4)), c.typ)
				g.Expect(got.Message).To(ContainSubstring("team-a-assets"), c.typ)
			}
			g.Expect(conditions.Get(st.Conditions, conditions.Ready).Message).To(ContainSubstring("store-a"))
			wasTrue := conditions.IsTrue(tt.prior.Conditions, conditions.Ready)
			for _, c := range st.Conditions {
				if wasTrue {
					g.Expect(c.LastTransitionTime).To(Equal(statusLongAgo), "%s did not flip", c.Type)
				} else {
					g.Expect(c.LastTransitionTime.Time).To(BeTemporally("~", time.Now(), time.Minute), "%s flipped", c.Type)
				}
			}
		})
	}
}

func TestComputeBucketStatusFailure(t *testing.T) {
	tests := []struct {
		reason  string
		message string
	}{
		{reason: string(s3.ReasonStoreUnreachable), message: "ObjectStore store-a: the object store did not answer: connection refused"},
		{reason: string(s3.ReasonAccessDenied), message: "the object store refused the credentials or the request (AccessDenied)"},
		{reason: ReasonConflict, message: "bucket team-a-assets already exists in store-a"},
		{reason: ReasonStoreNotFound, message: "ObjectStore store-a does not exist"},
		{reason: ReasonStoreNotReady, message: "ObjectStore store-a has not been checked yet"},
	}
	for _, tt := range tests {
		t.Run(tt.reason, func(t *testing.T) {
			g := NewWithT(t)
			b := statusBucket(2, storagev1.StorageBucketStatus{
				ObservedGeneration: 1, BucketName: "team-a-assets", Claimed: true,
				Conditions: []metav1.Condition{
					statusCondition(conditions.Healthy, metav1.ConditionTrue, ReasonHealthy),
					statusCondition(conditions.Ready, metav1.ConditionTrue, ReasonReady),
				},
			})
			obs := bucketObservation{bucket: "team-a-assets"}
			obs.fail(tt.reason, tt.message)

			st := computeBucketStatus(b, obs)

			g.Expect(st.ObservedGeneration).To(Equal(int64(2)))
			g.Expect(st.BucketName).To(Equal("team-a-assets"))
			g.Expect(st.Claimed).To(BeTrue())
			g.Expect(st.Conditions).To(HaveLen(2))
			for _, typ := range []string{conditions.Healthy, conditions.Ready} {
				got := conditions.Get(st.Conditions, typ)
				g.Expect(got).NotTo(BeNil(), typ)
				g.Expect(got.Status).To(Equal(metav1.ConditionFalse), typ)
				g.Expect(got.Reason).To(Equal(tt.reason), typ)
				g.Expect(got.Message).To(Equal(tt.message), typ)
				g.Expect(got.ObservedGeneration).To(Equal(int64(2)), typ)
				g.Expect(got.LastTransitionTime).NotTo(Equal(statusLongAgo), "%s flipped to False", typ)
			}
		})
	}
}

func TestComputeBucketStatusClaimed(t *testing.T) {
	yes, no := true, false
	tests := []struct {
		prior   bool
		claimed *bool
		want    bool
	}{
		{prior: false, claimed: nil, want: false},
		{prior: true, claimed: nil, want: true},
		{prior: false, claimed: &yes, want: true},
		{prior: true, claimed: &yes, want: true},
		{prior: true, claimed: &no, want: false},
		{prior: false, claimed: &no, want: false},
	}
	for _, tt := range tests {
		name := "nil"
		if tt.claimed != nil {
			name = fmt.Sprint(*tt.claimed)
		}
		for _, healthy := range []bool{true, false} {
			t.Run(fmt.Sprintf("prior %v, claimed %s, healthy %v", tt.prior, name, healthy), func(t *testing.T) {
				g := NewWithT(t)
				b := statusBucket(1, storagev1.StorageBucketStatus{Claimed: tt.prior})
				obs := bucketObservation{bucket: "team-a-assets", claimed: tt.claimed}
				if !healthy {
					obs.fail(ReasonConflict, "someone else's")
				}
				g.Expect(computeBucketStatus(b, obs).Claimed).To(Equal(tt.want))
				g.Expect(b.Status.Claimed).To(Equal(tt.prior), "the input is not modified")
			})
		}
	}
}

// A bucket checked again with the same result produces the very same status,
// so a healthy bucket costs no status write.
func TestComputeBucketStatusIsIdempotent(t *testing.T) {
	yes := true
	tests := []struct {
		name string
		obs  bucketObservation
	}{
		{name: "healthy", obs: bucketObservation{bucket: "team-a-assets"}},
		{name: "healthy and claimed", obs: bucketObservation{bucket: "team-a-assets", claimed: &yes}},
		{name: "failing", obs: bucketObservation{bucket: "team-a-assets", reason: string(s3.ReasonStoreUnreachable), message: "down"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			b := statusBucket(3, storagev1.StorageBucketStatus{})
			first := computeBucketStatus(b, tt.obs)
			b.Status = first

			time.Sleep(2 * time.Millisecond) // a churning transition time would differ
			second := computeBucketStatus(b, tt.obs)

			g.Expect(second).To(Equal(first))
			b.Status = *second.DeepCopy()
			g.Expect(computeBucketStatus(b, tt.obs)).To(Equal(first))
		})
	}
}

func TestComputeBucketStatusFollowsGeneration(t *testing.T) {
	g := NewWithT(t)
	b := statusBucket(1, storagev1.StorageBucketStatus{})
	obs := bucketObservation{bucket: "team-a-assets"}
	b.Status = computeBucketStatus(b, obs)
	transitions := map[string]metav1.Time{}
	for _, c := range b.Status.Conditions {
		transitions[c.Type] = c.LastTransitionTime
	}

	b.Generation = 2
	st := computeBucketStatus(b, obs)

	g.Expect(st.ObservedGeneration).To(Equal(int64(2)))
	for _, c := range st.Conditions {
		g.Expect(c.ObservedGeneration).To(Equal(int64(2)), c.Type)
		g.Expect(c.LastTransitionTime).To(Equal(transitions[c.Type]), "%s did not flip", c.Type)
	}
}
