package manager

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/shard"
)

// On a shard the cache keeps only the objects the sharder assigned to it:
// of the sharded kind and of every type its controller owns; what else a
// controller reads is not narrowed.
func TestCacheOptionsOnAShard(t *testing.T) {
	g := NewWithT(t)
	member := &shard.Member{Ring: "views", Shard: "trellis-0"}
	controllers := []setup.Controller{{
		Name: "v", Sharded: &viewv1.MarkdownView{}, Recognise: everything,
		Owned:         []client.Object{&corev1.ConfigMap{}},
		OptionalOwned: []client.Object{&networkingv1.Ingress{}},
		Transforms: []setup.Transform{
			{Object: &viewv1.MarkdownView{}, Func: func(in any) (any, error) { in.(*viewv1.MarkdownView).Labels = nil; return in, nil }},
			{Object: &corev1.Secret{}, Func: func(in any) (any, error) { return in, nil }},
		},
	}}
	served := map[string][]servedType{"v": {{obj: &networkingv1.Ingress{}, gvk: schema.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}}}}

	opts, err := cacheOptions(controllers, served, time.Hour, member)
	g.Expect(err).NotTo(HaveOccurred())
	mine := "shard.alpha.sharding.timebertt.dev/views=trellis-0"
	for obj, want := range map[client.Object]string{
		&viewv1.MarkdownView{}:  mine,
		&corev1.ConfigMap{}:     setup.ManagedByLabel + "=" + setup.ManagedByValue + "," + mine,
		&networkingv1.Ingress{}: setup.ManagedByLabel + "=" + setup.ManagedByValue + "," + mine,
	} {
		b, ok := byObjectFor(opts, obj)
		g.Expect(ok).To(BeTrue(), "%T", obj)
		g.Expect(b.Label.String()).To(Equal(want), "%T", obj)
		g.Expect(b.Label.Matches(labels.Set{setup.ManagedByLabel: setup.ManagedByValue, member.ShardLabel(): "trellis-1"})).
			To(BeFalse(), "%T of another shard", obj)
	}
	secret, ok := byObjectFor(opts, &corev1.Secret{})
	g.Expect(ok).To(BeTrue())
	g.Expect(secret.Label).To(BeNil(), "a type the ring does not place is not narrowed")

	// The ring's labels outlive a transform that drops labels: a shard reads
	// the drain label.
	mv, _ := byObjectFor(opts, &viewv1.MarkdownView{})
	out, err := mv.Transform(&viewv1.MarkdownView{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
		member.ShardLabel(): "trellis-0", member.DrainLabel(): "true", "team": "docs",
		"drain.alpha.sharding.timebertt.dev/other": "true",
	}}})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.(*viewv1.MarkdownView).Labels).To(Equal(map[string]string{member.ShardLabel(): "trellis-0", member.DrainLabel(): "true"}),
		"the ring's two labels, and no other")

	// Without a ring, nothing is narrowed by shard.
	opts, err = cacheOptions(controllers, served, time.Hour, nil)
	g.Expect(err).NotTo(HaveOccurred())
	mv, _ = byObjectFor(opts, &viewv1.MarkdownView{})
	g.Expect(mv.Label).To(BeNil())
	cm, _ := byObjectFor(opts, &corev1.ConfigMap{})
	g.Expect(cm.Label.String()).To(Equal(setup.ManagedByLabel + "=" + setup.ManagedByValue))
}

func TestEnabledControllersOnAShard(t *testing.T) {
	controllers := []setup.Controller{
		{Name: "markdownview", Sharded: &viewv1.MarkdownView{}},
		{Name: "tenant"},
		{Name: "storage"},
	}
	member := &shard.Member{Ring: "views", Shard: "trellis-0"}
	cases := map[string]struct {
		named   []string
		member  *shard.Member
		want    []string
		wantErr string
	}{
		"no ring, none named: all":         {want: []string{"markdownview", "tenant", "storage"}},
		"no ring, some named":              {named: []string{"tenant"}, want: []string{"tenant"}},
		"a shard, none named: the sharded": {member: member, want: []string{"markdownview"}},
		"a shard, the sharded named":       {member: member, named: []string{"markdownview"}, want: []string{"markdownview"}},
		"a shard, an unsharded named": {member: member, named: []string{"markdownview", "tenant", "storage"},
			wantErr: "the tenant, storage controllers do not run on a shard"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			opts := NewOptions()
			opts.Controllers = tc.named
			got, err := enabledControllers(opts, tc.member, controllers)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			var names []string
			for _, c := range got {
				names = append(names, c.Name)
			}
			g.Expect(names).To(Equal(tc.want))
		})
	}
}

func TestShardOptions(t *testing.T) {
	cases := map[string]struct {
		ring, pod string
		leader    bool
		wantErr   string
		wantShard string
	}{
		"a shard named after its pod":    {ring: "views", pod: "trellis-abc", wantShard: "trellis-abc"},
		"a shard and a leader":           {ring: "views", pod: "trellis-abc", leader: true, wantErr: "exclude each other"},
		"a pod name no Lease can take":   {ring: "views", pod: "Trellis_0", wantErr: "--controller-ring"},
		"a ring name no label can carry": {ring: "Views!", pod: "trellis-abc", wantErr: "--controller-ring"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			opts := NewOptions()
			opts.ControllerRing, opts.PodName, opts.LeaderElect = tc.ring, tc.pod, tc.leader
			err := opts.Validate([]string{"markdownview"})
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			m, err := opts.ShardMember()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(m.Shard).To(Equal(tc.wantShard))
		})
	}
	g := NewWithT(t)
	m, err := NewOptions().ShardMember()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(m).To(BeNil(), "no ring, no shard")
}
