//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// TestTenantQuotaHoldsUnderParallelPods: a tenant admin creates and deletes
// pods as fast as they can, in parallel, in three namespaces of a Tenant
// whose quota.tenant allows 6 pods in all; the real kube-controller-manager
// counts the quotas. Sampled all along (pods and quotas listed at one
// resourceVersion), the pods that exist never exceed 6, except by pods that
// a namespace's own quota does not count: Kubernetes' quota controller,
// recounting a namespace on a pod's deletion from an informer that has not
// seen a pod just admitted, writes status.used below what admission counted
// (kubernetes/kubernetes#123434), and so a namespace's own quota can let
// one pod too many in. The test fails on any pod over the limit that no
// such undercount explains. It also reports how often a pod was refused
// while the tenant had room (the price of never overshooting).
func TestTenantQuotaHoldsUnderParallelPods(t *testing.T) {
	useLocalManager(t)
	installTenantAdmissionPolicy(t)
	const name, limit = "tq", int64(6)
	namespaces := []string{name + "-a", name + "-b", name + "-c"}
	manifest := fmt.Sprintf(`apiVersion: tenancy.trellis.dev/v1
kind: Tenant
metadata: {name: %[1]s}
spec:
  namespaces: [a, b, c]
  namespacePrefix: %[1]s-
  admins: [{kind: Group, name: %[1]s-admins, apiGroup: rbac.authorization.k8s.io}]
  quota: {tenant: {hard: {pods: "%[2]d"}}}
`, name, limit)
	if _, err := kubectlIn([]byte(manifest), "apply", "--server-side", "-f", "-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = kubectl("delete", "tenant", name, "--wait=true", "--timeout=120s") })
	if _, err := kubectl("wait", "--for=condition=Ready", "tenant/"+name, "--timeout=120s"); err != nil {
		t.Fatal(err)
	}

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	admin, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	asTenant := *cfg
	asTenant.Impersonate.UserName, asTenant.Impersonate.Groups = "alice", []string{name + "-admins"}
	alice, err := kubernetes.NewForConfig(&asTenant)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, ns := range namespaces { // the admin's binding is in the authorizer's cache
		waitFor(t, 60*time.Second, func() error { _, err := alice.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); return err })
	}

	h := &hammer{tenant: name, limit: limit, alice: alice, admin: admin, stop: make(chan struct{})}
	const duration, workersPerNamespace = 60 * time.Second, 4
	var wg sync.WaitGroup
	for w := range workersPerNamespace * len(namespaces) {
		wg.Go(func() { h.work(ctx, namespaces[w%len(namespaces)], uint64(w)) })
	}
	wg.Go(func() { h.sample(ctx) })
	time.Sleep(duration)
	close(h.stop)
	wg.Wait()

	t.Logf("tenant quota %d pods over 3 namespaces, %d workers for %s: %d pods created, %d refused, %d of them while the tenant had room; "+
		"max pods seen %d, max summed quota usage %d, max known to the workers %d (%d samples); "+
		"samples with a pod its namespace's quota did not count %d, over the limit by such pods only %d; other errors %d",
		limit, workersPerNamespace*len(namespaces), duration, h.created.Load(), h.refused.Load(), h.refusedWithRoom.Load(),
		h.maxPods.Load(), h.maxUsed.Load(), h.maxKnown.Load(), h.samples.Load(),
		h.uncountedSamples.Load(), h.explainedOver.Load(), h.otherErrors.Load())
	if v := h.lastOther.Load(); v != nil {
		t.Logf("last other error: %v", v)
	}
	if v := h.lastExplained.Load(); v != nil {
		t.Logf("last sample over the limit by uncounted pods only: %v", v)
	}
	// The pods that exist are the truth; what no undercount of a namespace's
	// own quota explains is Trellis' to answer for. (A split that grants
	// more than the limit lasts: it shows in samples without an undercount.)
	if v := h.unexplained.Load(); v != nil {
		t.Errorf("the tenant went over its quota of %d pods, with no undercount of a namespace's quota to explain it: %v", limit, v)
	}
	if h.created.Load() < 50 {
		t.Errorf("only %d pods created in %s: the hammer did not hammer", h.created.Load(), duration)
	}
	if h.samples.Load() < 100 {
		t.Errorf("only %d samples", h.samples.Load())
	}
}

// hammer creates and deletes a tenant's pods as its admin, and samples
// what exists.
type hammer struct {
	tenant       string
	limit        int64
	alice, admin *kubernetes.Clientset
	stop         chan struct{}

	exists            atomic.Int64 // pods created and not yet deleted, as the workers know it
	created, refused  atomic.Int64
	refusedWithRoom   atomic.Int64
	maxPods, maxUsed  atomic.Int64
	maxKnown, samples atomic.Int64
	otherErrors       atomic.Int64
	lastOther         atomic.Value

	uncountedSamples, explainedOver atomic.Int64
	lastExplained, unexplained      atomic.Value // a snapshot's text
}

func raiseTo(a *atomic.Int64, v int64) {
	for cur := a.Load(); v > cur && !a.CompareAndSwap(cur, v); cur = a.Load() {
	}
}

// work creates pods in ns, and deletes one of its own half the time.
func (h *hammer) work(ctx context.Context, ns string, seed uint64) {
	rnd := rand.New(rand.NewPCG(seed, 26))
	var mine []string
	for {
		select {
		case <-h.stop:
			return
		default:
		}
		if len(mine) > 0 && rnd.IntN(2) == 0 {
			// Counted gone before the request: the workers' count never
			// runs ahead of the pods that exist.
			i := rnd.IntN(len(mine))
			h.exists.Add(-1)
			err := h.alice.CoreV1().Pods(ns).Delete(ctx, mine[i], metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			if err != nil && !apierrors.IsNotFound(err) {
				h.exists.Add(1)
				continue
			}
			mine = append(mine[:i], mine[i+1:]...)
			continue
		}
		before := h.exists.Load()
		pod, err := h.alice.CoreV1().Pods(ns).Create(ctx, quotaPod(h.tenant), metav1.CreateOptions{})
		switch {
		case err == nil:
			h.created.Add(1)
			raiseTo(&h.maxKnown, h.exists.Add(1))
			mine = append(mine, pod.Name)
		case apierrors.IsForbidden(err):
			h.refused.Add(1)
			if before < h.limit {
				h.refusedWithRoom.Add(1)
			}
		default: // quota admission losing its own race with a quota write: a 409
			h.otherErrors.Add(1)
			h.lastOther.Store(err.Error())
		}
	}
}

// sample records the most pods that exist at once, and the most the
// quotas count, from snapshots: the pods listed, then the quotas listed at
// exactly the pods' resourceVersion (a sum of reads one after the other is
// not a snapshot). A pod over the limit must be one its namespace's quota
// does not count.
func (h *hammer) sample(ctx context.Context) {
	for {
		select {
		case <-h.stop:
			return
		case <-time.After(20 * time.Millisecond):
		}
		podList, err := h.admin.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: "e2e.trellis.dev/hammer=" + h.tenant})
		if err != nil {
			continue
		}
		quotas, err := h.admin.CoreV1().ResourceQuotas("").List(ctx, metav1.ListOptions{
			LabelSelector:        "tenancy.trellis.dev/tenant=" + h.tenant,
			ResourceVersion:      podList.ResourceVersion,
			ResourceVersionMatch: metav1.ResourceVersionMatchExact,
		})
		if err != nil {
			continue
		}
		s := snapshotOf(podList.ResourceVersion, podList.Items, quotas.Items)
		h.samples.Add(1)
		raiseTo(&h.maxPods, s.pods)
		raiseTo(&h.maxUsed, s.used)
		if s.uncounted > 0 {
			h.uncountedSamples.Add(1)
		}
		switch over := s.pods - h.limit; {
		case over <= 0:
		case over <= s.uncounted:
			h.explainedOver.Add(1)
			h.lastExplained.Store(s.String())
		default:
			h.unexplained.Store(s.String())
		}
	}
}

// quotaSnapshot is a tenant's pods and pod quotas at one resourceVersion.
type quotaSnapshot struct {
	resourceVersion string
	pods, used      int64
	// uncounted is the pods the namespaces' quotas do not count: summed over
	// namespaces, the pods there beyond the quota's status.used. Quota
	// admission counts a pod before it is stored, so only a recount that
	// missed a pod leaves one uncounted.
	uncounted   int64
	namespaces  []string
	byNamespace map[string]*namespaceCount
}

type namespaceCount struct{ pods, used, hard, spec int64 }

func snapshotOf(rv string, pods []corev1.Pod, quotas []corev1.ResourceQuota) quotaSnapshot {
	s := quotaSnapshot{resourceVersion: rv, byNamespace: map[string]*namespaceCount{}}
	count := func(ns string) *namespaceCount {
		if s.byNamespace[ns] == nil {
			s.byNamespace[ns] = &namespaceCount{}
			s.namespaces = append(s.namespaces, ns)
		}
		return s.byNamespace[ns]
	}
	for _, p := range pods {
		if p.DeletionTimestamp.IsZero() {
			count(p.Namespace).pods++
			s.pods++
		}
	}
	for _, q := range quotas {
		c := count(q.Namespace)
		used, hard, spec := q.Status.Used[corev1.ResourcePods], q.Status.Hard[corev1.ResourcePods], q.Spec.Hard[corev1.ResourcePods]
		c.used, c.hard, c.spec = used.Value(), hard.Value(), spec.Value()
		s.used += c.used
	}
	slices.Sort(s.namespaces)
	for _, c := range s.byNamespace {
		s.uncounted += max(c.pods-c.used, 0)
	}
	return s
}

func (s quotaSnapshot) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "at resourceVersion %s: %d pods, %d counted by the quotas", s.resourceVersion, s.pods, s.used)
	for _, ns := range s.namespaces {
		c := s.byNamespace[ns]
		fmt.Fprintf(&b, "; %s: %d pods, quota used %d, status.hard %d, spec.hard %d", ns, c.pods, c.used, c.hard, c.spec)
	}
	return b.String()
}

// quotaPod is a pod that needs nothing to count against a quota: it is
// never run here.
func quotaPod(tenant string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "hammer-", Labels: map[string]string{"e2e.trellis.dev/hammer": tenant}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1"}},
		},
	}
}

// waitFor retries f until it succeeds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
