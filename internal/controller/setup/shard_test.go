package setup

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

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

// recorder is a reconciler that counts its calls.
type recorder struct{ calls int }

func (r *recorder) Reconcile(context.Context, reconcile.Request) (reconcile.Result, error) {
	r.calls++
	return reconcile.Result{}, nil
}

// A drained object is handed on and not reconciled, unless the sharder's
// webhook (played by the fake's Patch) hands it straight back to this
// shard: then the write that set the drain label may have changed it, and
// nothing else will bring it back, so it is reconciled at once.
func TestShardReconcilerDrains(t *testing.T) {
	m := &shard.Member{Ring: "views", Shard: "trellis-0"}
	cases := map[string]struct {
		labels    map[string]string
		webhook   string // the shard the webhook assigns on the drain patch; "": none
		wantCalls int
		wantShard string
	}{
		"not drained":              {labels: map[string]string{m.ShardLabel(): m.Shard}, wantCalls: 1, wantShard: m.Shard},
		"drained to another shard": {labels: map[string]string{m.ShardLabel(): m.Shard, m.DrainLabel(): "true"}, webhook: "trellis-1", wantShard: "trellis-1"},
		"drained, webhook down":    {labels: map[string]string{m.ShardLabel(): m.Shard, m.DrainLabel(): "true"}},
		"drained, handed back":     {labels: map[string]string{m.ShardLabel(): m.Shard, m.DrainLabel(): "true"}, webhook: m.Shard, wantCalls: 1, wantShard: m.Shard},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "v", Labels: tc.labels}}
			c := fake.NewClientBuilder().WithObjects(obj).WithInterceptorFuncs(interceptor.Funcs{
				Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
					if err := c.Patch(ctx, obj, patch, opts...); err != nil || tc.webhook == "" {
						return err
					}
					obj.SetLabels(map[string]string{m.ShardLabel(): tc.webhook})
					return c.Update(ctx, obj)
				},
			}).Build()
			next := &recorder{}
			r := ShardReconciler(m, "test", c, func() client.Object { return &corev1.ConfigMap{} }, next)
			if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(obj)}); err != nil {
				t.Fatalf("Reconcile: %v", err)
			}
			if next.calls != tc.wantCalls {
				t.Errorf("reconciled %d times, want %d", next.calls, tc.wantCalls)
			}
			got := &corev1.ConfigMap{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
				t.Fatal(err)
			}
			if _, ok := got.Labels[m.DrainLabel()]; ok || got.Labels[m.ShardLabel()] != tc.wantShard {
				t.Errorf("labels after: %v, want the shard label %q and no drain label", got.Labels, tc.wantShard)
			}
		})
	}
}
