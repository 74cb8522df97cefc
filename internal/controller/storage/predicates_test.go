package storage

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
)

func TestStoreReadyChanged(t *testing.T) {
	withReady := func(status metav1.ConditionStatus, reason string) *storagev1.ObjectStore {
		s := testStore("a")
		if status != "" {
			s.Status.Conditions = []metav1.Condition{{Type: conditions.Ready, Status: status, Reason: reason}}
		}
		return s
	}
	cases := map[string]struct {
		old, updated *storagev1.ObjectStore
		want         bool
	}{
		"first check, up":         {old: withReady("", ""), updated: withReady(metav1.ConditionTrue, "Reachable"), want: true},
		"first check, down":       {old: withReady("", ""), updated: withReady(metav1.ConditionFalse, "StoreUnreachable"), want: true},
		"went down":               {old: withReady(metav1.ConditionTrue, "Reachable"), updated: withReady(metav1.ConditionFalse, "StoreUnreachable"), want: true},
		"came back":               {old: withReady(metav1.ConditionFalse, "StoreUnreachable"), updated: withReady(metav1.ConditionTrue, "Reachable"), want: true},
		"down for another reason": {old: withReady(metav1.ConditionFalse, "StoreUnreachable"), updated: withReady(metav1.ConditionFalse, "AccessDenied"), want: false},
		"still up":                {old: withReady(metav1.ConditionTrue, "Reachable"), updated: withReady(metav1.ConditionTrue, "Reachable"), want: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(storeReadyChanged.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.updated})).To(Equal(tc.want))
		})
	}
	t.Run("a new store passes", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(storeReadyChanged.Create(event.CreateEvent{Object: testStore("a")})).To(BeTrue())
	})
}

func TestBucketCreatedOrGone(t *testing.T) {
	g := NewWithT(t)
	b := statusBucket(1, storagev1.StorageBucketStatus{})
	g.Expect(bucketCreatedOrGone.Create(event.CreateEvent{Object: b})).To(BeTrue())
	g.Expect(bucketCreatedOrGone.Delete(event.DeleteEvent{Object: b})).To(BeTrue())
	g.Expect(bucketCreatedOrGone.Update(event.UpdateEvent{ObjectOld: b, ObjectNew: b})).To(BeFalse(), "a store only counts its buckets")
	g.Expect(storeOfBucket(context.Background(), b)).To(Equal([]reconcile.Request{{NamespacedName: client.ObjectKey{Name: "store-a"}}}))
}
