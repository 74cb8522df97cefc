package view

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/manager"
	"github.com/trellis-dev/trellis/internal/shard"
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

// installShardLeasePolicy applies config/sharding/shard_lease_policy.yaml
// for the test's ring, as docs/security.md tells the operator to, and waits
// until the API server enforces it.
func (r *ring) installShardLeasePolicy() {
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "sharding", "shard_lease_policy.yaml"))
	r.g.Expect(err).NotTo(HaveOccurred())
	manifest := strings.Replace(string(raw), "'trellis-markdownviews'", "'"+testRing+"'", 1)
	manifest = strings.Replace(manifest, "'trellis-system'", "'"+testenv.ManagerNamespace+"'", 1)
	for _, doc := range strings.Split(manifest, "\n---\n") {
		obj := &unstructured.Unstructured{}
		r.g.Expect(yaml.Unmarshal([]byte(doc), &obj.Object)).To(Succeed())
		r.g.Expect(r.c.Create(r.ctx, obj)).To(Succeed())
	}
	r.g.Eventually(func() error {
		return r.c.Create(r.ctx, ringLease("default", "probe"), client.DryRunAll)
	}, time.Minute, 100*time.Millisecond).Should(Satisfy(apierrors.IsForbidden))
}

// ringLease is a Lease that looks to the sharder like a ready shard of the
// test's ring for an hour, renewed or not.
func ringLease(ns, name string) *coordinationv1.Lease {
	now := metav1.NewMicroTime(time.Now())
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{shard.RingLabel: testRing}},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity: ptr.To(name), LeaseDurationSeconds: ptr.To[int32](3600),
			AcquireTime: &now, RenewTime: &now,
		},
	}
}

// TestRingShardLeaseOfATenant: a user who may write Leases in a namespace
// of their own (as any leader-elected app there may) cannot pose as a shard
// of the ring. The sharder would take her Lease, in any namespace, for a
// shard and give it a share of everyone's views, never to be reconciled;
// with the policy docs/security.md asks for, the API server refuses the
// ring's label on a Lease outside the manager's namespace, whether she
// creates the Lease with it or adds it later, while the shards' own Leases
// work as before.
func TestRingShardLeaseOfATenant(t *testing.T) {
	if err := testenv.SharderBuilt(); err != nil {
		t.Skip(err.Error())
	}
	r := startRing(t)
	g := r.g
	r.installShardLeasePolicy()
	r.start("shard-a")
	r.availableShards(1)

	const apps = "eve-apps"
	g.Expect(r.c.Create(r.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: apps}})).To(Succeed())
	g.Expect(r.c.Create(r.ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "leader-election"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{coordinationv1.GroupName}, Resources: []string{"leases"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}},
	})).To(Succeed())
	g.Expect(r.c.Create(r.ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: apps, Name: "eve-leader-election"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "leader-election"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "eve"}},
	})).To(Succeed())
	eveCfg := rest.CopyConfig(r.cfg)
	eveCfg.Impersonate = rest.ImpersonationConfig{UserName: "eve"}
	eve, err := client.New(eveCfg, client.Options{Scheme: r.scheme})
	g.Expect(err).NotTo(HaveOccurred())

	// A shard of her own, and one named as the real shard (its name is on
	// every view it holds).
	created := eve.Create(r.ctx, ringLease(apps, "ghost"))
	named := eve.Create(r.ctx, ringLease(apps, "shard-a"))
	plain := ringLease(apps, "app-leader")
	plain.Labels = nil
	g.Expect(eve.Create(r.ctx, plain)).To(Succeed(), "an app's own Lease")
	plain.Labels = map[string]string{shard.RingLabel: testRing}
	labelled := eve.Update(r.ctx, plain)
	if created == nil {
		r.availableShards(2) // the sharder counts her Lease: the views below spread to it
	}

	g.Expect(r.c.Create(r.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}})).To(Succeed())
	for i := range 8 {
		r.views = append(r.views, fmt.Sprintf("site-%02d", i))
		g.Expect(r.c.Create(r.ctx, newMarkdownView(r.ns, r.views[i], map[string]string{"index.md": "# site"}))).To(Succeed())
	}
	for _, v := range r.views {
		mv := &viewv1.MarkdownView{}
		g.Expect(r.c.Get(r.ctx, key(r.ns, v), mv)).To(Succeed())
		g.Expect(mv.Labels).To(HaveKeyWithValue(ringMember.ShardLabel(), "shard-a"), "view %s is on a shard Trellis runs", v)
	}
	r.converge("shard-a")
	r.availableShards(1)
	for what, err := range map[string]error{"a Lease with the ring's label": created, "one named as a shard": named, "the label added": labelled} {
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s, outside the manager's namespace: %v", what, err)
	}
}
