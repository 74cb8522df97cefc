package view

import (
	"encoding/json"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/controller/setup"
)

// These tests exercise the desired-state builders alone; they make no API calls.

const desiredTestDefaultImage = "registry.example.com/trellis/viewer:default"

func desiredTestView(replicas int32, image string) *viewv1.MarkdownView {
	return &viewv1.MarkdownView{
		TypeMeta:   metav1.TypeMeta{APIVersion: viewv1.GroupVersion.String(), Kind: "MarkdownView"},
		ObjectMeta: metav1.ObjectMeta{Name: "docs", Namespace: "team-a", UID: types.UID("0b5e7c6a-uid"), Generation: 2},
		Spec: viewv1.MarkdownViewSpec{
			Markdowns: map[string]viewv1.MarkdownText{
				"README.md":  "# Hello",
				"SUMMARY.md": "- [Intro](README.md)",
			},
			Replicas:    replicas,
			ViewerImage: image,
		},
	}
}

// asTyped converts an apply configuration into the typed object, as the API server reads it.
func asTyped[T any](g Gomega, applyConfig any) *T {
	raw, err := json.Marshal(applyConfig)
	g.Expect(err).NotTo(HaveOccurred())
	out := new(T)
	g.Expect(json.Unmarshal(raw, out)).To(Succeed())
	return out
}

func expectControllerOwnerRef(g Gomega, refs []metav1.OwnerReference, mv *viewv1.MarkdownView) {
	g.Expect(refs).To(HaveLen(1))
	ref := refs[0]
	g.Expect(ref.APIVersion).To(Equal("view.trellis.dev/v1"))
	g.Expect(ref.Kind).To(Equal("MarkdownView"))
	g.Expect(ref.Name).To(Equal(mv.Name))
	g.Expect(ref.UID).To(Equal(mv.UID))
	g.Expect(ref.Controller).To(HaveValue(BeTrue()))
	g.Expect(ref.BlockOwnerDeletion).To(HaveValue(BeTrue()))

	// The ownership check the reconciler itself relies on.
	obj := &metav1.ObjectMeta{OwnerReferences: refs}
	g.Expect(metav1.IsControlledBy(obj, mv)).To(BeTrue())
}

func TestDesiredDeployment(t *testing.T) {
	g := NewWithT(t)
	mv := desiredTestView(3, "")

	ac := deploymentOf(g, mv)
	d := asTyped[appsv1.Deployment](g, ac)

	g.Expect(d.APIVersion).To(Equal("apps/v1"))
	g.Expect(d.Kind).To(Equal("Deployment"))
	g.Expect(d.Name).To(Equal("viewer-docs"))
	g.Expect(d.Namespace).To(Equal("team-a"))
	g.Expect(d.Labels).To(HaveKeyWithValue(setup.ManagedByLabel, setup.ManagedByValue))
	g.Expect(d.Labels).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "trellis"))
	g.Expect(d.Labels).To(Equal(childLabels(mv)))
	expectControllerOwnerRef(g, d.OwnerReferences, mv)

	g.Expect(d.Spec.Replicas).To(HaveValue(Equal(int32(3))))

	// The selector picks exactly this MarkdownView's pods.
	g.Expect(d.Spec.Selector).NotTo(BeNil())
	g.Expect(d.Spec.Selector.MatchLabels).To(Equal(map[string]string{
		"view.trellis.dev/markdownview-uid": "0b5e7c6a-uid",
	}))
	g.Expect(d.Spec.Selector.MatchExpressions).To(BeEmpty())
	podLabels := d.Spec.Template.Labels
	for k, v := range d.Spec.Selector.MatchLabels {
		g.Expect(podLabels).To(HaveKeyWithValue(k, v))
	}
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sel.Matches(labels.Set(podLabels))).To(BeTrue())
	g.Expect(podLabels).To(HaveKeyWithValue(setup.ManagedByLabel, setup.ManagedByValue))

	pod := d.Spec.Template.Spec
	g.Expect(pod.AutomountServiceAccountToken).To(HaveValue(BeFalse()))
	g.Expect(pod.EnableServiceLinks).To(HaveValue(BeFalse()))
	g.Expect(pod.SecurityContext).NotTo(BeNil())
	g.Expect(pod.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))
	g.Expect(pod.SecurityContext.RunAsUser).To(HaveValue(Equal(int64(65532))))
	g.Expect(pod.SecurityContext.RunAsGroup).To(HaveValue(Equal(int64(65532))))
	g.Expect(pod.SecurityContext.SeccompProfile).NotTo(BeNil())
	g.Expect(pod.SecurityContext.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))

	g.Expect(pod.Containers).To(HaveLen(1))
	c := pod.Containers[0]
	g.Expect(c.Name).To(Equal("viewer"))
	g.Expect(c.Image).To(Equal(desiredTestDefaultImage))
	g.Expect(c.SecurityContext).NotTo(BeNil())
	g.Expect(c.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))
	g.Expect(c.SecurityContext.ReadOnlyRootFilesystem).To(HaveValue(BeTrue()))
	g.Expect(c.SecurityContext.AllowPrivilegeEscalation).To(HaveValue(BeFalse()))
	g.Expect(c.SecurityContext.Privileged).To(BeNil())
	g.Expect(c.SecurityContext.Capabilities).NotTo(BeNil())
	g.Expect(c.SecurityContext.Capabilities.Drop).To(Equal([]corev1.Capability{"ALL"}))
	g.Expect(c.SecurityContext.Capabilities.Add).To(BeEmpty())

	// The "http" port is what the probes and the Service target, and what the viewer listens on.
	g.Expect(c.Ports).To(Equal([]corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}}))
	g.Expect(c.Args).To(ContainElement(fmt.Sprintf("--addr=:%d", c.Ports[0].ContainerPort)))
	g.Expect(c.Args).To(ContainElement("--dir=/markdown"))
	for name, probe := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		g.Expect(probe).NotTo(BeNil(), name)
		g.Expect(probe.HTTPGet).NotTo(BeNil(), name)
		g.Expect(probe.HTTPGet.Path).To(Equal("/healthz"), name)
		g.Expect(probe.HTTPGet.Port).To(Equal(intstr.FromString("http")), name)
	}
	g.Expect(c.Resources.Limits).To(HaveKey(corev1.ResourceMemory))
	g.Expect(c.Resources.Requests).To(HaveKey(corev1.ResourceCPU))

	// The Markdown comes read-only from this MarkdownView's ConfigMap.
	g.Expect(c.VolumeMounts).To(Equal([]corev1.VolumeMount{{Name: "markdowns", MountPath: "/markdown", ReadOnly: true}}))
	g.Expect(pod.Volumes).To(HaveLen(1))
	g.Expect(pod.Volumes[0].Name).To(Equal("markdowns"))
	g.Expect(pod.Volumes[0].ConfigMap).NotTo(BeNil())
	g.Expect(pod.Volumes[0].ConfigMap.Name).To(Equal("markdowns-docs"))
	g.Expect(pod.Volumes[0].ConfigMap.Name).To(Equal(configMapName(mv)))
}

func TestDesiredDeploymentImageAndReplicas(t *testing.T) {
	tests := []struct {
		name         string
		replicas     int32
		specImage    string
		wantImage    string
		wantReplicas int32
	}{
		{name: "default image", replicas: 1, wantImage: desiredTestDefaultImage, wantReplicas: 1},
		{name: "image override", replicas: 2, specImage: "example.com/custom:1.2", wantImage: "example.com/custom:1.2", wantReplicas: 2},
		{name: "digest override", replicas: 50, specImage: "custom@sha256:" + fmt.Sprintf("%064d", 0), wantImage: "custom@sha256:" + fmt.Sprintf("%064d", 0), wantReplicas: 50},
		{name: "replicas unset means 1", replicas: 0, wantImage: desiredTestDefaultImage, wantReplicas: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			mv := desiredTestView(tt.replicas, tt.specImage)

			d := asTyped[appsv1.Deployment](g, deploymentOf(g, mv))

			g.Expect(d.Spec.Replicas).To(HaveValue(Equal(tt.wantReplicas)))
			g.Expect(d.Spec.Template.Spec.Containers).To(HaveLen(1))
			g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(tt.wantImage))
		})
	}
}

func TestDesiredService(t *testing.T) {
	g := NewWithT(t)
	mv := desiredTestView(2, "")

	svc := asTyped[corev1.Service](g, desiredService(mv))
	d := asTyped[appsv1.Deployment](g, deploymentOf(g, mv))

	g.Expect(svc.APIVersion).To(Equal("v1"))
	g.Expect(svc.Kind).To(Equal("Service"))
	g.Expect(svc.Name).To(Equal("viewer-docs"))
	g.Expect(svc.Namespace).To(Equal("team-a"))
	g.Expect(svc.Labels).To(HaveKeyWithValue(setup.ManagedByLabel, setup.ManagedByValue))
	g.Expect(svc.Labels).To(Equal(childLabels(mv)))
	expectControllerOwnerRef(g, svc.OwnerReferences, mv)

	g.Expect(svc.Spec.Type).To(Equal(corev1.ServiceTypeClusterIP))
	// The Service selects the Deployment's pods, with the Deployment's own selector.
	g.Expect(svc.Spec.Selector).To(Equal(d.Spec.Selector.MatchLabels))
	g.Expect(labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels))).To(BeTrue())

	g.Expect(svc.Spec.Ports).To(Equal([]corev1.ServicePort{{
		Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromString("http"),
	}}))
	// The target port names a port of the viewer container.
	names := make([]string, 0, len(d.Spec.Template.Spec.Containers[0].Ports))
	for _, p := range d.Spec.Template.Spec.Containers[0].Ports {
		names = append(names, p.Name)
	}
	g.Expect(names).To(ContainElement(svc.Spec.Ports[0].TargetPort.StrVal))

	// The URL in the status names this Service.
	g.Expect(siteURL(mv)).To(Equal("http://" + svc.Name + "." + svc.Namespace + ".svc"))
}

func TestDesiredChildrenOfDifferentViewsDoNotOverlap(t *testing.T) {
	g := NewWithT(t)
	a := desiredTestView(1, "")
	b := desiredTestView(1, "")
	b.Name, b.UID = "handbook", "other-uid"

	da := asTyped[appsv1.Deployment](g, deploymentOf(g, a))
	db := asTyped[appsv1.Deployment](g, deploymentOf(g, b))
	sa := asTyped[corev1.Service](g, desiredService(a))

	g.Expect(db.Name).To(Equal("viewer-handbook"))
	g.Expect(db.Spec.Template.Spec.Volumes[0].ConfigMap.Name).To(Equal("markdowns-handbook"))
	g.Expect(db.OwnerReferences[0].UID).To(Equal(types.UID("other-uid")))
	// a's Service and Deployment must not pick b's pods.
	g.Expect(labels.SelectorFromSet(sa.Spec.Selector).Matches(labels.Set(db.Spec.Template.Labels))).To(BeFalse())
	sel, err := metav1.LabelSelectorAsSelector(da.Spec.Selector)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sel.Matches(labels.Set(db.Spec.Template.Labels))).To(BeFalse())
}

func TestDesiredConfigMapData(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]viewv1.MarkdownText
		want  map[string]string
	}{
		{name: "nil", files: nil, want: map[string]string{}},
		{name: "one", files: map[string]viewv1.MarkdownText{"README.md": "# Hi"}, want: map[string]string{"README.md": "# Hi"}},
		{
			name:  "several, with an empty file",
			files: map[string]viewv1.MarkdownText{"README.md": "# Hi", "SUMMARY.md": "- [a](a.md)", "a.md": ""},
			want:  map[string]string{"README.md": "# Hi", "SUMMARY.md": "- [a](a.md)", "a.md": ""},
		},
		{
			name:  "content is copied byte for byte",
			files: map[string]viewv1.MarkdownText{"x.md": "  leading\r\ntrailing  \n\tünïcødé ✓\n"},
			want:  map[string]string{"x.md": "  leading\r\ntrailing  \n\tünïcødé ✓\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			mv := desiredTestView(1, "")
			mv.Spec.Markdowns = tt.files

			got := dataOf(mv)

			g.Expect(got).NotTo(BeNil())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestDesiredConfigMapDataDropsRemovedFiles(t *testing.T) {
	g := NewWithT(t)
	mv := desiredTestView(1, "")
	g.Expect(dataOf(mv)).To(HaveKey("SUMMARY.md"))

	delete(mv.Spec.Markdowns, "SUMMARY.md")

	g.Expect(dataOf(mv)).To(Equal(map[string]string{"README.md": "# Hello"}))
}

func TestChildLabels(t *testing.T) {
	g := NewWithT(t)
	mv := desiredTestView(1, "")

	l := childLabels(mv)

	g.Expect(l).To(Equal(map[string]string{
		"app.kubernetes.io/name":       "markdown-viewer",
		"app.kubernetes.io/instance":   "docs",
		"app.kubernetes.io/part-of":    "trellis",
		"app.kubernetes.io/component":  "viewer",
		"app.kubernetes.io/managed-by": "trellis",
	}))
	// They are the objects' own; the pods are selected by podLabels.
	for k := range selectorLabels(mv) {
		g.Expect(l).NotTo(HaveKey(k))
	}

	// Each call returns a fresh map: a caller's edit leaks into nothing else.
	l["extra"] = "x"
	g.Expect(childLabels(mv)).NotTo(HaveKey("extra"))
	g.Expect(selectorLabels(mv)).NotTo(HaveKey("extra"))
}

func TestDesiredIsDeterministic(t *testing.T) {
	g := NewWithT(t)
	mv := desiredTestView(2, "")

	d1, d2 := deploymentOf(g, mv), deploymentOf(g, mv)
	g.Expect(equality.Semantic.DeepEqual(d1, d2)).To(BeTrue())
	g.Expect(mustJSON(g, d1)).To(Equal(mustJSON(g, d2)))

	s1, s2 := desiredService(mv), desiredService(mv)
	g.Expect(equality.Semantic.DeepEqual(s1, s2)).To(BeTrue())
	g.Expect(mustJSON(g, s1)).To(Equal(mustJSON(g, s2)))

	g.Expect(equality.Semantic.DeepEqual(dataOf(mv), dataOf(mv))).To(BeTrue())

	// And the comparison can tell a different input apart.
	other := mv.DeepCopy()
	other.Spec.Replicas = 3
	g.Expect(equality.Semantic.DeepEqual(d1, deploymentOf(g, other))).To(BeFalse())
}

func TestDesiredDoesNotMutateView(t *testing.T) {
	g := NewWithT(t)
	mv := desiredTestView(0, "")
	want := mv.DeepCopy()

	_ = deploymentOf(g, mv)
	_ = desiredService(mv)
	data := dataOf(mv)
	data["README.md"] = "changed"
	data["new.md"] = "x"

	g.Expect(mv).To(Equal(want))
}

// deploymentOf is desiredDeployment with the manager's default image; it
// fails the test on an error.
func deploymentOf(g Gomega, mv *viewv1.MarkdownView) *appsv1ac.DeploymentApplyConfiguration {
	d, err := desiredDeployment(mv, desiredTestDefaultImage)
	g.Expect(err).NotTo(HaveOccurred())
	return d
}

// dataOf is the ConfigMap data (the Markdown) desiredContent makes of mv.
func dataOf(mv *viewv1.MarkdownView) map[string]string {
	data, _ := desiredContent(mv)
	return data
}

func mustJSON(g Gomega, v any) string {
	raw, err := json.Marshal(v)
	g.Expect(err).NotTo(HaveOccurred())
	return string(raw)
}

func BenchmarkDesiredDeployment(b *testing.B) {
	mv := desiredTestView(2, "")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := desiredDeployment(mv, desiredTestDefaultImage); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDesiredDeploymentSharesNoMaps: the client decodes the API server's
// answer to an apply into the apply configuration, so a map the
// configuration shares with defaultResources (read by every worker) or with
// the cached MarkdownView would be written behind their backs — a crash
// ("concurrent map iteration and map write") when two workers apply at once.
func TestDesiredDeploymentSharesNoMaps(t *testing.T) {
	g := NewWithT(t)
	scribble := func(d *appsv1ac.DeploymentApplyConfiguration) {
		rr := d.Spec.Template.Spec.Containers[0].Resources
		for _, m := range []*corev1.ResourceList{rr.Requests, rr.Limits} {
			if m != nil {
				(*m)[corev1.ResourceName("decoded")] = resource.MustParse("1")
			}
		}
	}

	d, err := desiredDeployment(desiredTestView(1, ""), desiredTestDefaultImage)
	g.Expect(err).NotTo(HaveOccurred())
	scribble(d)
	g.Expect(defaultResources.Requests).NotTo(HaveKey(corev1.ResourceName("decoded")))
	g.Expect(defaultResources.Limits).NotTo(HaveKey(corev1.ResourceName("decoded")))

	mv := desiredTestView(1, "")
	mv.Spec.Pod.Resources = &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
	}
	d, err = desiredDeployment(mv, desiredTestDefaultImage)
	g.Expect(err).NotTo(HaveOccurred())
	scribble(d)
	g.Expect(mv.Spec.Pod.Resources.Requests).To(HaveLen(1))
	g.Expect(mv.Spec.Pod.Resources.Limits).To(HaveLen(1))
}

// TestDesiredChildrenAreWhatTrellisWrites: the plain objects the bench's
// floor creates carry what the controller writes, minus owner references.
func TestDesiredChildrenAreWhatTrellisWrites(t *testing.T) {
	g := NewWithT(t)
	mv := desiredTestView(2, "")
	mv.Spec.Markdowns = map[string]viewv1.MarkdownText{"index.md": "# Hi"}
	cm, d, svc, err := DesiredChildren(mv, "viewer:test")
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(cm.Name).To(Equal(configMapName(mv)))
	g.Expect(cm.Labels).To(Equal(childLabels(mv)))
	g.Expect(cm.Data).To(Equal(map[string]string{"index.md": "# Hi"}))
	g.Expect(cm.Annotations).To(HaveKeyWithValue(contentHashAnnotation, contentHash(cm.Data, nil)))

	applied, err := desiredDeployment(mv, "viewer:test")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d.Name).To(Equal(*applied.Name))
	g.Expect(d.OwnerReferences).To(BeEmpty())
	g.Expect(*d.Spec.Replicas).To(Equal(int32(2)))
	g.Expect(d.Spec.Template.Spec.Containers).To(HaveLen(1))
	c := d.Spec.Template.Spec.Containers[0]
	g.Expect(c.Image).To(Equal("viewer:test"))
	g.Expect(c.ReadinessProbe).NotTo(BeNil())
	g.Expect(*c.SecurityContext.ReadOnlyRootFilesystem).To(BeTrue())
	g.Expect(d.Spec.Template.Spec.Volumes[0].ConfigMap.Name).To(Equal(cm.Name))
	g.Expect(c.Resources.Limits.Memory().String()).To(Equal("128Mi"))

	g.Expect(svc.Name).To(Equal(viewerName(mv)))
	g.Expect(svc.OwnerReferences).To(BeEmpty())
	g.Expect(svc.Spec.Selector).To(Equal(selectorLabels(mv)))
	g.Expect(svc.Spec.Ports).To(HaveLen(1))
}
