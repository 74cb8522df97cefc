package storage

import (
	"k8s.io/apimachinery/pkg/api/meta"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
)

// computeBucketStatus derives the status from one check. Per-check figures
// (time, latency) are metrics, not status: a healthy bucket checked again
// produces an identical status and costs no write.
func computeBucketStatus(b *storagev1.StorageBucket, res checkResult) storagev1.StorageBucketStatus {
	st := *b.Status.DeepCopy()
	gen := b.Generation
	st.ObservedGeneration = gen
	if name := bucketName(b); st.BucketName != name {
		st.BucketName, st.Claim = name, ""
	}
	if res.claim != "" {
		st.Claim = res.claim
	}
	meta.RemoveStatusCondition(&st.Conditions, "Healthy") // written by earlier versions; Ready says it now
	conditions.Summarize(&st.Conditions, gen, res.summary)
	return st
}
