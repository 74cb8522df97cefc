package stores

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/s3"
)

func TestAccessOf(t *testing.T) {
	teamA := map[string]string{"team": "a", "kubernetes.io/metadata.name": "team-a"}
	sel := func(l map[string]string) *metav1.LabelSelector { return &metav1.LabelSelector{MatchLabels: l} }
	cases := map[string]struct {
		use, adopt, public *metav1.LabelSelector
		publicAccess       storagev1.PublicAccess
		want               Access
		wantErr            string
	}{
		"no selector: closed":          {},
		"empty selector: closed":       {use: &metav1.LabelSelector{}},
		"selected":                     {use: sel(map[string]string{"team": "a"}), want: Access{Use: true}},
		"not selected":                 {use: sel(map[string]string{"team": "b"})},
		"every namespace":              {use: everyNamespaceSelector(), want: Access{Use: true}},
		"selected, adopts":             {use: everyNamespaceSelector(), adopt: sel(map[string]string{"team": "a"}), want: Access{Use: true, Adopt: true}},
		"adopt selector, empty":        {use: everyNamespaceSelector(), adopt: &metav1.LabelSelector{}, want: Access{Use: true}},
		"adoption without use is none": {use: sel(map[string]string{"team": "b"}), adopt: everyNamespaceSelector()},
		"invalid operator": {use: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near"}}},
			wantErr: "namespaceSelector"},
		"invalid adoption selector": {use: everyNamespaceSelector(), adopt: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpIn}}},
			wantErr: "adoptionNamespaceSelector"},
		"public access allowed, selected": {use: everyNamespaceSelector(), public: sel(map[string]string{"team": "a"}),
			publicAccess: storagev1.PublicAccessAllowed, want: Access{Use: true, Public: true}},
		"public access allowed, not selected": {use: everyNamespaceSelector(), public: sel(map[string]string{"team": "b"}),
			publicAccess: storagev1.PublicAccessAllowed, want: Access{Use: true}},
		"public access allowed, no selector: none": {use: everyNamespaceSelector(), publicAccess: storagev1.PublicAccessAllowed,
			want: Access{Use: true}},
		"public access blocked: the selector is ignored": {use: everyNamespaceSelector(), public: everyNamespaceSelector(),
			publicAccess: storagev1.PublicAccessBlocked, want: Access{Use: true}},
		"public access unset (not defaulted): blocked": {use: everyNamespaceSelector(), public: everyNamespaceSelector(),
			want: Access{Use: true}},
		"public access without use is none": {use: sel(map[string]string{"team": "b"}), public: everyNamespaceSelector(),
			publicAccess: storagev1.PublicAccessAllowed},
		"invalid public access selector": {use: everyNamespaceSelector(), public: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Near"}}},
			publicAccess: storagev1.PublicAccessAllowed, wantErr: "publicAccessNamespaceSelector"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			store := testStore("s")
			store.Spec.NamespaceSelector, store.Spec.AdoptionNamespaceSelector = tc.use, tc.adopt
			store.Spec.PublicAccess, store.Spec.PublicAccessNamespaceSelector = tc.publicAccess, tc.public
			got, err := AccessOf(store, teamA)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
				g.Expect(ValidateSelectors(store)).To(HaveOccurred())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tc.want))
		})
	}
}

func everyNamespaceSelector() *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpExists}}}
}

func TestOwnBucketName(t *testing.T) {
	g := NewWithT(t)
	g.Expect(OwnBucketName("team-a", "team-a-assets")).To(BeTrue())
	g.Expect(OwnBucketName("team-a", "team-a")).To(BeFalse())
	g.Expect(OwnBucketName("team-a", "team-ab-assets")).To(BeFalse())
	g.Expect(OwnBucketName("team-a", "assets")).To(BeFalse())
	g.Expect(OwnBucketName("team-a", "team-b-assets")).To(BeFalse())
	// The form of hashed derived names is no one's to name: namespace acme
	// would otherwise name acme-dev/data's bucket first.
	g.Expect(OwnBucketName("acme", s3.DeriveBucketName("acme-dev", "data"))).To(BeFalse())
	g.Expect(OwnBucketName("team-a", "team-a--x")).To(BeFalse())
}

// namespaceReader serves one namespace's labels and counts reads.
type namespaceReader struct {
	client.Reader
	labels map[string]string
	reads  int
}

func (r *namespaceReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	r.reads++
	obj.(*metav1.PartialObjectMetadata).Name = key.Name
	obj.SetLabels(r.labels)
	return nil
}

// in is an object of the namespace, made long ago.
func in(namespace string) client.Object {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "x"}}
}

func TestNamespaceLabelsAreReadAtMostOncePerTTL(t *testing.T) {
	g := NewWithT(t)
	reader := &namespaceReader{labels: map[string]string{"team": "a"}}
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	n := NewNamespaceLabels(reader)
	n.now = func() time.Time { return now }
	ctx := context.Background()

	l, err := n.Get(ctx, in("team-a"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l).To(HaveKeyWithValue("team", "a"))
	_, _ = n.Get(ctx, in("team-a"))
	g.Expect(reader.reads).To(Equal(1))
	reader.labels = map[string]string{"team": "b"}
	now = now.Add(NamespaceLabelsTTL)
	l, _ = n.Get(ctx, in("team-a"))
	g.Expect(reader.reads).To(Equal(2), "read again once the TTL is over")
	g.Expect(l).To(HaveKeyWithValue("team", "b"))
	_, _ = n.Get(ctx, in("team-b"))
	g.Expect(reader.reads).To(Equal(3), "each namespace on its own")
}

// TestNamespaceLabelsAreNotAnEarlierNamespaces: labels read before an
// object was made may be those of an earlier namespace of the name, deleted
// since: for that object they are read again, whatever the TTL says.
func TestNamespaceLabelsAreNotAnEarlierNamespaces(t *testing.T) {
	g := NewWithT(t)
	reader := &namespaceReader{labels: map[string]string{"storage.example.com/adopt": "yes"}}
	now := time.Date(2030, 1, 1, 0, 0, 10, 0, time.UTC)
	n := NewNamespaceLabels(reader)
	n.now = func() time.Time { return now }
	ctx := context.Background()
	made := func(at time.Time) client.Object {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "b", CreationTimestamp: metav1.NewTime(at)}}
	}

	_, err := n.Get(ctx, made(now.Add(-time.Minute)))
	g.Expect(err).NotTo(HaveOccurred())
	// The namespace is deleted and made again, without the label.
	reader.labels = map[string]string{"team": "new"}
	now = now.Add(5 * time.Second)
	l, err := n.Get(ctx, made(now.Add(-time.Second)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reader.reads).To(Equal(2), "read again for an object made after the first read")
	g.Expect(l).To(Equal(map[string]string{"team": "new"}))
	now = now.Add(2 * time.Second)
	_, _ = n.Get(ctx, made(now.Add(-4*time.Second)))
	g.Expect(reader.reads).To(Equal(2), "read after that object was made: reused")
	_, _ = n.Get(ctx, made(now.Truncate(time.Second)))
	g.Expect(reader.reads).To(Equal(3), "made in the second of the read: read again")
}

// testClock is a clock the test moves by hand.
type testClock struct{ t time.Time }

func newTestClock() *testClock { return &testClock{t: time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)} }

func (c *testClock) now() time.Time          { return c.t }
func (c *testClock) advance(d time.Duration) { c.t = c.t.Add(d) }
