package view

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	kstatus "github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/testenv"
)

const (
	timeout  = 20 * time.Second
	interval = 50 * time.Millisecond
)

var nsCounter atomic.Int32

// newNamespace gives each test its own namespace.
func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("mdv-%d", nsCounter.Add(1))}}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func newMarkdownView(ns, name string, files map[string]string) *viewv1.MarkdownView {
	md := map[string]viewv1.MarkdownText{}
	for k, v := range files {
		md[k] = viewv1.MarkdownText(v)
	}
	return &viewv1.MarkdownView{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       viewv1.MarkdownViewSpec{Markdowns: md},
	}
}

func key(ns, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: ns, Name: name}
}

// markAvailable plays the Deployment controller, which envtest does not run.
func markAvailable(g Gomega, ns, name string) { markAvailableIn(g, k8s, ns, name) }

// markAvailableIn is markAvailable on the API server c reaches.
func markAvailableIn(g Gomega, c client.Client, ns, name string) {
	g.Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(c.Get(context.Background(), key(ns, name), d)).To(Succeed())
		n := *d.Spec.Replicas
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n,
			Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable"},
				{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
			},
		}
		g.Expect(c.Status().Update(context.Background(), d)).To(Succeed())
	}, timeout, interval).Should(Succeed())
}

// readyCondition is the MarkdownView's Ready condition; a status not written
// yet fails g (so Eventually tries again) instead of returning nil.
func readyCondition(g Gomega, ns, name string) *metav1.Condition {
	mv := &viewv1.MarkdownView{}
	g.Expect(k8s.Get(context.Background(), key(ns, name), mv)).To(Succeed())
	c := meta.FindStatusCondition(mv.Status.Conditions, conditions.Ready)
	g.Expect(c).NotTo(BeNil(), "no Ready condition yet")
	return c
}

func TestCreatesChildrenAndBecomesReady(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	mv := newMarkdownView(ns, "handbook", map[string]string{"SUMMARY.md": "- [A](a.md)", "a.md": "# A"})
	mv.Spec.Replicas = 2
	g.Expect(k8s.Create(ctx, mv)).To(Succeed())

	cm := &corev1.ConfigMap{}
	g.Eventually(func() error { return k8s.Get(ctx, key(ns, "markdowns-handbook"), cm) }, timeout, interval).Should(Succeed())
	g.Expect(cm.Data).To(Equal(map[string]string{"SUMMARY.md": "- [A](a.md)", "a.md": "# A"}))
	g.Expect(metav1.IsControlledBy(cm, mv)).To(BeTrue())
	g.Expect(cm.Labels).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "trellis"))

	d := &appsv1.Deployment{}
	g.Eventually(func() error { return k8s.Get(ctx, key(ns, "viewer-handbook"), d) }, timeout, interval).Should(Succeed())
	g.Expect(metav1.IsControlledBy(d, mv)).To(BeTrue())
	g.Expect(*d.Spec.Replicas).To(Equal(int32(2)))
	pod := d.Spec.Template.Spec
	g.Expect(pod.Containers).To(HaveLen(1))
	g.Expect(pod.Containers[0].Image).To(Equal(testViewerImage))
	g.Expect(*pod.AutomountServiceAccountToken).To(BeFalse())
	g.Expect(*pod.SecurityContext.RunAsNonRoot).To(BeTrue())
	g.Expect(*pod.Containers[0].SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
	g.Expect(pod.Containers[0].SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
	g.Expect(pod.Volumes[0].ConfigMap.Name).To(Equal("markdowns-handbook"))

	svc := &corev1.Service{}
	g.Eventually(func() error { return k8s.Get(ctx, key(ns, "viewer-handbook"), svc) }, timeout, interval).Should(Succeed())
	g.Expect(metav1.IsControlledBy(svc, mv)).To(BeTrue())
	g.Expect(svc.Spec.Ports[0].Port).To(Equal(int32(80)))
	g.Expect(svc.Spec.Selector).To(Equal(selectorLabels(mv)))

	// Not Ready until the Deployment rolls out; then Ready without any polling.
	g.Expect(k8s.Get(ctx, key(ns, "handbook"), mv)).To(Succeed())
	g.Expect(meta.IsStatusConditionTrue(mv.Status.Conditions, conditions.Ready)).To(BeFalse())
	markAvailable(g, ns, "viewer-handbook")
	g.Eventually(func(g Gomega) {
		got := &viewv1.MarkdownView{}
		g.Expect(k8s.Get(ctx, key(ns, "handbook"), got)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, conditions.Ready)).To(BeTrue())
		g.Expect(got.Status.AvailableReplicas).To(Equal(int32(2)))
		g.Expect(got.Status.URL).To(Equal("http://viewer-handbook." + ns + ".svc"))
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
	}, timeout, interval).Should(Succeed())

	// The transition to Ready is announced with an Event.
	g.Eventually(func(g Gomega) {
		events := &corev1.EventList{}
		g.Expect(k8s.List(ctx, events, client.InNamespace(ns))).To(Succeed())
		var reasons []string
		for _, e := range events.Items {
			reasons = append(reasons, e.Reason)
		}
		g.Expect(reasons).To(ContainElement(conditions.ReasonReady))
	}, timeout, interval).Should(Succeed())
}

func TestConfigMapFollowsSpecExactly(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	mv := newMarkdownView(ns, "docs", map[string]string{"a.md": "A", "b.md": "B"})
	g.Expect(k8s.Create(ctx, mv)).To(Succeed())
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(k8s.Get(ctx, key(ns, "markdowns-docs"), cm)).To(Succeed())
		g.Expect(cm.Data).To(HaveLen(2))
	}, timeout, interval).Should(Succeed())

	// Drop b.md and edit a.md: the ConfigMap holds exactly the new files.
	g.Expect(k8s.Get(ctx, key(ns, "docs"), mv)).To(Succeed())
	mv.Spec.Markdowns = map[string]viewv1.MarkdownText{"a.md": "A2", "c.md": "C"}
	g.Expect(k8s.Update(ctx, mv)).To(Succeed())
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(k8s.Get(ctx, key(ns, "markdowns-docs"), cm)).To(Succeed())
		g.Expect(cm.Data).To(Equal(map[string]string{"a.md": "A2", "c.md": "C"}))
	}, timeout, interval).Should(Succeed())
}

func TestDriftIsRestored(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(k8s.Create(ctx, newMarkdownView(ns, "drift", map[string]string{"a.md": "A"}))).To(Succeed())
	d := &appsv1.Deployment{}
	g.Eventually(func() error { return k8s.Get(ctx, key(ns, "viewer-drift"), d) }, timeout, interval).Should(Succeed())

	// Hand-edit the Deployment's replicas and the ConfigMap's data.
	d.Spec.Replicas = ptr.To[int32](5)
	g.Expect(k8s.Update(ctx, d)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &appsv1.Deployment{}
		g.Expect(k8s.Get(ctx, key(ns, "viewer-drift"), got)).To(Succeed())
		g.Expect(*got.Spec.Replicas).To(Equal(int32(1)))
	}, timeout, interval).Should(Succeed())

	cm := &corev1.ConfigMap{}
	g.Expect(k8s.Get(ctx, key(ns, "markdowns-drift"), cm)).To(Succeed())
	cm.Data["evil.md"] = "<script>"
	cm.Data["a.md"] = "changed"
	g.Expect(k8s.Update(ctx, cm)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &corev1.ConfigMap{}
		g.Expect(k8s.Get(ctx, key(ns, "markdowns-drift"), got)).To(Succeed())
		g.Expect(got.Data).To(Equal(map[string]string{"a.md": "A"}))
	}, timeout, interval).Should(Succeed())

	// Hand-edit the Service's selector and the Deployment's pod template:
	// the cache keeps neither spec, only the hash of what Trellis applied,
	// and both come back.
	svc := &corev1.Service{}
	g.Eventually(func() error { return k8s.Get(ctx, key(ns, "viewer-drift"), svc) }, timeout, interval).Should(Succeed())
	selector := maps.Clone(svc.Spec.Selector)
	svc.Spec.Selector = map[string]string{"app": "someone-else"}
	g.Expect(k8s.Update(ctx, svc)).To(Succeed())
	g.Expect(k8s.Get(ctx, key(ns, "viewer-drift"), d)).To(Succeed())
	image := d.Spec.Template.Spec.Containers[0].Image
	d.Spec.Template.Spec.Containers[0].Image = "example.com/other:1"
	g.Expect(k8s.Update(ctx, d)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &corev1.Service{}
		g.Expect(k8s.Get(ctx, key(ns, "viewer-drift"), got)).To(Succeed())
		g.Expect(got.Spec.Selector).To(Equal(selector))
		gotD := &appsv1.Deployment{}
		g.Expect(k8s.Get(ctx, key(ns, "viewer-drift"), gotD)).To(Succeed())
		g.Expect(gotD.Spec.Template.Spec.Containers[0].Image).To(Equal(image))
	}, timeout, interval).Should(Succeed())

	// Delete the Service: it comes back. (It is applied beside the Deployment, not after it.)
	g.Expect(k8s.Get(ctx, key(ns, "viewer-drift"), svc)).To(Succeed())
	oldUID := svc.UID
	g.Expect(k8s.Delete(ctx, svc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &corev1.Service{}
		g.Expect(k8s.Get(ctx, key(ns, "viewer-drift"), got)).To(Succeed())
		g.Expect(got.UID).NotTo(Equal(oldUID))
	}, timeout, interval).Should(Succeed())
}

func TestUnchangedMarkdownViewMakesZeroWrites(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(k8s.Create(ctx, newMarkdownView(ns, "quiet", map[string]string{"a.md": "A"}))).To(Succeed())
	g.Eventually(func() error { return k8s.Get(ctx, key(ns, "viewer-quiet"), &appsv1.Deployment{}) }, timeout, interval).Should(Succeed())
	markAvailable(g, ns, "viewer-quiet")
	g.Eventually(func(g Gomega) {
		g.Expect(readyCondition(g, ns, "quiet").Status).To(Equal(metav1.ConditionTrue))
	}, timeout, interval).Should(Succeed())

	// Let the manager settle, then reconcile the same object again, many times:
	// nothing may be written, neither children, status nor Events.
	g.Eventually(func() error {
		before, _ := mgrWrites.Writes()
		time.Sleep(500 * time.Millisecond)
		if after, paths := mgrWrites.Writes(); after != before {
			return fmt.Errorf("still writing: %v", paths[before:])
		}
		return nil
	}, timeout, interval).Should(Succeed())
	mgrWrites.Reset()
	for range 5 {
		res, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: key(ns, "quiet")})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res).To(Equal(ctrl.Result{}))
	}
	g.Expect(writesIn(ns)).To(BeEmpty())
}

// TestNewViewTakesFourWrites: a new view costs the manager four writes (its
// ConfigMap, Deployment and Service, and one status) and the Ready Event.
// While the viewer rolls out, the API server serves the view with the status
// the CRD defaults, observedGeneration 0, which kstatus reads as InProgress;
// once Ready, it reads Current. After an edit, the status that said Ready is
// rewritten at once.
func TestNewViewTakesFourWrites(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	// mine are the manager's writes in ns, the Events apart.
	mine := func() (writes, events []string) {
		_, paths := mgrWrites.Writes()
		for _, p := range paths {
			switch {
			case !strings.Contains(p, "/namespaces/"+ns+"/"):
			case strings.HasPrefix(p, "POST /apis/events.k8s.io/"):
				events = append(events, p)
			default:
				writes = append(writes, p)
			}
		}
		return writes, events
	}
	children := []string{
		"POST /api/v1/namespaces/" + ns + "/configmaps",
		"PATCH /apis/apps/v1/namespaces/" + ns + "/deployments/viewer-four",
		"PATCH /api/v1/namespaces/" + ns + "/services/viewer-four",
	}
	statusWrite := "PATCH /apis/view.trellis.dev/v1/namespaces/" + ns + "/markdownviews/four/status"

	mv := newMarkdownView(ns, "four", map[string]string{"a.md": "A"})
	g.Expect(k8s.Create(ctx, mv)).To(Succeed())
	g.Eventually(func() []string { w, _ := mine(); return w }, timeout, interval).Should(HaveLen(len(children)))
	// The reconciles the new children start write nothing either.
	g.Consistently(func() []string { w, _ := mine(); return w }, 2*time.Second, interval).Should(ConsistOf(children))

	res, served, err := testenv.KStatusOnServer(ctx, k8s, mv)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(served.Object["status"]).To(Equal(map[string]any{"observedGeneration": int64(0)}), "the status the CRD defaults")
	g.Expect(res.Status).To(Equal(kstatus.InProgressStatus), res.Message)

	markAvailable(g, ns, "viewer-four")
	g.Eventually(func(g Gomega) {
		res, _, err := testenv.KStatusOnServer(ctx, k8s, mv)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Status).To(Equal(kstatus.CurrentStatus), res.Message)
	}, timeout, interval).Should(Succeed())
	g.Eventually(func() []string { _, e := mine(); return e }, timeout, interval).Should(HaveLen(1), "the Ready Event")
	g.Consistently(func() []string { w, _ := mine(); return w }, 2*time.Second, interval).Should(ConsistOf(append(children, statusWrite)))
	_, events := mine()
	g.Expect(events).To(HaveLen(1))

	// An edit: the status said Ready for generation 1; it says RollingOut
	// for generation 2 without waiting.
	editView(g, ns, "four", func(mv *viewv1.MarkdownView) { mv.Spec.Replicas = 2 })
	g.Eventually(func(g Gomega) {
		got := &viewv1.MarkdownView{}
		g.Expect(k8s.Get(ctx, key(ns, "four"), got)).To(Succeed())
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(conditions.Get(got.Status.Conditions, conditions.Ready).Reason).To(Equal(ReasonRollingOut))
		g.Expect(conditions.IsTrue(got.Status.Conditions, conditions.Reconciling)).To(BeTrue())
		res, _, err := testenv.KStatusOnServer(ctx, k8s, mv)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(res.Status).To(Equal(kstatus.InProgressStatus), res.Message)
	}, timeout, interval).Should(Succeed())
}

func TestDoesNotAdoptForeignChildren(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	foreign := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "markdowns-taken"},
		Data:       map[string]string{"keep": "me"},
	}
	g.Expect(k8s.Create(ctx, foreign)).To(Succeed())
	g.Expect(k8s.Create(ctx, newMarkdownView(ns, "taken", map[string]string{"a.md": "A"}))).To(Succeed())

	g.Eventually(func(g Gomega) {
		mv := &viewv1.MarkdownView{}
		g.Expect(k8s.Get(ctx, key(ns, "taken"), mv)).To(Succeed())
		c := meta.FindStatusCondition(mv.Status.Conditions, conditions.Stalled)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(ReasonChildConflict))
		g.Expect(c.Message).To(ContainSubstring("ConfigMap markdowns-taken"))
		g.Expect(meta.IsStatusConditionFalse(mv.Status.Conditions, conditions.Ready)).To(BeTrue())
	}, timeout, interval).Should(Succeed())

	got := &corev1.ConfigMap{}
	g.Expect(k8s.Get(ctx, key(ns, "markdowns-taken"), got)).To(Succeed())
	g.Expect(got.Data).To(Equal(map[string]string{"keep": "me"}))
	g.Expect(got.OwnerReferences).To(BeEmpty())
	// Nothing else was created while the name is taken.
	err := k8s.Get(ctx, key(ns, "viewer-taken"), &appsv1.Deployment{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
}

func TestAdmissionRejectsBadInput(t *testing.T) {
	ns := newNamespace(t)
	big := strings.Repeat("x", 600*1024)
	cases := map[string]struct {
		mutate func(*viewv1.MarkdownView)
		want   string
	}{
		"no files": {
			mutate: func(mv *viewv1.MarkdownView) { mv.Spec.Markdowns = map[string]viewv1.MarkdownText{} },
			want:   "holds its site either inline (markdowns) or in a Flux source (source): set exactly one",
		},
		"file name without .md": {
			mutate: func(mv *viewv1.MarkdownView) { mv.Spec.Markdowns = map[string]viewv1.MarkdownText{"notes.txt": "x"} },
			want:   "file names must be valid ConfigMap keys",
		},
		"path traversal in a file name": {
			mutate: func(mv *viewv1.MarkdownView) { mv.Spec.Markdowns = map[string]viewv1.MarkdownText{"../etc.md": "x"} },
			want:   "file names must be valid ConfigMap keys",
		},
		"file name with a slash": {
			mutate: func(mv *viewv1.MarkdownView) { mv.Spec.Markdowns = map[string]viewv1.MarkdownText{"a/b.md": "x"} },
			want:   "file names must be valid ConfigMap keys",
		},
		"total over the ConfigMap limit": {
			mutate: func(mv *viewv1.MarkdownView) {
				mv.Spec.Markdowns = map[string]viewv1.MarkdownText{"a.md": viewv1.MarkdownText(big), "b.md": viewv1.MarkdownText(big)}
			},
			want: "markdowns must total at most 1 MiB",
		},
		"too many replicas": {
			mutate: func(mv *viewv1.MarkdownView) { mv.Spec.Replicas = 51 },
			want:   "should be less than or equal to 50",
		},
		"negative replicas": {
			mutate: func(mv *viewv1.MarkdownView) { mv.Spec.Replicas = -1 },
			want:   "should be greater than or equal to 1",
		},
		"bad image reference": {
			mutate: func(mv *viewv1.MarkdownView) { mv.Spec.ViewerImage = "Not An Image!" },
			want:   "viewerImage must be an image reference",
		},
		"name that cannot name a Service": {
			mutate: func(mv *viewv1.MarkdownView) { mv.Name = "my.handbook" },
			want:   "a MarkdownView name must be a DNS label",
		},
		"name too long for its Service": {
			mutate: func(mv *viewv1.MarkdownView) { mv.Name = strings.Repeat("a", 57) },
			want:   "a MarkdownView name must be a DNS label",
		},
		"too many files": {
			mutate: func(mv *viewv1.MarkdownView) {
				mv.Spec.Markdowns = map[string]viewv1.MarkdownText{}
				for i := range 129 {
					mv.Spec.Markdowns[fmt.Sprintf("f%d.md", i)] = "x"
				}
			},
			want: "must have at most 128 items",
		},
		"hidden dot-dot file name": {
			mutate: func(mv *viewv1.MarkdownView) { mv.Spec.Markdowns = map[string]viewv1.MarkdownText{"..md": "x"} },
			want:   "file names must be valid ConfigMap keys",
		},
		"image reference too long": {
			mutate: func(mv *viewv1.MarkdownView) { mv.Spec.ViewerImage = "r.io/" + strings.Repeat("a", 510) },
			want:   "spec.viewerImage: Too long",
		},
		"image with a bad digest": {
			mutate: func(mv *viewv1.MarkdownView) { mv.Spec.ViewerImage = "viewer@sha256:1234" },
			want:   "viewerImage must be an image reference",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			mv := newMarkdownView(ns, "valid", map[string]string{"a.md": "A"})
			tc.mutate(mv)
			err := k8s.Create(context.Background(), mv)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
		})
	}

	// Valid references are accepted.
	for i, img := range []string{"viewer", "registry.example.com:5000/team/viewer:1.2.3", "ghcr.io/a/b@sha256:" + strings.Repeat("a", 64)} {
		mv := newMarkdownView(ns, fmt.Sprintf("img-%d", i), map[string]string{"a.md": "A"})
		mv.Spec.ViewerImage = img
		if err := k8s.Create(context.Background(), mv); err != nil {
			t.Errorf("image %q refused: %v", img, err)
		}
	}
}

// TestDriftUnderContentionHasNoHotLoop: another client keeps scaling the
// viewer Deployment and rewriting the ConfigMap. Trellis restores both after
// each change, with a bounded number of writes (at most a few per contending
// write, no hot loop), and the final state is exactly the desired one.
func TestDriftUnderContentionHasNoHotLoop(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(k8s.Create(ctx, newMarkdownView(ns, "contended", map[string]string{"a.md": "A"}))).To(Succeed())
	g.Eventually(func() error { return k8s.Get(ctx, key(ns, "viewer-contended"), &appsv1.Deployment{}) }, timeout, interval).Should(Succeed())
	g.Eventually(func() error { return k8s.Get(ctx, key(ns, "markdowns-contended"), &corev1.ConfigMap{}) }, timeout, interval).Should(Succeed())
	time.Sleep(time.Second)

	mgrWrites.Reset()
	contending := 0
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		d := &appsv1.Deployment{}
		if err := k8s.Get(ctx, key(ns, "viewer-contended"), d); err == nil {
			d.Spec.Replicas = ptr.To[int32](7)
			if k8s.Update(ctx, d) == nil {
				contending++
			}
		}
		cm := &corev1.ConfigMap{}
		if err := k8s.Get(ctx, key(ns, "markdowns-contended"), cm); err == nil {
			cm.Data["intruder.md"] = fmt.Sprint(time.Now().UnixNano())
			if k8s.Update(ctx, cm) == nil {
				contending++
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Desired state is back once the contender stops.
	g.Eventually(func(g Gomega) {
		d := &appsv1.Deployment{}
		g.Expect(k8s.Get(ctx, key(ns, "viewer-contended"), d)).To(Succeed())
		g.Expect(*d.Spec.Replicas).To(Equal(int32(1)))
		cm := &corev1.ConfigMap{}
		g.Expect(k8s.Get(ctx, key(ns, "markdowns-contended"), cm)).To(Succeed())
		g.Expect(cm.Data).To(Equal(map[string]string{"a.md": "A"}))
	}, timeout, interval).Should(Succeed())
	time.Sleep(2 * time.Second)
	n, paths := mgrWrites.Writes()
	var mine int64
	for _, p := range paths {
		if strings.Contains(p, "/namespaces/"+ns+"/") {
			mine++
		}
	}
	t.Logf("contending writes: %d, Trellis writes: %d", contending, mine)
	g.Expect(contending).To(BeNumerically(">", 20))
	g.Expect(mine).To(BeNumerically("<=", 2*contending+5), "a bounded reaction, not a hot loop (all writes: %d)", n)
	g.Expect(mine).To(BeNumerically(">=", 2), "drift was restored")

	// And once it is quiet, it stays quiet.
	mgrWrites.Reset()
	time.Sleep(2 * time.Second)
	_, paths = mgrWrites.Writes()
	for _, p := range paths {
		g.Expect(p).NotTo(ContainSubstring("/namespaces/"+ns+"/"), "writes after the contention stopped")
	}
}

// TestNewTenantIsInProgressBeforeAnyReconcile: no Tenant controller runs in
// this suite; the API server's default observedGeneration 0 alone makes
// kstatus wait for one.
func TestNewTenantIsInProgressBeforeAnyReconcile(t *testing.T) {
	g := NewWithT(t)
	res, err := testenv.KStatusOfNew(context.Background(), k8s,
		`{"apiVersion":"tenancy.trellis.dev/v1","kind":"Tenant","metadata":{"name":"fresh"},"spec":{"namespaces":["a"],"admin":{"kind":"User","name":"bob","apiGroup":"rbac.authorization.k8s.io"}}}`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(res.Status).To(Equal(kstatus.InProgressStatus), res.Message)
}

// TestEveryWriteIsTrellis': the managedFields of every child, and of the
// MarkdownView's status, name trellis alone for what Trellis set. (The test
// itself plays the Deployment controller and writes the Deployment's status.)
func TestEveryWriteIsTrellis(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(k8s.Create(ctx, newMarkdownView(ns, "owned", map[string]string{"a.md": "A"}))).To(Succeed())
	g.Eventually(func() error { return k8s.Get(ctx, key(ns, "viewer-owned"), &appsv1.Deployment{}) }, timeout, interval).Should(Succeed())
	markAvailable(g, ns, "viewer-owned")
	g.Eventually(func(g Gomega) {
		g.Expect(readyCondition(g, ns, "owned").Status).To(Equal(metav1.ConditionTrue))
	}, timeout, interval).Should(Succeed())

	for _, obj := range []client.Object{
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "markdowns-owned"}},
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "viewer-owned"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "viewer-owned"}},
	} {
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		g.Expect(testenv.FieldManagers(obj)[""]).To(ConsistOf("trellis"), "%T %s", obj, obj.GetName())
	}
	mv := &viewv1.MarkdownView{}
	g.Expect(k8s.Get(ctx, key(ns, "owned"), mv)).To(Succeed())
	g.Expect(testenv.FieldManagers(mv)["status"]).To(ConsistOf("trellis"))
}
