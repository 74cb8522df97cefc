package view

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/manager"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// ringEditor is a namespace editor of the ring's namespace who may write
// MarkdownViews there, and the ring's labels on them: nothing stops that.
func (r *ring) ringEditor(user string) client.Client {
	r.g.Expect(testenv.ApplyClusterRoles(r.ctx, r.c, "config/rbac/markdownview_editor_role.yaml")).To(Succeed())
	cfg, err := testenv.AsNamespaceEditor(r.ctx, r.cfg, r.c, user, []string{r.ns}, "markdownview-editor-role")
	r.g.Expect(err).NotTo(HaveOccurred())
	c, err := client.New(cfg, client.Options{Scheme: r.scheme})
	r.g.Expect(err).NotTo(HaveOccurred())
	return c
}

// TestRingDrainLabelWithAnEdit: an editor sets the ring's drain label on
// their own view in the same write as a change of its spec (a manifest
// saved while the sharder drained the view, applied again). The shard hands
// the view on, and the webhook, whose ring still hashes it to that shard,
// gives it straight back; no later event carries the change (the label
// removal is no generation change), so the shard must reconcile the view
// then, not at its next resync (10 h by default).
func TestRingDrainLabelWithAnEdit(t *testing.T) {
	if err := testenv.SharderBuilt(); err != nil {
		t.Skip(err.Error())
	}
	r := startRing(t)
	g := r.g
	s := &ringShard{name: "shard-a"}
	_, s.stop = startViewManager(g, s.wrap(r.managerCfg, &r.writes), r.scheme, func(o *manager.Options, _ *setup.Controller) {
		o.ControllerRing, o.PodName = testRing, s.name // and the default resync
	})
	r.shards[s.name] = s
	r.availableShards(1)
	g.Expect(r.c.Create(r.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}})).To(Succeed())
	editor := r.ringEditor("mallory")
	const v = "own-site"
	r.views = []string{v}
	g.Expect(editor.Create(r.ctx, newMarkdownView(r.ns, v, map[string]string{"index.md": "# own"}))).To(Succeed())
	r.converge(s.name)

	g.Eventually(func() error {
		mv := &viewv1.MarkdownView{}
		if err := editor.Get(r.ctx, key(r.ns, v), mv); err != nil {
			return err
		}
		mv.Spec.Markdowns["again.md"] = "# again"
		mv.Labels[ringMember.DrainLabel()] = "true"
		return editor.Update(r.ctx, mv)
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(r.c.Get(r.ctx, key(r.ns, configMapPrefix+v), cm)).To(Succeed())
		g.Expect(cm.Data).To(HaveKey("again.md"))
	}, 30*time.Second, 250*time.Millisecond).Should(Succeed(), "the change that came with the drain label is reconciled")
	r.converge(s.name)
	r.quiet()
}
