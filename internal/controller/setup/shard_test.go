package setup

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/trellis-dev/trellis/internal/shard"
)

// The sharder's drain label is a label change, which a controller's own
// predicate (generation changes, say) lets through on no shard; on a shard
// it always passes, and nothing else does that the predicate refuses.
func TestShardPredicate(t *testing.T) {
	m := &shard.Member{Ring: "views", Shard: "trellis-0"}
	refuse := predicate.NewPredicateFuncs(func(_ client.Object) bool { return false })
	update := func(labels map[string]string) event.UpdateEvent {
		return event.UpdateEvent{
			ObjectOld: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "v"}},
			ObjectNew: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "v", Labels: labels}},
		}
	}
	cases := map[string]struct {
		member *shard.Member
		labels map[string]string
		want   bool
	}{
		"a shard, drained":              {member: m, labels: map[string]string{m.ShardLabel(): "trellis-0", m.DrainLabel(): "true"}, want: true},
		"a shard, not drained":          {member: m, labels: map[string]string{m.ShardLabel(): "trellis-0"}},
		"a shard, another ring's drain": {member: m, labels: map[string]string{"drain.alpha.sharding.timebertt.dev/other": "true"}},
		"no shard, a drain label":       {labels: map[string]string{m.DrainLabel(): "true"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if got := ShardPredicate(tc.member, refuse).Update(update(tc.labels)); got != tc.want {
				t.Errorf("Update passed = %v, want %v", got, tc.want)
			}
		})
	}
}
