package access

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/storage/storagetest"
)

func TestBucketStateChanged(t *testing.T) {
	base := storagetest.ClaimedBucket()
	now := metav1.Now()
	cases := map[string]struct {
		change func(*storagev1.StorageBucket)
		want   bool
	}{
		"nothing":               {change: func(*storagev1.StorageBucket) {}},
		"a health check's news": {change: func(b *storagev1.StorageBucket) { b.Status.Conditions[0].Message = "slow" }},
		"spec interval":         {change: func(b *storagev1.StorageBucket) { b.Generation = 2 }},
		"claim":                 {change: func(b *storagev1.StorageBucket) { b.Status.Claim = storagev1.BucketCreating }, want: true},
		"bucket name":           {change: func(b *storagev1.StorageBucket) { b.Status.BucketName = "other" }, want: true},
		"deletion starts":       {change: func(b *storagev1.StorageBucket) { b.DeletionTimestamp = &now }, want: true},
		"stalled": {change: func(b *storagev1.StorageBucket) {
			b.Status.Conditions = append(b.Status.Conditions, metav1.Condition{Type: conditions.Stalled, Status: metav1.ConditionTrue})
		}, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			updated := base.DeepCopy()
			tc.change(updated)
			g.Expect(bucketStateChanged.Update(event.UpdateEvent{ObjectOld: base, ObjectNew: updated})).To(Equal(tc.want))
		})
	}
}
