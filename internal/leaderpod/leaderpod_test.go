package leaderpod_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/trellis-dev/trellis/internal/leaderpod"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// admin is cluster-admin, for setting up and looking; asManager is a client
// as the manager's ServiceAccount, bound to exactly config/rbac/role.yaml.
var admin, asManager client.Client

const ns = testenv.ManagerNamespace

func TestMain(m *testing.M) {
	testenv.SetLogger()
	scheme := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	env, cfg, err := testenv.Start(scheme)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		ctx := context.Background()
		if admin, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		mcfg, err := testenv.AsManager(ctx, cfg, admin)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if asManager, err = client.New(mcfg, client.Options{Scheme: scheme}); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}()
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
	os.Exit(code)
}

// replica is one manager replica's Labeller: its pod, and its two Runnables
// run as the manager would (Startup on every replica, Leader once it leads).
type replica struct {
	l              *leaderpod.Labeller
	stopAll, stopL context.CancelFunc
	leaderDone     chan struct{}
}

func newReplica(pod string) *replica {
	return &replica{l: &leaderpod.Labeller{
		Pod:    types.NamespacedName{Namespace: ns, Name: pod},
		Reader: asManager, Writer: asManager,
		Interval: 300 * time.Millisecond, MinBackoff: 50 * time.Millisecond,
	}}
}

// start runs Startup, and Leader too when lead is true (as if it won the lease at once).
func (r *replica) start(t *testing.T, lead bool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r.stopAll = cancel
	t.Cleanup(cancel)
	go func() { _ = r.l.Startup().Start(ctx) }()
	if lead {
		r.lead(t, ctx)
	}
}

func (r *replica) lead(t *testing.T, parent context.Context) {
	t.Helper()
	ctx, cancel := context.WithCancel(parent)
	r.stopL, r.leaderDone = cancel, make(chan struct{})
	done := r.leaderDone
	t.Cleanup(func() { cancel(); <-done }) // the gauge is global: the next test starts at 0
	g := NewWithT(t)
	g.Expect(r.l.Leader().(manager.LeaderElectionRunnable).NeedLeaderElection()).To(BeTrue())
	g.Expect(r.l.Startup().(manager.LeaderElectionRunnable).NeedLeaderElection()).To(BeFalse())
	go func() { defer close(r.leaderDone); _ = r.l.Leader().Start(ctx) }()
}

// stepDown ends its leadership as a manager shutting down does, and waits for Leader to return.
func (r *replica) stepDown() {
	r.stopL()
	<-r.leaderDone
	r.stopAll()
}

func createPod(t *testing.T, name string, leader bool) {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app.kubernetes.io/component": "manager"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "trellis-manager:dev"}}},
	}
	if leader {
		p.Labels[leaderpod.Label] = "true"
	}
	NewWithT(t).Expect(admin.Create(context.Background(), p)).To(Succeed())
	t.Cleanup(func() {
		_ = admin.Delete(context.Background(), p, client.GracePeriodSeconds(0))
	})
}

// leaders names the pods of the namespace that carry the label.
func leaders(g Gomega) []string {
	pods := &corev1.PodList{}
	g.Expect(admin.List(context.Background(), pods, client.InNamespace(ns))).To(Succeed())
	var out []string
	for _, p := range pods.Items {
		if v, ok := p.Labels[leaderpod.Label]; ok {
			g.Expect(v).To(Equal("true"))
			out = append(out, p.Name)
		}
	}
	return out
}

func gauge(g Gomega) float64 {
	families, err := metrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() == "trellis_leader_pod_labelled" {
			g.Expect(f.GetType()).To(Equal(dto.MetricType_GAUGE))
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	g.Expect("trellis_leader_pod_labelled").To(BeEmpty(), "metric not registered")
	return -1
}

const timeout, poll = 10 * time.Second, 50 * time.Millisecond

// Two replicas as two pods: the leader labels its own pod and takes the
// label off the other, stale from an earlier leadership; a label put on the
// standby by hand is taken off again; on shutdown the leader takes its own
// off; the replica that leads next labels its pod.
func TestLeaderLabelsItsPodAndOnlyIt(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createPod(t, "manager-a", false)
	createPod(t, "manager-b", true) // the leader before, not leading now

	a, b := newReplica("manager-a"), newReplica("manager-b")
	b.start(t, false)
	a.start(t, true)
	g.Eventually(leaders, timeout, poll).Should(Equal([]string{"manager-a"}))
	g.Eventually(gauge, timeout, poll).Should(Equal(1.0))

	// A hand-made label on the standby does not last.
	g.Expect(admin.Patch(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "manager-b", Namespace: ns}},
		client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"trellis.dev/leader":"true"}}}`)))).To(Succeed())
	g.Eventually(leaders, timeout, poll).Should(Equal([]string{"manager-a"}))

	// Hand-over: a steps down, b takes the lease.
	a.stepDown()
	g.Expect(leaders(g)).To(BeEmpty(), "the leader takes its label off as it stops")
	g.Expect(gauge(g)).To(Equal(0.0))
	b.lead(t, context.Background())
	g.Eventually(leaders, timeout, poll).Should(Equal([]string{"manager-b"}))
	g.Consistently(leaders, time.Second, poll).Should(Equal([]string{"manager-b"}))
}

// A container restarted in the leader's pod keeps the pod and its labels: the
// replica takes the label off its own pod as it starts, before and without
// leading.
func TestRestartedReplicaTakesItsStaleLabelOff(t *testing.T) {
	g := NewWithT(t)
	createPod(t, "manager-c", true)
	c := newReplica("manager-c")
	c.start(t, false)
	g.Eventually(leaders, timeout, poll).Should(BeEmpty())
}

// When the label cannot be written (here: the pod does not exist yet) the
// leader says so in the gauge, retries with back-off, and labels the pod once
// it can.
func TestLabelWriteFailuresAreRetried(t *testing.T) {
	g := NewWithT(t)
	d := newReplica("manager-d")
	d.start(t, true)
	g.Consistently(gauge, time.Second, poll).Should(Equal(0.0))
	createPod(t, "manager-d", false)
	g.Eventually(leaders, timeout, poll).Should(Equal([]string{"manager-d"}))
	g.Eventually(gauge, timeout, poll).Should(Equal(1.0))
	d.stepDown()
}

// The manager's ServiceAccount may read and label the pods of its own
// namespace only (a Role, not a ClusterRole).
func TestPodRightsAreNamespaced(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	other := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}}
	g.Expect(admin.Create(ctx, other)).To(Succeed())
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "manager-e", Namespace: other.Name},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "manager", Image: "trellis-manager:dev"}}},
	}
	g.Expect(admin.Create(ctx, p)).To(Succeed())
	g.Expect(apierrors.IsForbidden(asManager.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{}))).To(BeTrue())
	// A cluster-wide list it has (a Tenant's Pod Security report reads pods);
	// no write of a pod outside its own namespace.
	g.Expect(asManager.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+leaderpod.Label+`":"true"}}}`)))).
		To(Satisfy(apierrors.IsForbidden), "no patch elsewhere")
	g.Expect(apierrors.IsForbidden(asManager.List(ctx, &corev1.PodList{}, client.InNamespace(ns), client.MatchingLabels{leaderpod.Label: "true"}))).To(BeFalse())
	g.Expect(asManager.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns}})).To(Satisfy(apierrors.IsForbidden), "no delete")
}
