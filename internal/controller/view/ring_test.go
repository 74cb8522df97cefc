package view

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/manager"
	"github.com/trellis-dev/trellis/internal/shard"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// testRing is the ControllerRing of the ring tests: MarkdownViews and the
// children the API server here serves (no Gateway API).
const testRing = "trellis-views"

var ringMember = shard.Member{Ring: testRing}

// ringWrite is one write a shard sent for a view: to the view, its status
// or a child named after it.
type ringWrite struct{ shard, view, request string }

// ringWrites records the shards' writes, in the order they were sent.
type ringWrites struct {
	mu  sync.Mutex
	seq []ringWrite
}

func (w *ringWrites) add(by, view, request string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seq = append(w.seq, ringWrite{shard: by, view: view, request: request})
}

// since returns the writes recorded after the n-th.
func (w *ringWrites) since(n int) []ringWrite {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.seq[min(n, len(w.seq)):])
}

func (w *ringWrites) len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.seq)
}

// viewOfPath names the view a write's path is about ("" for none): the
// view itself or its status, or a child named after it (the POST that
// creates a ConfigMap names none).
func viewOfPath(path string) string {
	parts := strings.Split(path, "/")
	if parts[len(parts)-1] == "status" {
		parts = parts[:len(parts)-1]
	}
	if len(parts) < 2 {
		return ""
	}
	name, kind := parts[len(parts)-1], parts[len(parts)-2]
	switch {
	case kind == "markdownviews":
		return name
	case strings.HasPrefix(name, viewerPrefix):
		return strings.TrimPrefix(name, viewerPrefix)
	case strings.HasPrefix(name, configMapPrefix):
		return strings.TrimPrefix(name, configMapPrefix)
	}
	return ""
}

var errPartitioned = errors.New("this shard is cut off from the API server")

// ringShard is one shard of the ring, a manager in this process whose
// connection the test can cut, as if its process were frozen or its node
// gone: it can neither renew nor release its Lease.
type ringShard struct {
	name string
	cut  atomic.Bool
	stop func() error
}

func (s *ringShard) wrap(cfg *rest.Config, writes *ringWrites) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if s.cut.Load() {
				return nil, errPartitioned
			}
			switch req.Method {
			case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
				if v := viewOfPath(req.URL.Path); v != "" {
					writes.add(s.name, v, req.Method+" "+req.URL.Path)
				}
			}
			return rt.RoundTrip(req)
		})
	})
	return out
}

// startRingShard runs the MarkdownView controller as shard name of
// testRing, as the manager's ServiceAccount (cfg), its writes recorded.
// Its informers resync every few seconds, so that every view it holds is
// reconciled again within a quiet window.
func startRingShard(g Gomega, cfg *rest.Config, scheme *k8sruntime.Scheme, writes *ringWrites, name string) *ringShard {
	s := &ringShard{name: name}
	_, s.stop = startViewManager(g, s.wrap(cfg, writes), scheme, func(o *manager.Options, _ *setup.Controller) {
		o.ControllerRing, o.PodName = testRing, name
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 10*time.Second, 8*time.Second, 2*time.Second
		o.SyncPeriod = 5 * time.Second
	})
	return s
}

// ring is one ring test's world: its API server, the shards, the views
// and the shards' writes.
type ring struct {
	g          Gomega
	ctx        context.Context
	cfg        *rest.Config // the API server's administrator
	c          client.Client
	scheme     *k8sruntime.Scheme
	managerCfg *rest.Config
	ns         string
	views      []string
	writes     ringWrites
	shards     map[string]*ringShard
}

func (r *ring) start(name string) {
	r.shards[name] = startRingShard(r.g, r.managerCfg, r.scheme, &r.writes, name)
}

// converge waits until every view is Ready for its generation on a shard
// of live, its children on the same shard, and returns each view's shard.
func (r *ring) converge(live ...string) map[string]string {
	placed := map[string]string{}
	for _, v := range r.views {
		r.g.Eventually(func(g Gomega) {
			mv := &viewv1.MarkdownView{}
			g.Expect(r.c.Get(r.ctx, key(r.ns, v), mv)).To(Succeed())
			at := mv.Labels[ringMember.ShardLabel()]
			g.Expect(live).To(ContainElement(at), "view %s is on a shard of the ring", v)
			g.Expect(mv.Labels).NotTo(HaveKey(ringMember.DrainLabel()))
			for name, child := range map[string]client.Object{
				configMapPrefix + v: &corev1.ConfigMap{}, viewerPrefix + v: &appsv1.Deployment{},
			} {
				g.Expect(r.c.Get(r.ctx, key(r.ns, name), child)).To(Succeed())
				g.Expect(metav1.IsControlledBy(child, mv)).To(BeTrue())
				g.Expect(child.GetLabels()).To(HaveKeyWithValue(ringMember.ShardLabel(), at), "%T of %s is on its view's shard", child, v)
			}
			svc := &corev1.Service{}
			g.Expect(r.c.Get(r.ctx, key(r.ns, viewerPrefix+v), svc)).To(Succeed())
			g.Expect(svc.Labels).To(HaveKeyWithValue(ringMember.ShardLabel(), at))
			d := &appsv1.Deployment{}
			g.Expect(r.c.Get(r.ctx, key(r.ns, viewerPrefix+v), d)).To(Succeed())
			if d.Status.ObservedGeneration != d.Generation || d.Status.AvailableReplicas == 0 {
				markAvailableIn(g, r.c, r.ns, viewerPrefix+v)
			}
			ready := meta.FindStatusCondition(mv.Status.Conditions, conditions.Ready)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(mv.Status.ObservedGeneration).To(Equal(mv.Generation))
			placed[v] = at
		}, 2*time.Minute, 250*time.Millisecond).Should(Succeed())
	}
	return placed
}

// writtenBy checks that every write for a view since the n-th came from
// the shard it is on now.
func (r *ring) writtenBy(n int, placed map[string]string) {
	for _, w := range r.writes.since(n) {
		if at, ok := placed[w.view]; ok {
			r.g.Expect(w.shard).To(Equal(at), "view %s is on %s, but %s wrote for it: %s", w.view, at, w.shard, w.request)
		}
	}
}

// quiet checks that no shard writes for any view while nothing changes,
// each view reconciled again meanwhile (the informers resync every 5s).
func (r *ring) quiet() {
	n := r.writes.len()
	time.Sleep(12 * time.Second)
	r.g.Expect(r.writes.since(n)).To(BeEmpty(), "writes while nothing changed")
}

// addFile adds a Markdown file to each view, so that the shard holding it
// must write its ConfigMap.
func (r *ring) addFile(views []string, file string) {
	for _, v := range views {
		r.g.Eventually(func() error {
			mv := &viewv1.MarkdownView{}
			if err := r.c.Get(r.ctx, key(r.ns, v), mv); err != nil {
				return err
			}
			mv.Spec.Markdowns[file] = viewv1.MarkdownText(file)
			return r.c.Update(r.ctx, mv)
		}, time.Minute, 200*time.Millisecond).Should(Succeed())
	}
}

// startRing installs the ControllerRing of MarkdownViews and waits until
// the sharder has written its webhook configuration (the ring Ready).
func startRing(t *testing.T) *ring {
	g := NewWithT(t)
	ctx := context.Background()
	cfg, c, scheme := ownAPIServer(t)
	sharder, err := testenv.StartSharder(ctx, cfg)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		if t.Failed() {
			t.Log("the sharder's log:\n" + sharder.Log())
		}
		_ = sharder.Stop()
	})
	cr := testenv.ViewRing(testRing)
	g.Expect(c.Create(ctx, cr)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(cr), cr)).To(Succeed())
		conds, _, _ := unstructured.NestedSlice(cr.Object, "status", "conditions")
		g.Expect(conds).To(ContainElement(HaveKeyWithValue("status", "True")))
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
	managerCfg, err := testenv.AsManager(ctx, cfg, c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(testenv.AllowLeases(ctx, c)).To(Succeed())
	r := &ring{g: g, ctx: ctx, cfg: cfg, c: c, scheme: scheme, managerCfg: managerCfg, ns: "ring", shards: map[string]*ringShard{}}
	t.Cleanup(func() {
		for _, s := range r.shards {
			_ = s.stop() // a shard cut off ends with "leader election lost"
		}
	})
	return r
}

// availableShards waits until the ring counts n shards available.
func (r *ring) availableShards(n int) {
	cr := &unstructured.Unstructured{}
	cr.SetAPIVersion("sharding.timebertt.dev/v1alpha1")
	cr.SetKind("ControllerRing")
	r.g.Eventually(func(g Gomega) {
		g.Expect(r.c.Get(r.ctx, client.ObjectKey{Name: testRing}, cr)).To(Succeed())
		got, _, _ := unstructured.NestedInt64(cr.Object, "status", "availableShards")
		g.Expect(got).To(BeEquivalentTo(n))
	}, time.Minute, 200*time.Millisecond).Should(Succeed())
}

// TestRingOfShards runs the MarkdownView controller as three shards of a
// ControllerRing with the real sharder (bin/sharder): the views spread over
// the shards, each shard writes for its own views only, and the shard label
// the sharder's webhook sets makes no shard write again when nothing
// changes. Then one shard is cut off: its Lease expires, the sharder moves
// its views, and the other shards take them over, none lost. Then a fourth
// shard joins: the sharder drains views to it, and no view is written for
// by two shards in turn (the old shard stops before the new one starts).
func TestRingOfShards(t *testing.T) {
	if err := testenv.SharderBuilt(); err != nil {
		t.Skip(err.Error())
	}
	r := startRing(t)
	g := r.g
	for _, name := range []string{"shard-a", "shard-b", "shard-c"} {
		r.start(name)
	}
	// Every shard is in the ring before a view is created, so the views
	// spread at once.
	r.availableShards(3)
	g.Expect(r.c.Create(r.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.ns}})).To(Succeed())
	r.views = make([]string, 0, 15)
	for i := range 15 {
		r.views = append(r.views, fmt.Sprintf("site-%02d", i))
		g.Expect(r.c.Create(r.ctx, newMarkdownView(r.ns, r.views[i], map[string]string{"index.md": "# " + r.views[i]}))).To(Succeed())
	}

	placed := r.converge("shard-a", "shard-b", "shard-c")
	r.writtenBy(0, placed)
	perShard := map[string]int{}
	for _, at := range placed {
		perShard[at]++
	}
	g.Expect(perShard).To(HaveLen(3), "the views spread over the three shards: %v", perShard)
	// The label the webhook set is not Trellis' to apply: it is in no
	// managedFields entry of Trellis', so the apply-if-changed comparison
	// does not see it.
	d := &appsv1.Deployment{}
	g.Expect(r.c.Get(r.ctx, key(r.ns, viewerPrefix+r.views[0]), d)).To(Succeed())
	for _, f := range d.ManagedFields {
		if f.Manager == setup.FieldManager && f.FieldsV1 != nil {
			g.Expect(f.FieldsV1.GetRawString()).NotTo(ContainSubstring(ringMember.ShardLabel()))
		}
	}
	r.quiet()

	// A shard is cut off: it can neither renew its Lease nor release it.
	// Its views move to the others when its Lease expires; a new file in
	// each shows the shard it lands on reconciles it.
	gone, live := "shard-b", []string{"shard-a", "shard-c"}
	r.shards[gone].cut.Store(true)
	var moved []string
	for v, at := range placed {
		if at == gone {
			moved = append(moved, v)
		}
	}
	g.Eventually(func(g Gomega) {
		for _, v := range moved {
			mv := &viewv1.MarkdownView{}
			g.Expect(r.c.Get(r.ctx, key(r.ns, v), mv)).To(Succeed())
			g.Expect(live).To(ContainElement(mv.Labels[ringMember.ShardLabel()]), "view %s has moved", v)
		}
	}, 2*time.Minute, 500*time.Millisecond).Should(Succeed())
	mark := r.writes.len()
	r.addFile(moved, "moved.md")
	placed = r.converge(live...)
	r.writtenBy(mark, placed)
	for _, v := range moved {
		cm := &corev1.ConfigMap{}
		g.Expect(r.c.Get(r.ctx, key(r.ns, configMapPrefix+v), cm)).To(Succeed())
		g.Expect(cm.Data).To(HaveKey("moved.md"), "view %s was reconciled where it moved", v)
	}
	r.quiet()

	// A fourth shard joins: the sharder drains some views to it, each
	// handed on by its shard (the drain label acknowledged) before the new
	// one writes for it.
	mark = r.writes.len()
	r.start("shard-d")
	live = append(live, "shard-d")
	g.Eventually(func(g Gomega) {
		list := &viewv1.MarkdownViewList{}
		g.Expect(r.c.List(r.ctx, list, client.InNamespace(r.ns))).To(Succeed())
		var joined int
		for _, mv := range list.Items {
			g.Expect(mv.Labels).NotTo(HaveKey(ringMember.DrainLabel()), "view %s is being drained", mv.Name)
			if mv.Labels[ringMember.ShardLabel()] == "shard-d" {
				joined++
			}
		}
		g.Expect(joined).To(BeNumerically(">", 0), "views drained to the new shard")
	}, 2*time.Minute, 500*time.Millisecond).Should(Succeed())
	r.addFile(r.views, "joined.md")
	before := placed
	placed = r.converge(live...)
	var drained int
	for v, at := range placed {
		if at != before[v] {
			drained++
			g.Expect(at).To(Equal("shard-d"), "view %s moved between shards that stayed", v)
		}
	}
	g.Expect(drained).To(BeNumerically(">", 0))
	r.handedOnOnce(mark, placed)
	r.quiet()
}

// handedOnOnce checks that each view's writes since the n-th come from one
// shard, then from the next, never back and forth, and last from the shard
// it is on.
func (r *ring) handedOnOnce(n int, placed map[string]string) {
	order := map[string][]string{}
	for _, w := range r.writes.since(n) {
		if seq := order[w.view]; len(seq) == 0 || seq[len(seq)-1] != w.shard {
			r.g.Expect(seq).NotTo(ContainElement(w.shard), "view %s written for by %v, then by %s again: %s", w.view, seq, w.shard, w.request)
			order[w.view] = append(seq, w.shard)
		}
	}
	for v, seq := range order {
		r.g.Expect(seq[len(seq)-1]).To(Equal(placed[v]), "the last shard to write for view %s is the one it is on", v)
	}
}
