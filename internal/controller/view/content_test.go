package view

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
)

// These tests exercise the content hash and the cache transforms alone.

func TestContentHashTellsContentsApart(t *testing.T) {
	type content struct {
		data   map[string]string
		binary map[string][]byte
	}
	// Each pair differs; a naive concatenation would hash some of them alike.
	contents := map[string]content{
		"empty":                    {},
		"one file":                 {data: map[string]string{"a.md": "x"}},
		"other text":               {data: map[string]string{"a.md": "y"}},
		"other name":               {data: map[string]string{"b.md": "x"}},
		"boundary moved":           {data: map[string]string{"a.mdx": ""}},
		"empty file":               {data: map[string]string{"a.md": ""}},
		"two files":                {data: map[string]string{"a.md": "x", "b.md": "y"}},
		"same bytes, other map":    {binary: map[string][]byte{"a.md": []byte("x")}},
		"an asset":                 {data: map[string]string{"a.md": "x"}, binary: map[string][]byte{"l.png": {1, 2}}},
		"the asset's bytes differ": {data: map[string]string{"a.md": "x"}, binary: map[string][]byte{"l.png": {1, 3}}},
		"an empty asset":           {data: map[string]string{"a.md": "x"}, binary: map[string][]byte{"l.png": {}}},
	}
	seen := map[string]string{}
	for name, c := range contents {
		h := contentHash(c.data, c.binary)
		if other, dup := seen[h]; dup {
			t.Errorf("%q and %q hash alike", name, other)
		}
		seen[h] = name
		if h != contentHash(c.data, c.binary) {
			t.Errorf("%q: hash is not stable", name)
		}
	}
	// Map order does not matter; nil and empty maps are the same content.
	a := map[string]string{}
	b := map[string]string{}
	for i := range 50 {
		a[strings.Repeat("k", i+1)] = "v"
	}
	for i := 49; i >= 0; i-- {
		b[strings.Repeat("k", i+1)] = "v"
	}
	if contentHash(a, nil) != contentHash(b, map[string][]byte{}) {
		t.Error("the same content hashes differently")
	}
}

func TestContentSizeCountsLikeTheAPIServer(t *testing.T) {
	g := NewWithT(t)
	g.Expect(contentSize(map[string]string{"a.md": "héllo"}, map[string][]byte{"l.png": {1, 2, 3}})).To(Equal(4 + 6 + 5 + 3))
	g.Expect(contentSize(nil, nil)).To(BeZero())
}

func trimTestView() *viewv1.MarkdownView {
	return &viewv1.MarkdownView{
		ObjectMeta: metav1.ObjectMeta{
			Name: "docs", Namespace: "team-a", UID: "uid", Generation: 4, ResourceVersion: "9",
			Labels:        map[string]string{"team": "a"},
			Annotations:   map[string]string{"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 100_000)},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		},
		Spec: viewv1.MarkdownViewSpec{
			Markdowns: map[string]viewv1.MarkdownText{"a.md": viewv1.MarkdownText(strings.Repeat("é", 1000))},
			Assets:    map[string][]byte{"logo.png": []byte("\x89PNG\r\n\x1a\n")},
			Replicas:  2,
			Pod:       viewv1.ViewerPod{PriorityClassName: "docs"},
			Expose:    viewv1.Expose{Ingress: viewv1.IngressExpose{Host: "docs.example.com"}},
		},
		Status: viewv1.MarkdownViewStatus{URL: "http://x"},
	}
}

func TestTrimMarkdownViewKeepsHashesNotFiles(t *testing.T) {
	g := NewWithT(t)
	mv := trimTestView()
	data, binaryData := desiredContent(mv)
	wantHash, wantSize := contentHash(data, binaryData), contentSize(data, binaryData)

	out, err := trimMarkdownView(mv)
	g.Expect(err).NotTo(HaveOccurred())
	got := out.(*viewv1.MarkdownView)

	g.Expect(got.Spec.Markdowns).To(BeNil())
	g.Expect(got.Spec.Assets).To(BeNil())
	g.Expect(got.Labels).To(BeNil())
	g.Expect(got.ManagedFields).To(BeNil())
	// Labels and annotations (here a 100 kB last-applied-configuration) are
	// dropped; the hash and the byte size of the files take their place.
	g.Expect(got.Annotations).To(Equal(map[string]string{
		contentHashAnnotation:  wantHash,
		contentBytesAnnotation: "2020", // "a.md" (4) + 1000 × "é" (2000) + "logo.png" (8) + 8 bytes
	}))
	g.Expect(cachedInt(got.Annotations, contentBytesAnnotation)).To(Equal(wantSize))
	// What the controller reads from the cache is kept.
	g.Expect(got.Name).To(Equal("docs"))
	g.Expect(got.UID).To(BeEquivalentTo("uid"))
	g.Expect(got.Generation).To(Equal(int64(4)))
	g.Expect(got.ResourceVersion).To(Equal("9"))
	g.Expect(got.Spec.Replicas).To(Equal(int32(2)))
	g.Expect(got.Spec.Pod.PriorityClassName).To(Equal("docs"))
	g.Expect(got.Spec.Expose.Ingress.Host).To(BeEquivalentTo("docs.example.com"))
	g.Expect(got.Status.URL).To(Equal("http://x"))

	// Trimming again changes nothing (informers transform once, but a
	// second pass must not take the trimmed copy for an empty site).
	again, err := trimMarkdownView(got.DeepCopy())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(got))
}

func TestTrimMarkdownViewDropsOversizedPodSettings(t *testing.T) {
	g := NewWithT(t)
	mv := trimTestView()
	for i := range 100 {
		mv.Spec.Pod.Tolerations = append(mv.Spec.Pod.Tolerations, corev1.Toleration{Key: strings.Repeat("k", 60) + string(rune('a'+i%26)), Operator: corev1.TolerationOpExists})
	}
	out, err := trimMarkdownView(mv)
	g.Expect(err).NotTo(HaveOccurred())
	got := out.(*viewv1.MarkdownView)
	g.Expect(got.Spec.Pod.Tolerations).To(BeNil())
	g.Expect(cachedInt(got.Annotations, podBytesAnnotation)).To(BeNumerically(">", maxPodSettingsBytes))

	// At the bound, nothing is dropped.
	small := trimTestView()
	out, err = trimMarkdownView(small)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.(*viewv1.MarkdownView).Annotations).NotTo(HaveKey(podBytesAnnotation))
}

func TestTrimConfigMapKeepsOnlyAVerifiedHash(t *testing.T) {
	data := map[string]string{"a.md": "A"}
	binaryData := map[string][]byte{"logo.png": {1}}
	good := contentHash(data, binaryData)
	cases := map[string]struct {
		annotation *string
		data       map[string]string
		binary     map[string][]byte
		wantHash   bool
	}{
		"written by Trellis, unchanged":      {annotation: &good, data: data, binary: binaryData, wantHash: true},
		"data edited by someone else":        {annotation: &good, data: map[string]string{"a.md": "B"}, binary: binaryData},
		"a file added by someone else":       {annotation: &good, data: map[string]string{"a.md": "A", "evil.md": "x"}, binary: binaryData},
		"an asset removed by someone else":   {annotation: &good, data: data},
		"the annotation edited":              {annotation: new("0000"), data: data, binary: binaryData},
		"no annotation (an older Trellis)":   {data: data, binary: binaryData},
		"data cleared, annotation left":      {annotation: &good},
		"data and a forged annotation agree": {annotation: new(contentHash(map[string]string{"a.md": "B"}, nil)), data: map[string]string{"a.md": "B"}, wantHash: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "markdowns-docs", Labels: map[string]string{"team": "a"},
					Annotations: map[string]string{"note": "kept"}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "trellis"}}},
				Data: tc.data, BinaryData: tc.binary,
			}
			if tc.annotation != nil {
				cm.Annotations[contentHashAnnotation] = *tc.annotation
			}
			out, err := trimConfigMap(cm)
			g.Expect(err).NotTo(HaveOccurred())
			got := out.(*corev1.ConfigMap)
			g.Expect(got.Data).To(BeNil())
			g.Expect(got.BinaryData).To(BeNil())
			g.Expect(got.ManagedFields).To(BeNil())
			g.Expect(got.Labels).To(Equal(map[string]string{"team": "a"}))
			g.Expect(got.Annotations).To(HaveKeyWithValue("note", "kept"))
			if tc.wantHash {
				g.Expect(got.Annotations).To(HaveKeyWithValue(contentHashAnnotation, *tc.annotation))
			} else {
				g.Expect(got.Annotations).NotTo(HaveKey(contentHashAnnotation))
			}
		})
	}
}

func TestTrimLeavesOtherTypesAlone(t *testing.T) {
	g := NewWithT(t)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "x", Annotations: map[string]string{contentHashAnnotation: "y"}}}
	for _, trim := range []func(any) (any, error){trimMarkdownView, trimConfigMap} {
		out, err := trim(svc)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(out).To(BeIdenticalTo(svc))
		g.Expect(svc.Annotations).To(HaveKeyWithValue(contentHashAnnotation, "y"))
	}
}
