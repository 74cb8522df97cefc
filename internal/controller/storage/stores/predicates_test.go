package stores

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
)

func newStore(name string) *storagev1.ObjectStore {
	return &storagev1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1}}
}

func TestStoreReadyChanged(t *testing.T) {
	withReady := func(status metav1.ConditionStatus, reason string) *storagev1.ObjectStore {
		s := newStore("a")
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
			g.Expect(StoreReadyChanged.Update(event.UpdateEvent{ObjectOld: tc.old, ObjectNew: tc.updated})).To(Equal(tc.want))
		})
	}
	t.Run("a new store passes", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(StoreReadyChanged.Create(event.CreateEvent{Object: newStore("a")})).To(BeTrue())
	})
}

func TestStoreReadyChangedFollowsTheStoreController(t *testing.T) {
	g := NewWithT(t)
	old := newStore("a")
	old.Status.ObservedGeneration = 1
	old.Status.Conditions = []metav1.Condition{{Type: conditions.Ready, Status: metav1.ConditionTrue, Reason: "Reachable"}}
	edited := old.DeepCopy()
	edited.Generation = 2
	g.Expect(StoreReadyChanged.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: edited})).To(BeFalse(),
		"a spec change alone: its users would only find the store not checked yet")
	seen := edited.DeepCopy()
	seen.Status.ObservedGeneration = 2
	g.Expect(StoreReadyChanged.Update(event.UpdateEvent{ObjectOld: edited, ObjectNew: seen})).To(BeTrue(),
		"the store controller took in the new spec (a selector may have changed)")
}
