package tenancy

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/pod-security-admission/api"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/children"
)

// Pod Security must hold whatever ran before the level: Pod Security
// admission judges a pod only when it is admitted, so Trellis judges the
// pods that were there, reports those that do not meet the level, and never
// touches them.

// podReads records the pod lists the manager sends (the suite wraps its
// connection with it).
var podReads requestLog

// requestLog records the paths of the pod lists sent through a rest.Config
// it wrapped.
type requestLog struct {
	mu    sync.Mutex
	paths []string
}

func (l *requestLog) Wrap(cfg *rest.Config) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/pods") {
				l.mu.Lock()
				l.paths = append(l.paths, req.URL.Path)
				l.mu.Unlock()
			}
			return rt.RoundTrip(req)
		})
	})
	return out
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// podListsIn counts the pod lists the manager has sent so far in
// namespaces whose name starts with prefix.
func podListsIn(prefix string) int {
	podReads.mu.Lock()
	defer podReads.mu.Unlock()
	n := 0
	for _, p := range podReads.paths {
		if strings.HasPrefix(p, "/api/v1/namespaces/"+prefix) {
			n++
		}
	}
	return n
}

// defaultServiceAccount makes what the kube-controller-manager (not run by
// envtest) makes in every namespace: pods without a ServiceAccount name are
// admitted only once it exists.
func defaultServiceAccount(g Gomega, ns string) {
	g.Expect(k8s.Create(context.Background(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "default"}})).To(Succeed())
}

// setPodSecurity sets a Tenant's enforce level, as the platform team would.
func setPodSecurity(g Gomega, name string, level tenancyv1.PodSecurityLevel) {
	t := getTenant(g, name)
	before := t.DeepCopy()
	t.Spec.PodSecurity = tenancyv1.PodSecurity{Enforce: level}
	g.Expect(k8s.Patch(context.Background(), t, client.MergeFrom(before))).To(Succeed())
}

// eventuallyPodsMeetPodSecurity waits until the Tenant is Ready for its
// generation with PodsMeetPodSecurity as wanted, and returns the condition.
func eventuallyPodsMeetPodSecurity(g Gomega, name string, meet bool) *metav1.Condition {
	var c *metav1.Condition
	g.Eventually(func(g Gomega) {
		t := getTenant(g, name)
		st := t.Status
		g.Expect(st.ObservedGeneration).To(Equal(t.Generation))
		g.Expect(conditions.IsTrue(st.Conditions, conditions.Ready)).To(BeTrue(), "status: %+v", st)
		c = conditions.Get(st.Conditions, ConditionPodsMeetPodSecurity)
		g.Expect(c).NotTo(BeNil(), "status: %+v", st)
		g.Expect(c.ObservedGeneration).To(Equal(st.ObservedGeneration))
		if meet {
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "status: %+v", st)
			g.Expect(c.Reason).To(Equal(ReasonPodsMeetLevel))
		} else {
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse), "status: %+v", st)
			g.Expect(c.Reason).To(Equal(ReasonPodsViolateLevel))
		}
	}, timeout, interval).Should(Succeed())
	return c
}

// expectPodUntouched checks that a pod is exactly as it was.
func expectPodUntouched(g Gomega, was *corev1.Pod) {
	now := &corev1.Pod{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(was), now)).To(Succeed())
	g.Expect(now.UID).To(Equal(was.UID))
	g.Expect(now.ResourceVersion).To(Equal(was.ResourceVersion), "never written")
	g.Expect(now.DeletionTimestamp).To(BeNil())
}

// TestRaisingPodSecurityReportsPodsThatCameBefore: a tenant admin runs a
// privileged pod while the tenant's level is privileged; the platform then
// raises it to restricted. New privileged pods are refused, the old one
// keeps running, and the Tenant says so: Ready (the level is in place), with
// PodsMeetPodSecurity False naming the pod, and a Warning Event. Trellis
// never touches the pod; while it runs, a reconcile writes nothing; once the
// team deletes it, the report clears, and a quiet Tenant writes nothing and
// lists no pod.
func TestRaisingPodSecurityReportsPodsThatCameBefore(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tenant := newTenant("psraise", "psraise-", "a", "b")
	tenant.Spec.PodSecurity = tenancyv1.PodSecurity{Enforce: tenancyv1.PodSecurityPrivileged}
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	eventuallyReady(g, "psraise")
	g.Expect(conditions.Get(getTenant(g, "psraise").Status.Conditions, ConditionPodsMeetPodSecurity)).To(BeNil(),
		"under privileged every pod meets the level")
	emulateBuiltinRoles(g, "psraise-a", "psraise-b")
	defaultServiceAccount(g, "psraise-a")
	alice := clientAs(g, "alice", "psraise-admins")
	root := restrictedPod("psraise-a", "root", true)
	g.Eventually(func() error { return alice.Create(ctx, root) }, timeout, interval).Should(Succeed())
	app := restrictedPod("psraise-a", "app", false)
	g.Expect(alice.Create(ctx, app)).To(Succeed())

	setPodSecurity(g, "psraise", tenancyv1.PodSecurityRestricted)
	c := eventuallyPodsMeetPodSecurity(g, "psraise", false)
	g.Expect(c.Message).To(Equal("pod psraise-a/root (privileged, allowPrivilegeEscalation != false, unrestricted capabilities) " +
		"does not meet the Pod Security level restricted its namespace enforces: admission judges a pod only when it is admitted, " +
		"so it keeps running. New pods are held to the level; Trellis deletes none: replace it with a pod that meets the level"))
	g.Eventually(func(g Gomega) {
		g.Expect(tenantEventReasons(g, "psraise")).To(ContainElement(ReasonPodsViolateLevel))
	}, timeout, interval).Should(Succeed())
	g.Expect(getNamespace(g, "psraise-a").Labels).To(HaveKeyWithValue(podSecurityEnforceLabel, "restricted"))
	err := alice.Create(ctx, restrictedPod("psraise-a", "root-again", true))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a new privileged pod: %v", err)
	g.Expect(err.Error()).To(ContainSubstring("violates PodSecurity"))
	expectPodUntouched(g, root)

	// Reported and unchanged, a reconcile writes nothing; it judges the pods
	// again (so the report clears when they go).
	waitForQuiet(g)
	mgrWrites.Reset()
	lists := podListsIn("psraise-")
	for range 3 {
		_, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: "psraise"}})
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(writesFor("psraise")).To(BeEmpty())
	g.Expect(podListsIn("psraise-")-lists).To(BeNumerically(">=", 6), "both namespaces judged at each reconcile")
	expectPodUntouched(g, root)

	// The team deletes it: the next re-verification (every 2 s here) clears
	// the report.
	g.Expect(alice.Delete(ctx, root)).To(Succeed())
	c = eventuallyPodsMeetPodSecurity(g, "psraise", true)
	g.Expect(c.Message).To(Equal("every pod in the tenant's namespaces meets the Pod Security level restricted"))

	// Quiet again: no write, and no pod listed, directly or by the
	// periodic re-verification.
	waitForQuiet(g)
	mgrWrites.Reset()
	lists = podListsIn("psraise-")
	for range 3 {
		_, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: "psraise"}})
		g.Expect(err).NotTo(HaveOccurred())
	}
	time.Sleep(5 * time.Second)
	g.Expect(writesFor("psraise")).To(BeEmpty())
	g.Expect(podListsIn("psraise-")).To(Equal(lists), "a quiet Tenant lists no pod")
	expectPodUntouched(g, app)
	deleteTenant(g, "psraise")
}

// TestPodSecurityHoldsInAHandedOverNamespace: a namespace a team ran
// without Trellis holds a privileged pod; a cluster admin then sets
// restricted on it by hand (the pod keeps running) and hands it over to a
// Tenant of that level. Trellis' write changes no level, so nothing but the
// namespace joining the Tenant says its pods were never judged: the Tenant
// reports the pod all the same, and leaves it running.
func TestPodSecurityHoldsInAHandedOverNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "pshand-legacy"}})).To(Succeed())
	defaultServiceAccount(g, "pshand-legacy")
	old := restrictedPod("pshand-legacy", "old", true)
	old.Spec.HostNetwork = true
	g.Expect(k8s.Create(ctx, old)).To(Succeed())
	ns := getNamespace(g, "pshand-legacy")
	ns.Labels[podSecurityEnforceLabel] = "restricted"
	g.Expect(k8s.Update(ctx, ns)).To(Succeed())
	old = &corev1.Pod{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "pshand-legacy", Name: "old"}, old)).To(Succeed())

	tenant := newTenant("pshand", "pshand-", "legacy")
	tenant.Spec.PodSecurity = tenancyv1.PodSecurity{Enforce: tenancyv1.PodSecurityRestricted}
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(nsState(g, "pshand", "pshand-legacy").State).To(Equal(tenancyv1.NamespaceConflict))
	}, timeout, interval).Should(Succeed())

	ns = getNamespace(g, "pshand-legacy")
	ns.Annotations = map[string]string{HandOverAnnotation: "pshand"}
	g.Expect(k8s.Update(ctx, ns)).To(Succeed())
	// The blocked Tenant's retry, run now (as in TestHandOverIsAClusterAdminsAct).
	_, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKey{Name: "pshand"}})
	g.Expect(err).NotTo(HaveOccurred())

	c := eventuallyPodsMeetPodSecurity(g, "pshand", false)
	g.Expect(c.Message).To(HavePrefix("pod pshand-legacy/old (host namespaces, privileged, "))
	g.Expect(getNamespace(g, "pshand-legacy").Labels).To(HaveKeyWithValue(TenantLabel, "pshand"), "handed over")
	expectPodUntouched(g, old)
	deleteTenant(g, "pshand")
}

// podSecurityCases are pods, each with the verdict of the baseline and the
// restricted level on it. base meets restricted; each case changes one
// thing.
func podSecurityCases() []struct {
	name                    string
	change                  func(*corev1.Pod)
	breaksBaseline, breaksR bool
} {
	sc := func(p *corev1.Pod) *corev1.SecurityContext { return p.Spec.Containers[0].SecurityContext }
	return []struct {
		name                    string
		change                  func(*corev1.Pod)
		breaksBaseline, breaksR bool
	}{
		{"meets restricted", func(*corev1.Pod) {}, false, false},
		{"no security context", func(p *corev1.Pod) { p.Spec.SecurityContext, p.Spec.Containers[0].SecurityContext = nil, nil }, false, true},
		{"privileged", func(p *corev1.Pod) { sc(p).Privileged, sc(p).AllowPrivilegeEscalation = ptr.To(true), nil }, true, true},
		{"privileged init container", func(p *corev1.Pod) {
			init := *p.Spec.Containers[0].DeepCopy()
			init.Name, init.SecurityContext.Privileged, init.SecurityContext.AllowPrivilegeEscalation = "init", ptr.To(true), nil
			p.Spec.InitContainers = []corev1.Container{init}
		}, true, true},
		{"host network", func(p *corev1.Pod) { p.Spec.HostNetwork = true }, true, true},
		{"host PID", func(p *corev1.Pod) { p.Spec.HostPID = true }, true, true},
		{"host IPC", func(p *corev1.Pod) { p.Spec.HostIPC = true }, true, true},
		{"hostPath volume", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
		}, true, true},
		{"host port", func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}
		}, true, true},
		{"adds SYS_ADMIN", func(p *corev1.Pod) { sc(p).Capabilities.Add = []corev1.Capability{"SYS_ADMIN"} }, true, true},
		{"adds CHOWN (a baseline default)", func(p *corev1.Pod) { sc(p).Capabilities.Add = []corev1.Capability{"CHOWN"} }, false, true},
		{"adds NET_BIND_SERVICE (restricted allows it)", func(p *corev1.Pod) {
			sc(p).Capabilities.Add = []corev1.Capability{"NET_BIND_SERVICE"}
		}, false, false},
		{"seccomp unconfined", func(p *corev1.Pod) {
			p.Spec.SecurityContext.SeccompProfile = &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined}
		}, true, true},
		{"no seccomp profile", func(p *corev1.Pod) { p.Spec.SecurityContext.SeccompProfile = nil }, false, true},
		{"SELinux type of its own", func(p *corev1.Pod) { sc(p).SELinuxOptions = &corev1.SELinuxOptions{Type: "spc_t"} }, true, true},
		{"unsafe sysctl", func(p *corev1.Pod) {
			p.Spec.SecurityContext.Sysctls = []corev1.Sysctl{{Name: "kernel.msgmax", Value: "65536"}}
		}, true, true},
		{"AppArmor unconfined", func(p *corev1.Pod) {
			sc(p).AppArmorProfile = &corev1.AppArmorProfile{Type: corev1.AppArmorProfileTypeUnconfined}
		}, true, true},
		{"may escalate privileges", func(p *corev1.Pod) { sc(p).AllowPrivilegeEscalation = nil }, false, true},
		{"runs as root", func(p *corev1.Pod) { p.Spec.SecurityContext.RunAsNonRoot = nil }, false, true},
		{"runs as UID 0", func(p *corev1.Pod) { sc(p).RunAsUser = ptr.To(int64(0)) }, false, true},
		{"an NFS volume", func(p *corev1.Pod) {
			p.Spec.Volumes = []corev1.Volume{{Name: "nfs", VolumeSource: corev1.VolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs.example", Path: "/x"}}}}
		}, false, true},
	}
}

// TestPodSecurityVerdictAgreesWithAdmission feeds podSecurityCases to the
// API server's Pod Security admission (dry runs, as a cluster admin, in
// namespaces that enforce baseline and restricted) and to violates, on the
// pod as the API server stores it (so as a list returns it): both refuse
// exactly the pods the table says.
func TestPodSecurityVerdictAgreesWithAdmission(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	levels := []api.Level{api.LevelPrivileged, api.LevelBaseline, api.LevelRestricted}
	for _, l := range levels {
		g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: "psv-" + string(l), Labels: map[string]string{podSecurityEnforceLabel: string(l)},
		}})).To(Succeed())
		defaultServiceAccount(g, "psv-"+string(l))
	}
	refused := func(g Gomega, p *corev1.Pod) bool {
		err := k8s.Create(ctx, p, client.DryRunAll)
		if err == nil {
			return false
		}
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "refused for another reason: %v", err)
		g.Expect(err.Error()).To(ContainSubstring("violates PodSecurity"))
		return true
	}
	for _, tc := range podSecurityCases() {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			pod := restrictedPod("psv-privileged", "probe", false)
			tc.change(pod)
			stored := pod.DeepCopy()
			g.Expect(k8s.Create(ctx, stored, client.DryRunAll)).To(Succeed(), "privileged admits every pod")
			for l, want := range map[api.Level]bool{api.LevelBaseline: tc.breaksBaseline, api.LevelRestricted: tc.breaksR} {
				p := pod.DeepCopy()
				p.Namespace = "psv-" + string(l)
				g.Expect(refused(g, p)).To(Equal(want), "Pod Security admission, %s", l)
				_, breaks := violates(api.LevelVersion{Level: l, Version: api.LatestVersion()}, stored)
				g.Expect(breaks).To(Equal(want), "Trellis, %s, on %+v", l, stored.Spec)
			}
		})
	}
	for _, l := range levels {
		g.Expect(k8s.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "psv-" + string(l)}})).To(Succeed())
	}
}

// TestFinishedPodsRunNothing: a pod that has finished is not judged; one
// still pending or running is.
func TestFinishedPodsRunNothing(t *testing.T) {
	lv := api.LevelVersion{Level: api.LevelRestricted, Version: api.LatestVersion()}
	for phase, want := range map[corev1.PodPhase]bool{
		"": true, corev1.PodPending: true, corev1.PodRunning: true, corev1.PodUnknown: true,
		corev1.PodSucceeded: false, corev1.PodFailed: false,
	} {
		t.Run(string(phase), func(t *testing.T) {
			g := NewWithT(t)
			p := restrictedPod("ns", "p", true)
			p.Status.Phase = phase
			fails, breaks := violates(lv, p)
			g.Expect(breaks).To(Equal(want))
			if want {
				g.Expect(fails).To(HavePrefix("privileged"))
			}
		})
	}
}

// TestPodsAreJudgedWhereTheLevelMayHaveChanged: which ready namespaces a
// reconcile judges. Not depending on having seen the level change: a spec
// whose pods were not judged yet is judged everywhere, even where this
// reconcile changed no label (the level was raised while the manager was
// down, or a reconcile stopped before its status).
func TestPodsAreJudgedWhereTheLevelMayHaveChanged(t *testing.T) {
	judged := func(status metav1.ConditionStatus, gen int64) []metav1.Condition {
		return []metav1.Condition{{Type: ConditionPodsMeetPodSecurity, Status: status, ObservedGeneration: gen}}
	}
	ready := []string{"a", "b", "c"}
	was := map[string]bool{"a": true, "b": true, "c": true}
	cases := map[string]struct {
		conds    []metav1.Condition
		wasReady map[string]bool
		levels   map[string]levelWrite
		want     []string
	}{
		"quiet: this spec judged, every pod met it":   {conds: judged(metav1.ConditionTrue, 2), wasReady: was},
		"a spec never judged":                         {wasReady: was, want: ready},
		"the spec changed since it was judged":        {conds: judged(metav1.ConditionTrue, 1), wasReady: was, want: ready},
		"pods were found that did not meet the level": {conds: judged(metav1.ConditionFalse, 2), wasReady: was, want: ready},
		"a namespace that just became the tenant's": {conds: judged(metav1.ConditionTrue, 2),
			wasReady: map[string]bool{"a": true, "c": true}, want: []string{"b"}},
		"a level put back by this reconcile": {conds: judged(metav1.ConditionTrue, 2), wasReady: was,
			levels: map[string]levelWrite{"c": levelChanged}, want: []string{"c"}},
		"a namespace this reconcile created holds nothing from before": {wasReady: map[string]bool{},
			levels: map[string]levelWrite{"a": levelCreated, "b": levelCreated, "c": levelCreated}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			tenant := unitTenant("a", "uid-a", "a-", "a", "b", "c")
			tenant.Generation, tenant.Status.Conditions = 2, tc.conds
			g.Expect(namespacesToJudge(tenant, ready, tc.wasReady, tc.levels)).To(Equal(tc.want))
		})
	}
}

// TestLevelWritten: what a namespace's write did to its enforce label.
func TestLevelWritten(t *testing.T) {
	ns := func(level string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{podSecurityEnforceLabel: level}}}
	}
	g := NewWithT(t)
	g.Expect(levelWritten(children.Created, "", ns("restricted"))).To(Equal(levelCreated))
	g.Expect(levelWritten(children.Updated, "privileged", ns("restricted"))).To(Equal(levelChanged))
	g.Expect(levelWritten(children.Updated, "", ns("restricted"))).To(Equal(levelChanged), "a level set on a namespace that had none")
	g.Expect(levelWritten(children.Updated, "restricted", ns("restricted"))).To(Equal(levelKept), "another label written")
	g.Expect(levelWritten(children.Unchanged, "restricted", ns("restricted"))).To(Equal(levelKept))
}

// TestPodSecurityMessage names the first pods in the order of the
// namespaces, with what they fail, and counts the others.
func TestPodSecurityMessage(t *testing.T) {
	g := NewWithT(t)
	namespaces := []tenancyv1.TenantNamespaceStatus{{Name: "t-dev"}, {Name: "t-prod"}}
	pods := func(n int, names ...string) violatingPods {
		v := violatingPods{count: n}
		for _, name := range names {
			v.first = append(v.first, violatingPod{name: name, fails: "privileged"})
		}
		return v
	}
	msg := podSecurityMessage(tenancyv1.PodSecurityBaseline, namespaces, map[string]violatingPods{
		"t-prod": pods(4, "p1", "p2", "p3", "p4"), "t-dev": pods(9, "d1", "d2", "d3", "d4", "d5"),
	})
	g.Expect(msg).To(HavePrefix("13 pods do not meet the Pod Security level baseline their namespaces enforce: " +
		"t-dev/d1 (privileged), t-dev/d2 (privileged), t-dev/d3 (privileged), t-dev/d4 (privileged), t-dev/d5 (privileged) and 8 more. "))
	g.Expect(msg).To(HaveSuffix("replace them with pods that meet the level"))
	g.Expect(len(msg)).To(BeNumerically("<", 1024))
}
