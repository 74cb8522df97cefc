package statusmemo

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

type status struct{ Ready bool }

func TestLatest(t *testing.T) {
	var m Memo
	u, v := types.NamespacedName{Namespace: "a", Name: "u"}, types.NamespacedName{Namespace: "a", Name: "v"}
	if _, ok := m.Latest(u, "1"); ok {
		t.Fatal("nothing written yet")
	}
	m.Wrote(u, "1", status{true})
	if got, ok := m.Latest(u, "1"); !ok || got != (status{true}) {
		t.Errorf("cache still at the version before our write: want our status, got %v %v", got, ok)
	}
	if _, ok := m.Latest(u, "2"); ok {
		t.Error("the cache moved on (someone else may have changed status): use it instead")
	}
	if _, ok := m.Latest(v, "1"); ok {
		t.Error("another object")
	}
	m.Forget(u)
	if _, ok := m.Latest(u, "1"); ok {
		t.Error("forgotten")
	}
}
