package children

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// lagging is a client whose writes go to the API server but whose reads come
// from a cache that may be behind, as the manager's client is.
type lagging struct {
	client.Client               // the API server: writes
	cache         client.Reader // reads
}

func (l lagging) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return l.cache.Get(ctx, key, obj, opts...)
}

// requests records what reached the API server.
type requests struct{ reads, writes []string }

func (r *requests) funcs() interceptor.Funcs {
	return interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			r.reads = append(r.reads, "GET "+key.Name)
			return c.Get(ctx, key, obj, opts...)
		},
		Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			r.writes = append(r.writes, "CREATE "+obj.GetName())
			return c.Create(ctx, obj, opts...)
		},
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
			r.writes = append(r.writes, "PATCH "+obj.GetName())
			return c.Patch(ctx, obj, patch, opts...)
		},
		Delete: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.DeleteOption) error {
			r.writes = append(r.writes, "DELETE "+obj.GetName())
			return c.Delete(ctx, obj, opts...)
		},
	}
}

func marked(data string, labels map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", Labels: labels}, Data: map[string]string{"k": data}}
}

// errUnsure is an owns function that cannot tell (a cache read failed).
var errUnsure = errors.New("cache read failed")

// ownsMarked: marked "mine" is ours, "other" someone else's; "unsure"
// cannot be told (deciding needs a read, and it fails).
func ownsMarked(cm *corev1.ConfigMap) (bool, error) {
	if cm.Labels["mark"] == "unsure" {
		return false, errUnsure
	}
	return cm.Labels["mark"] == "mine", nil
}

func TestCreateOrSync(t *testing.T) {
	mine := map[string]string{"mark": "mine"}
	cases := map[string]struct {
		cached, server []client.Object
		expectExists   bool
		want           Outcome
		wantNotOwned   bool
		wantErr        error
		wantReads      []string
		wantWrites     []string
		wantData       string
	}{
		"absent: created, nothing read": {
			want: Created, wantWrites: []string{"CREATE c"}, wantData: "want",
		},
		"ours and as wanted: nothing sent": {
			cached: []client.Object{marked("want", mine)}, server: []client.Object{marked("want", mine)},
			want: Unchanged, wantData: "want",
		},
		"ours, drifted: patched": {
			cached: []client.Object{marked("drift", mine)}, server: []client.Object{marked("drift", mine)},
			want: Updated, wantWrites: []string{"PATCH c"}, wantData: "want",
		},
		"ours, cache behind: the refused create tells, one read decides": {
			server: []client.Object{marked("want", mine)},
			want:   Unchanged, wantReads: []string{"GET c"}, wantWrites: []string{"CREATE c"}, wantData: "want",
		},
		"ours, cache behind, expected to exist: read, not created": {
			server: []client.Object{marked("want", mine)}, expectExists: true,
			want: Unchanged, wantReads: []string{"GET c"}, wantData: "want",
		},
		"expected to exist but gone: created": {
			expectExists: true,
			want:         Created, wantReads: []string{"GET c"}, wantWrites: []string{"CREATE c"}, wantData: "want",
		},
		"foreign, outside the cache: refused, never written": {
			server:       []client.Object{marked("theirs", nil)},
			wantNotOwned: true, wantReads: []string{"GET c"}, wantWrites: []string{"CREATE c"}, wantData: "theirs",
		},
		"foreign, in the cache: refused, nothing sent": {
			cached: []client.Object{marked("theirs", map[string]string{"mark": "other"})}, server: []client.Object{marked("theirs", map[string]string{"mark": "other"})},
			wantNotOwned: true, wantData: "theirs",
		},
		"cannot tell whose: an error, not a conflict, nothing sent": {
			cached: []client.Object{marked("theirs", map[string]string{"mark": "unsure"})}, server: []client.Object{marked("theirs", map[string]string{"mark": "unsure"})},
			wantErr: errUnsure, wantData: "theirs",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			var reqs requests
			server := fake.NewClientBuilder().WithObjects(tc.server...).WithInterceptorFuncs(reqs.funcs()).Build()
			c := Clients{Cached: lagging{Client: server, cache: fake.NewClientBuilder().WithObjects(tc.cached...).Build()}, Uncached: server}
			live := &corev1.ConfigMap{}
			got, err := CreateOrSync(context.Background(), c, Child[*corev1.ConfigMap]{
				Kind: "ConfigMap", Live: live, Desired: marked("want", mine), Owns: ownsMarked,
				Sync: func(cm *corev1.ConfigMap) bool {
					if cm.Data["k"] == "want" {
						return false
					}
					cm.Data = map[string]string{"k": "want"}
					return true
				},
				ExpectExists: tc.expectExists,
			})
			g.Expect(IsNotOwned(err)).To(Equal(tc.wantNotOwned), "err %v", err)
			switch {
			case tc.wantErr != nil:
				g.Expect(err).To(MatchError(tc.wantErr))
			case !tc.wantNotOwned:
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(got).To(Equal(tc.want))
				g.Expect(live.Name).To(Equal("c"), "live is filled")
			}
			g.Expect(reqs.reads).To(Equal(tc.wantReads))
			g.Expect(reqs.writes).To(Equal(tc.wantWrites))
			stored := &corev1.ConfigMap{}
			g.Expect(server.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "c"}, stored)).To(Succeed())
			g.Expect(stored.Data["k"]).To(Equal(tc.wantData))
		})
	}
}

func TestDeleteOwned(t *testing.T) {
	mine := map[string]string{"mark": "mine"}
	cases := map[string]struct {
		cached, server []client.Object
		wantDeleted    bool
		wantErr        error
	}{
		"ours":                         {cached: []client.Object{marked("x", mine)}, server: []client.Object{marked("x", mine)}, wantDeleted: true},
		"not in the cache: never ours": {server: []client.Object{marked("x", mine)}},
		"someone else's":               {cached: []client.Object{marked("x", nil)}, server: []client.Object{marked("x", nil)}},
		"already gone from the server": {cached: []client.Object{marked("x", mine)}},
		"nowhere":                      {},
		"cannot tell whose: kept, and an error": {
			cached: []client.Object{marked("x", map[string]string{"mark": "unsure"})}, server: []client.Object{marked("x", map[string]string{"mark": "unsure"})},
			wantErr: errUnsure,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			server := fake.NewClientBuilder().WithObjects(tc.server...).Build()
			c := Clients{Cached: lagging{Client: server, cache: fake.NewClientBuilder().WithObjects(tc.cached...).Build()}, Uncached: server}
			deleted, err := DeleteOwned(context.Background(), c, "ConfigMap", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}, ownsMarked)
			if tc.wantErr != nil {
				g.Expect(err).To(MatchError(tc.wantErr))
			} else {
				g.Expect(err).NotTo(HaveOccurred())
			}
			g.Expect(deleted).To(Equal(tc.wantDeleted))
			err = server.Get(context.Background(), client.ObjectKey{Namespace: "ns", Name: "c"}, &corev1.ConfigMap{})
			g.Expect(client.IgnoreNotFound(err)).To(Succeed())
			if len(tc.server) > 0 {
				g.Expect(err != nil).To(Equal(tc.wantDeleted), "on the server: %v", err)
			}
		})
	}
}
