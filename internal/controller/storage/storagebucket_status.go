package storage

import (
	"fmt"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
)

// Reasons of a StorageBucket's conditions besides those of s3.Classify
// (StoreUnreachable, AccessDenied, BucketMissing, ...), as documented in docs/storage.md.
const (
	ReasonHealthy       = "Healthy"
	ReasonReady         = "Ready"
	ReasonConflict      = "Conflict"
	ReasonStoreNotFound = "StoreNotFound"
	ReasonStoreNotReady = "StoreNotReady"
	ReasonDeleteBlocked = "DeleteBlocked"
)

// bucketObservation is what one check found.
type bucketObservation struct {
	bucket          string
	reason, message string // empty when healthy
	// claimed, when set, records whether the bucket is known to be ours.
	claimed *bool
}

func (o *bucketObservation) fail(reason, message string) { o.reason, o.message = reason, message }

// computeBucketStatus derives the status from one check. Per-check figures
// (time, latency) are metrics, not status: a healthy bucket checked again
// produces an identical status and costs no write.
func computeBucketStatus(b *storagev1.StorageBucket, obs bucketObservation) storagev1.StorageBucketStatus {
	st := *b.Status.DeepCopy()
	gen := b.Generation
	st.ObservedGeneration = gen
	st.BucketName = obs.bucket
	if obs.claimed != nil {
		st.Claimed = *obs.claimed
	}
	if obs.reason == "" {
		conditions.Set(&st.Conditions, gen, conditions.Healthy, true, ReasonHealthy, fmt.Sprintf("bucket %s answers", obs.bucket))
		conditions.Set(&st.Conditions, gen, conditions.Ready, true, ReasonReady, fmt.Sprintf("bucket %s exists in %s and is healthy", obs.bucket, b.Spec.StoreRef.Name))
		return st
	}
	conditions.Set(&st.Conditions, gen, conditions.Healthy, false, obs.reason, obs.message)
	conditions.Set(&st.Conditions, gen, conditions.Ready, false, obs.reason, obs.message)
	return st
}
