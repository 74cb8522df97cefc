package view

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// testPNG is a real 2×2 PNG.
func testPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, color.RGBA{R: 255, A: 255})
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

const testSVG = `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><rect width="10" height="10"/></svg>`

func deploymentImage(g Gomega, ns, name string) (string, *appsv1.Deployment) {
	d := &appsv1.Deployment{}
	if !g.Expect(k8s.Get(context.Background(), key(ns, name), d)).To(Succeed()) {
		return "", d
	}
	return d.Spec.Template.Spec.Containers[0].Image, d
}

func TestViewerImageOutsideTheAllowListChangesNothing(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	// The suite's manager runs example.com/viewer:test, so by default
	// example.com/viewer with any tag is allowed.
	mv := newMarkdownView(ns, "pinned", map[string]string{"a.md": "# A"})
	mv.Spec.ViewerImage = "example.com/viewer:v2"
	g.Expect(k8s.Create(ctx, mv)).To(Succeed())
	g.Eventually(func(g Gomega) {
		img, _ := deploymentImage(g, ns, "viewer-pinned")
		g.Expect(img).To(Equal("example.com/viewer:v2"))
	}, timeout, interval).Should(Succeed())
	markAvailable(g, ns, "viewer-pinned")
	g.Eventually(func(g Gomega) {
		g.Expect(readyCondition(g, ns, "pinned").Status).To(Equal(metav1.ConditionTrue))
	}, timeout, interval).Should(Succeed())
	_, before := deploymentImage(g, ns, "viewer-pinned")
	cm := &corev1.ConfigMap{}
	g.Expect(k8s.Get(ctx, key(ns, "markdowns-pinned"), cm)).To(Succeed())

	// Another repository, with more replicas and new text: refused as a whole.
	editView(g, ns, "pinned", func(mv *viewv1.MarkdownView) {
		mv.Spec.ViewerImage = "evil.example.com/miner:1"
		mv.Spec.Replicas = 3
		mv.Spec.Markdowns["a.md"] = "# changed"
	})
	msg := expectStalled(g, ns, "pinned", ReasonImageNotAllowed)
	g.Expect(msg).To(ContainSubstring("evil.example.com/miner:1"))
	g.Expect(msg).To(ContainSubstring("--viewer-image-allow (example.com/viewer)"))
	g.Consistently(func(g Gomega) {
		img, d := deploymentImage(g, ns, "viewer-pinned")
		g.Expect(img).To(Equal("example.com/viewer:v2"), "the Deployment keeps its image")
		g.Expect(d.ResourceVersion).To(Equal(before.ResourceVersion), "the Deployment is not written at all")
		got := &corev1.ConfigMap{}
		g.Expect(k8s.Get(ctx, key(ns, "markdowns-pinned"), got)).To(Succeed())
		g.Expect(got.ResourceVersion).To(Equal(cm.ResourceVersion))
	}, 2*time.Second, 100*time.Millisecond).Should(Succeed())

	// An allowed tag again: the whole spec is carried out, the stall is gone.
	editView(g, ns, "pinned", func(mv *viewv1.MarkdownView) { mv.Spec.ViewerImage = "example.com/viewer:v3" })
	g.Eventually(func(g Gomega) {
		img, d := deploymentImage(g, ns, "viewer-pinned")
		g.Expect(img).To(Equal("example.com/viewer:v3"))
		g.Expect(*d.Spec.Replicas).To(Equal(int32(3)))
		g.Expect(stalledCondition(g, ns, "pinned")).To(BeNil())
	}, timeout, interval).Should(Succeed())

	// A new view with a refused image gets no children at all.
	refused := newMarkdownView(ns, "refused", map[string]string{"a.md": "# A"})
	refused.Spec.ViewerImage = "example.com/viewer-evil:1"
	g.Expect(k8s.Create(ctx, refused)).To(Succeed())
	expectStalled(g, ns, "refused", ReasonImageNotAllowed)
	for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.ConfigMap{}, &corev1.Service{}} {
		name := "viewer-refused"
		if _, isCM := obj.(*corev1.ConfigMap); isCM {
			name = "markdowns-refused"
		}
		err := k8s.Get(ctx, key(ns, name), obj)
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T: %v", obj, err)
	}
}

func TestPodSettingsReachTheDeployment(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	mv := newMarkdownView(ns, "tuned", map[string]string{"a.md": "# A"})
	mv.Spec.Replicas = 2
	mv.Spec.Pod = viewv1.ViewerPod{
		Resources: &corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0.05"), corev1.ResourceMemory: resource.MustParse("100M")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
		},
		NodeSelector: map[string]viewv1.LabelValue{"kubernetes.io/os": "linux"},
		Tolerations: []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "docs", Effect: corev1.TaintEffectNoSchedule},
			{Key: "spot", Operator: corev1.TolerationOpExists, TolerationSeconds: ptr.To[int64](60), Effect: corev1.TaintEffectNoExecute}},
		Affinity: &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "node-role", Operator: corev1.NodeSelectorOpIn, Values: []string{"web", "docs"}}}}}}}},
		TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "topology.kubernetes.io/zone", WhenUnsatisfiable: corev1.ScheduleAnyway}},
		PriorityClassName:         "docs-low",
		Annotations:               map[string]viewv1.AnnotationValue{"example.com/owner": "docs-team"},
		Labels:                    map[string]viewv1.LabelValue{"team": "docs"},
	}
	g.Expect(k8s.Create(ctx, mv)).To(Succeed())

	d := &appsv1.Deployment{}
	g.Eventually(func() error { return k8s.Get(ctx, key(ns, "viewer-tuned"), d) }, timeout, interval).Should(Succeed())
	pod := d.Spec.Template
	g.Expect(pod.Spec.Containers[0].Resources.Requests.Cpu().Cmp(resource.MustParse("50m"))).To(BeZero())
	g.Expect(pod.Spec.Containers[0].Resources.Limits.Memory().String()).To(Equal("256Mi"))
	g.Expect(pod.Spec.Containers[0].Resources.Limits).NotTo(HaveKey(corev1.ResourceCPU))
	g.Expect(pod.Spec.NodeSelector).To(Equal(map[string]string{"kubernetes.io/os": "linux"}))
	g.Expect(pod.Spec.Tolerations).To(Equal(mv.Spec.Pod.Tolerations))
	g.Expect(pod.Spec.Affinity).To(Equal(mv.Spec.Pod.Affinity))
	g.Expect(pod.Spec.TopologySpreadConstraints).To(HaveLen(1))
	g.Expect(pod.Spec.TopologySpreadConstraints[0].LabelSelector.MatchLabels).To(Equal(selectorLabels(mv)))
	g.Expect(pod.Spec.PriorityClassName).To(Equal("docs-low"))
	g.Expect(pod.Annotations).To(Equal(map[string]string{"example.com/owner": "docs-team"}))
	g.Expect(pod.Labels).To(HaveKeyWithValue("team", "docs"))
	g.Expect(pod.Labels).To(HaveKeyWithValue(viewUIDLabel, string(mv.UID)))
	g.Expect(pod.Labels).NotTo(HaveKey("app.kubernetes.io/instance"))

	// What the API server makes of quantities and defaults does not read as drift.
	markAvailable(g, ns, "viewer-tuned")
	g.Eventually(func(g Gomega) {
		g.Expect(readyCondition(g, ns, "tuned").Status).To(Equal(metav1.ConditionTrue))
	}, timeout, interval).Should(Succeed())
	expectQuiet(g, ns, "tuned")

	// Removing the settings removes them from the pods; the defaults return.
	editView(g, ns, "tuned", func(mv *viewv1.MarkdownView) { mv.Spec.Pod = viewv1.ViewerPod{} })
	g.Eventually(func(g Gomega) {
		got := &appsv1.Deployment{}
		g.Expect(k8s.Get(ctx, key(ns, "viewer-tuned"), got)).To(Succeed())
		spec := got.Spec.Template.Spec
		g.Expect(spec.NodeSelector).To(BeEmpty())
		g.Expect(spec.Tolerations).To(BeEmpty())
		g.Expect(spec.Affinity).To(BeNil())
		g.Expect(spec.TopologySpreadConstraints).To(BeEmpty())
		g.Expect(spec.PriorityClassName).To(BeEmpty())
		g.Expect(got.Spec.Template.Annotations).NotTo(HaveKey("example.com/owner"))
		g.Expect(got.Spec.Template.Labels).NotTo(HaveKey("team"))
		g.Expect(spec.Containers[0].Resources.Limits.Memory().String()).To(Equal("128Mi"))
	}, timeout, interval).Should(Succeed())
}

func TestPodSettingsTheAPIServerRefusesAreStalled(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	mv := newMarkdownView(ns, "greedy", map[string]string{"a.md": "# A"})
	mv.Spec.Pod.Resources = &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
	}
	g.Expect(k8s.Create(ctx, mv)).To(Succeed())
	msg := expectStalled(g, ns, "greedy", ReasonChildRejected)
	g.Expect(msg).To(ContainSubstring("Deployment viewer-greedy"))
	g.Expect(msg).To(ContainSubstring("must be less than or equal to memory limit"))

	// Fixed by its owner: the Deployment is created and the stall goes.
	editView(g, ns, "greedy", func(mv *viewv1.MarkdownView) {
		mv.Spec.Pod.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("512Mi")
	})
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, key(ns, "viewer-greedy"), &appsv1.Deployment{})).To(Succeed())
		g.Expect(stalledCondition(g, ns, "greedy")).To(BeNil())
	}, timeout, interval).Should(Succeed())
}

func TestOversizedPodSettingsAreStalled(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(k8s.Create(ctx, newMarkdownView(ns, "bloated", map[string]string{"a.md": "# A"}))).To(Succeed())
	g.Eventually(func() error { return k8s.Get(ctx, key(ns, "viewer-bloated"), &appsv1.Deployment{}) }, timeout, interval).Should(Succeed())
	_, before := deploymentImage(g, ns, "viewer-bloated")

	// Affinity has no bounds in its schema; 12 KiB of node names are accepted
	// at admission and refused by the controller.
	values := make([]string, 400)
	for i := range values {
		values[i] = strings.Repeat("n", 24) + string(rune('a'+i%26))
	}
	editView(g, ns, "bloated", func(mv *viewv1.MarkdownView) {
		mv.Spec.Pod.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
				{Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: values}}}}}}}
	})
	msg := expectStalled(g, ns, "bloated", ReasonPodSettingsTooLarge)
	g.Expect(msg).To(ContainSubstring("over the 8192 Trellis accepts"))
	_, after := deploymentImage(g, ns, "viewer-bloated")
	g.Expect(after.ResourceVersion).To(Equal(before.ResourceVersion))
	// The cache holds no copy of the oversized settings.
	cached := &viewv1.MarkdownView{}
	g.Expect(reconciler.client.Get(ctx, key(ns, "bloated"), cached)).To(Succeed())
	g.Expect(cached.Spec.Pod.Affinity).To(BeNil())
}

func TestAssetsBecomeBinaryDataExactly(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	logo := testPNG(t)
	mv := newMarkdownView(ns, "pictures", map[string]string{"a.md": "# A\n\n![Logo](logo.png)"})
	mv.Spec.Assets = map[string][]byte{"logo.png": logo, "Diagram.SVG": []byte(testSVG)}
	g.Expect(k8s.Create(ctx, mv)).To(Succeed())

	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(k8s.Get(ctx, key(ns, "markdowns-pictures"), cm)).To(Succeed())
		g.Expect(cm.Data).To(Equal(map[string]string{"a.md": "# A\n\n![Logo](logo.png)"}))
		g.Expect(cm.BinaryData).To(Equal(map[string][]byte{"logo.png": logo, "Diagram.SVG": []byte(testSVG)}))
		g.Expect(cm.Annotations).To(HaveKeyWithValue(contentHashAnnotation, contentHash(cm.Data, cm.BinaryData)))
	}, timeout, interval).Should(Succeed())
	// The viewer mounts the whole ConfigMap (no items), so binaryData files appear beside the pages.
	// The ConfigMap is written before the Deployment, so the Deployment may not exist yet.
	d := &appsv1.Deployment{}
	g.Eventually(func() error { return k8s.Get(ctx, key(ns, "viewer-pictures"), d) }, timeout, interval).Should(Succeed())
	g.Expect(d.Spec.Template.Spec.Volumes[0].ConfigMap.Items).To(BeEmpty())

	// An asset replaced, one removed: binaryData follows exactly.
	other := append([]byte(nil), logo...)
	other[len(other)-1] ^= 0xff
	editView(g, ns, "pictures", func(mv *viewv1.MarkdownView) {
		mv.Spec.Assets = map[string][]byte{"logo.png": other}
	})
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(k8s.Get(ctx, key(ns, "markdowns-pictures"), cm)).To(Succeed())
		g.Expect(cm.BinaryData).To(Equal(map[string][]byte{"logo.png": other}))
	}, timeout, interval).Should(Succeed())

	// Someone adds a file to binaryData: it goes again.
	g.Eventually(func() error {
		cm := &corev1.ConfigMap{}
		if err := k8s.Get(ctx, key(ns, "markdowns-pictures"), cm); err != nil {
			return err
		}
		cm.BinaryData["tracker.gif"] = []byte("GIF89a")
		return k8s.Update(ctx, cm)
	}, timeout, interval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(k8s.Get(ctx, key(ns, "markdowns-pictures"), cm)).To(Succeed())
		g.Expect(cm.BinaryData).To(Equal(map[string][]byte{"logo.png": other}))
	}, timeout, interval).Should(Succeed())

	// No assets at all: binaryData is gone.
	editView(g, ns, "pictures", func(mv *viewv1.MarkdownView) { mv.Spec.Assets = nil })
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(k8s.Get(ctx, key(ns, "markdowns-pictures"), cm)).To(Succeed())
		g.Expect(cm.BinaryData).To(BeEmpty())
		g.Expect(cm.Data).To(HaveKey("a.md"))
	}, timeout, interval).Should(Succeed())
}

func TestContentOverAConfigMapsBytesIsStalled(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	g.Expect(k8s.Create(ctx, newMarkdownView(ns, "wide", map[string]string{"a.md": "# A"}))).To(Succeed())
	g.Eventually(func() error { return k8s.Get(ctx, key(ns, "markdowns-wide"), &corev1.ConfigMap{}) }, timeout, interval).Should(Succeed())

	// 360,000 characters pass admission (which counts characters); at three
	// bytes each they are over the ConfigMap's 1 MiB.
	editView(g, ns, "wide", func(mv *viewv1.MarkdownView) {
		mv.Spec.Markdowns["a.md"] = viewv1.MarkdownText(strings.Repeat("日", 360_000))
	})
	msg := expectStalled(g, ns, "wide", ReasonMarkdownsTooLarge)
	g.Expect(msg).To(ContainSubstring("take 1080004 bytes, over the 1048576"))
	cm := &corev1.ConfigMap{}
	g.Expect(k8s.Get(ctx, key(ns, "markdowns-wide"), cm)).To(Succeed())
	g.Expect(cm.Data).To(Equal(map[string]string{"a.md": "# A"}), "the last files that fit are still served")
}

// The cache holds no files: neither the MarkdownView's nor the ConfigMap's.
func TestCachedCopiesCarryNoBodies(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	mv := newMarkdownView(ns, "lean", map[string]string{"a.md": strings.Repeat("# A\n", 10_000)})
	mv.Spec.Assets = map[string][]byte{"logo.png": testPNG(t)}
	mv.Annotations = map[string]string{"note": strings.Repeat("n", 10_000)}
	g.Expect(k8s.Create(ctx, mv)).To(Succeed())
	data, binaryData := desiredContent(mv)
	want := contentHash(data, binaryData)

	g.Eventually(func(g Gomega) {
		cached := &viewv1.MarkdownView{}
		g.Expect(reconciler.client.Get(ctx, key(ns, "lean"), cached)).To(Succeed())
		g.Expect(cached.Spec.Markdowns).To(BeNil())
		g.Expect(cached.Spec.Assets).To(BeNil())
		g.Expect(cached.Annotations).To(HaveKeyWithValue(cachedContentHash, want))
		g.Expect(cached.Annotations).NotTo(HaveKey("note"))

		cm := &corev1.ConfigMap{}
		g.Expect(reconciler.client.Get(ctx, key(ns, "markdowns-lean"), cm)).To(Succeed())
		g.Expect(cm.Data).To(BeNil())
		g.Expect(cm.BinaryData).To(BeNil())
		g.Expect(cm.ManagedFields).To(BeNil())
		g.Expect(cm.Annotations).To(HaveKeyWithValue(cachedContentHash, want), "the hash of the data it holds")
		g.Expect(cm.Annotations).To(HaveKeyWithValue(contentHashAnnotation, want), "the hash Trellis wrote")
	}, timeout, interval).Should(Succeed())
	// The API server has it all.
	full := &corev1.ConfigMap{}
	g.Expect(k8s.Get(ctx, key(ns, "markdowns-lean"), full)).To(Succeed())
	g.Expect(full.Data).To(Equal(data))
}

// Drift in the ConfigMap's data is restored though the cache holds no data:
// the ConfigMap transform hashes what the live object really holds.
func TestConfigMapDriftIsSeenWithoutCachingData(t *testing.T) {
	ctx := context.Background()
	editConfigMap := func(g Gomega, ns, name string, edit func(*corev1.ConfigMap)) {
		g.Eventually(func() error {
			cm := &corev1.ConfigMap{}
			if err := k8s.Get(ctx, key(ns, name), cm); err != nil {
				return err
			}
			edit(cm)
			return k8s.Update(ctx, cm)
		}, timeout, interval).Should(Succeed())
	}
	forged := map[string]string{"a.md": "defaced"}
	cases := map[string]func(*corev1.ConfigMap){
		"data edited, annotation left as it was": func(cm *corev1.ConfigMap) { cm.Data["a.md"] = "defaced" },
		"data edited and the annotation forged to match": func(cm *corev1.ConfigMap) {
			cm.Data = forged
			cm.Annotations[contentHashAnnotation] = contentHash(forged, nil)
		},
		"annotation removed":    func(cm *corev1.ConfigMap) { delete(cm.Annotations, contentHashAnnotation) },
		"annotation edited":     func(cm *corev1.ConfigMap) { cm.Annotations[contentHashAnnotation] = strings.Repeat("0", 64) },
		"our label removed":     func(cm *corev1.ConfigMap) { delete(cm.Labels, "app.kubernetes.io/instance") },
		"binaryData added":      func(cm *corev1.ConfigMap) { cm.BinaryData = map[string][]byte{"x.png": {1}} },
		"all the data replaced": func(cm *corev1.ConfigMap) { cm.Data = map[string]string{"b.md": "B"} },
	}
	i := 0
	for name, edit := range cases {
		i++
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ns := newNamespace(t)
			g.Expect(k8s.Create(ctx, newMarkdownView(ns, "kept", map[string]string{"a.md": "# A"}))).To(Succeed())
			var want *corev1.ConfigMap
			g.Eventually(func(g Gomega) {
				want = &corev1.ConfigMap{}
				g.Expect(k8s.Get(ctx, key(ns, "markdowns-kept"), want)).To(Succeed())
				g.Expect(want.Annotations).To(HaveKey(contentHashAnnotation))
			}, timeout, interval).Should(Succeed())
			editConfigMap(g, ns, "markdowns-kept", func(cm *corev1.ConfigMap) {
				if cm.Annotations == nil {
					cm.Annotations = map[string]string{}
				}
				edit(cm)
			})
			g.Eventually(func(g Gomega) {
				got := &corev1.ConfigMap{}
				g.Expect(k8s.Get(ctx, key(ns, "markdowns-kept"), got)).To(Succeed())
				g.Expect(got.Data).To(Equal(want.Data))
				g.Expect(got.BinaryData).To(BeEmpty())
				g.Expect(got.Annotations).To(HaveKeyWithValue(contentHashAnnotation, want.Annotations[contentHashAnnotation]))
				g.Expect(got.Labels).To(Equal(want.Labels))
			}, timeout, interval).Should(Succeed())
		})
	}
}

// An unchanged MarkdownView costs no read of its files: the hashes agree.
// An edit costs one, and reaches the ConfigMap. A small view (its files in
// the cache) costs no read at all.
func TestFilesAreReadOnlyWhenTheyChanged(t *testing.T) {
	large := "# A\n" + strings.Repeat("words ", keptContentBytes/6+1)
	for name, tc := range map[string]struct {
		page        string
		readOnWrite bool
	}{
		"large view": {page: large, readOnWrite: true},
		"small view": {page: "# A", readOnWrite: false},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			ns := newNamespace(t)
			g.Expect(k8s.Create(ctx, newMarkdownView(ns, "cheap", map[string]string{"a.md": tc.page}))).To(Succeed())
			g.Eventually(func() error { return k8s.Get(ctx, key(ns, "markdowns-cheap"), &corev1.ConfigMap{}) }, timeout, interval).Should(Succeed())
			if tc.readOnWrite {
				g.Expect(mvReads.of(key(ns, "cheap"))).To(BeNumerically(">=", 1), "creating the ConfigMap needed the files")
			} else {
				g.Expect(mvReads.of(key(ns, "cheap"))).To(BeZero(), "the files were in the cache")
			}
			expectQuiet(g, ns, "cheap")

			reads := mvReads.of(key(ns, "cheap"))
			for range 5 {
				_, err := reconciler.Reconcile(ctx, ctrl.Request{NamespacedName: key(ns, "cheap")})
				g.Expect(err).NotTo(HaveOccurred())
			}
			g.Expect(mvReads.of(key(ns, "cheap"))).To(Equal(reads), "no read around the cache while nothing changed")

			editView(g, ns, "cheap", func(mv *viewv1.MarkdownView) { mv.Spec.Markdowns["b.md"] = "# B" })
			g.Eventually(func(g Gomega) {
				cm := &corev1.ConfigMap{}
				g.Expect(k8s.Get(ctx, key(ns, "markdowns-cheap"), cm)).To(Succeed())
				g.Expect(cm.Data).To(Equal(map[string]string{"a.md": tc.page, "b.md": "# B"}))
			}, timeout, interval).Should(Succeed())
			if tc.readOnWrite {
				g.Expect(mvReads.of(key(ns, "cheap"))).To(BeNumerically(">", reads))
			} else {
				g.Expect(mvReads.of(key(ns, "cheap"))).To(BeZero())
			}
		})
	}
}

// TestSampleIsAcceptedAndServed: config/samples' MarkdownView passes
// admission and its logo reaches the ConfigMap as binaryData.
func TestSampleIsAcceptedAndServed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", "view_v1_markdownview.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	mv := &viewv1.MarkdownView{}
	g.Expect(yaml.UnmarshalStrict(raw, mv)).To(Succeed())
	mv.Namespace = newNamespace(t)
	g.Expect(k8s.Create(ctx, mv)).To(Succeed())
	g.Expect(mv.Spec.Assets).To(HaveKey("logo.svg"))
	g.Expect(string(mv.Spec.Assets["logo.svg"])).To(HavePrefix("<svg"))
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(k8s.Get(ctx, key(mv.Namespace, "markdowns-"+mv.Name), cm)).To(Succeed())
		g.Expect(cm.BinaryData).To(Equal(mv.Spec.Assets))
		g.Expect(cm.Data).To(HaveKey("page1.md"))
		g.Expect(cm.Data["page1.md"]).To(ContainSubstring("ページ"))
	}, timeout, interval).Should(Succeed())
}

// TestAssetsCountAgainstTheConfigMapLimit: admission cannot read asset
// bytes (see MarkdownViewSpec), so Markdown and assets that fit admission
// apart but not a ConfigMap together are stopped by the controller.
func TestAssetsCountAgainstTheConfigMapLimit(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	mv := newMarkdownView(ns, "heavy", map[string]string{"a.md": strings.Repeat("x", 600<<10)})
	mv.Spec.Assets = map[string][]byte{"photo.jpg": append([]byte{0xFF, 0xD8, 0xFF}, make([]byte, 500<<10)...)}
	g.Expect(k8s.Create(ctx, mv)).To(Succeed(), "admission counts the Markdown only")
	msg := expectStalled(g, ns, "heavy", ReasonMarkdownsTooLarge)
	g.Expect(msg).To(ContainSubstring("markdowns and assets take 1126416 bytes, over the 1048576"))
	err := k8s.Get(ctx, key(ns, "markdowns-heavy"), &corev1.ConfigMap{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "nothing is written: %v", err)
	err = k8s.Get(ctx, key(ns, "viewer-heavy"), &appsv1.Deployment{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "nothing is written: %v", err)

	// A smaller photo fits.
	editView(g, ns, "heavy", func(mv *viewv1.MarkdownView) {
		mv.Spec.Assets["photo.jpg"] = []byte{0xFF, 0xD8, 0xFF, 0}
	})
	g.Eventually(func(g Gomega) {
		cm := &corev1.ConfigMap{}
		g.Expect(k8s.Get(ctx, key(ns, "markdowns-heavy"), cm)).To(Succeed())
		g.Expect(cm.BinaryData["photo.jpg"]).To(Equal([]byte{0xFF, 0xD8, 0xFF, 0}))
		g.Expect(stalledCondition(g, ns, "heavy")).To(BeNil())
	}, timeout, interval).Should(Succeed())
}
