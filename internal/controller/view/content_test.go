package view

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

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
			Finalizers:    []string{"example.com/" + strings.Repeat("f", 60)},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: strings.Repeat("o", 200),
				UID: "00000000-0000-4000-8000-000000000001"}},
		},
		Spec: viewv1.MarkdownViewSpec{
			Markdowns: map[string]viewv1.MarkdownText{"a.md": viewv1.MarkdownText(strings.Repeat("é", 3000))},
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
	// Finalizers and owner references, bounded only by the object's size.
	g.Expect(got.Finalizers).To(BeNil())
	g.Expect(got.OwnerReferences).To(BeNil())
	// Labels and annotations (here a 100 kB last-applied-configuration) are
	// dropped; the hash and the byte size of the files take their place.
	g.Expect(got.Annotations).To(Equal(map[string]string{
		cachedContentHash:  wantHash,
		cachedContentBytes: "6020", // "a.md" (4) + 3000 × "é" (6000) + "logo.png" (8) + 8 bytes
	}))
	g.Expect(cachedInt(got.Annotations, cachedContentBytes)).To(Equal(wantSize))
	// What the controller reads from the cache is kept.
	g.Expect(got.Name).To(Equal("docs"))
	g.Expect(got.UID).To(BeEquivalentTo("uid"))
	g.Expect(got.Generation).To(Equal(int64(4)))
	g.Expect(got.ResourceVersion).To(Equal("9"))
	g.Expect(got.Spec.Replicas).To(Equal(int32(2)))
	g.Expect(got.Spec.Pod.PriorityClassName).To(Equal("docs"))
	g.Expect(got.Spec.Expose.Ingress.Host).To(BeEquivalentTo("docs.example.com"))
	g.Expect(got.Status.URL).To(Equal("http://x"))

	// Trimming again changes nothing: client-go transforms the objects of a
	// watch-list twice, and the trimmed copy is not an empty site.
	again, err := trimMarkdownView(got.DeepCopy())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(got))
}

func TestTrimMarkdownViewKeepsSmallFiles(t *testing.T) {
	view := func(files int, size int) *viewv1.MarkdownView {
		mv := trimTestView()
		mv.Spec.Assets = nil
		mv.Spec.Markdowns = map[string]viewv1.MarkdownText{}
		for i := range files {
			name := fmt.Sprintf("%02d.md", i) // 5 bytes
			mv.Spec.Markdowns[name] = viewv1.MarkdownText(strings.Repeat("x", size/files-len(name)))
		}
		return mv
	}
	cases := map[string]struct {
		mv   *viewv1.MarkdownView
		kept bool
	}{
		"one small page":                {view(1, 1000), true},
		"at the bound":                  {view(keptContentFiles, keptContentBytes), true},
		"a byte over":                   {view(1, keptContentBytes+1), false},
		"small, but too many files":     {view(keptContentFiles+1, 500), false},
		"the test view (6 KB, 2 files)": {trimTestView(), false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			want := maps.Clone(tc.mv.Spec.Markdowns)
			data, binaryData := desiredContent(tc.mv)
			hash := contentHash(data, binaryData)
			out, err := trimMarkdownView(tc.mv)
			g.Expect(err).NotTo(HaveOccurred())
			got := out.(*viewv1.MarkdownView)
			g.Expect(got.Annotations).To(HaveKeyWithValue(cachedContentHash, hash))
			if !tc.kept {
				g.Expect(got.Annotations).NotTo(HaveKey(cachedContentKept))
				g.Expect(got.Spec.Markdowns).To(BeNil())
				return
			}
			g.Expect(got.Annotations).To(HaveKey(cachedContentKept))
			g.Expect(got.Spec.Markdowns).To(Equal(want))
			again, err := trimMarkdownView(got.DeepCopy())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(again).To(Equal(got), "a second pass keeps the verdict")

			// The reconcile takes the files from the cached copy: no read
			// (the reconciler here has no reader at all).
			r := &Reconciler{}
			full, err := r.files(context.Background(), got)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(full).To(BeIdenticalTo(got))
		})
	}
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
	g.Expect(cachedInt(got.Annotations, cachedPodBytes)).To(BeNumerically(">", maxPodSettingsBytes))
	again, err := trimMarkdownView(got.DeepCopy())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(got), "a second pass keeps the verdict")

	// Under the bound, nothing is dropped.
	out, err = trimMarkdownView(trimTestView())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.(*viewv1.MarkdownView).Annotations).NotTo(HaveKey(cachedPodBytes))
}

// A MarkdownView's own annotations cannot pass for the cache's: the keys
// the transform writes are ones the API server refuses.
func TestCacheKeysCannotBeOnALiveObject(t *testing.T) {
	g := NewWithT(t)
	for _, k := range []string{cachedContentHash, cachedContentBytes, cachedPodBytes, cachedContentKept} {
		g.Expect(validation.IsQualifiedName(k)).NotTo(BeEmpty(), k)
	}
	g.Expect(validation.IsQualifiedName(contentHashAnnotation)).To(BeEmpty(), "the annotation Trellis writes is a valid one")

	// A live view carrying the written annotation's key is trimmed like any other.
	mv := trimTestView()
	mv.Annotations[contentHashAnnotation] = "forged"
	out, err := trimMarkdownView(mv)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out.(*viewv1.MarkdownView).Spec.Markdowns).To(BeNil())
	g.Expect(out.(*viewv1.MarkdownView).Annotations).NotTo(HaveKey(contentHashAnnotation))
}

func TestTrimConfigMapHashesWhatItHolds(t *testing.T) {
	data := map[string]string{"a.md": "A"}
	binaryData := map[string][]byte{"logo.png": {1}}
	cases := map[string]struct {
		data   map[string]string
		binary map[string][]byte
	}{
		"as written":      {data: data, binary: binaryData},
		"data edited":     {data: map[string]string{"a.md": "B"}, binary: binaryData},
		"a file added":    {data: map[string]string{"a.md": "A", "evil.md": "x"}, binary: binaryData},
		"an asset gone":   {data: data},
		"no data at all":  {},
		"data as binary":  {binary: map[string][]byte{"a.md": []byte("A")}},
		"empty, not nil":  {data: map[string]string{}, binary: map[string][]byte{}},
		"only the assets": {binary: binaryData},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			written := contentHash(data, binaryData)
			cm := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "markdowns-docs", Labels: map[string]string{"team": "a"},
					Annotations:   map[string]string{"note": "kept", contentHashAnnotation: written},
					ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "trellis"}}},
				Data: tc.data, BinaryData: tc.binary,
			}
			out, err := trimConfigMap(cm)
			g.Expect(err).NotTo(HaveOccurred())
			got := out.(*corev1.ConfigMap)
			g.Expect(got.Data).To(BeNil())
			g.Expect(got.BinaryData).To(BeNil())
			g.Expect(got.ManagedFields).To(BeNil())
			g.Expect(got.Labels).To(Equal(map[string]string{"team": "a"}))
			g.Expect(got.Annotations).To(Equal(map[string]string{
				"note":                "kept",
				contentHashAnnotation: written,                         // what it says it holds, as it was
				cachedContentHash:     contentHash(tc.data, tc.binary), // what it holds
			}))
			again, err := trimConfigMap(got.DeepCopy())
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(again).To(Equal(got), "a second pass does not take the trimmed copy for an empty ConfigMap")
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
		g.Expect(svc.Annotations).To(Equal(map[string]string{contentHashAnnotation: "y"}))
	}
}
