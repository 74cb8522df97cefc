package storage

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/s3"
)

func readyMessage(b *storagev1.StorageBucket) string {
	return meta.FindStatusCondition(b.Status.Conditions, conditions.Ready).Message
}

// TestStoreIsOpenOnlyToSelectedNamespaces, acting as namespace editors: a
// store serves the namespaces its selector picks and no other; team B's
// StorageBucket is refused with the reason, without a request to the store,
// and team B cannot open the store to itself.
func TestStoreIsOpenOnlyToSelectedNamespaces(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	teamA := newNamespace(t, map[string]string{"team": "a"})
	teamB := newNamespace(t)
	store := newStore("team-a-only", credsSecret)
	store.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	g.Expect(k8s.Create(ctx, store)).To(Succeed())
	// An empty selector opens nothing.
	closed := newStore("closed", credsSecret)
	closed.Spec.NamespaceSelector = &metav1.LabelSelector{}
	g.Expect(k8s.Create(ctx, closed)).To(Succeed())
	alice, bob := editorOf(t, "alice", teamA), editorOf(t, "bob", teamB)

	g.Expect(alice.Create(ctx, newBucket(teamA, "assets", "team-a-only"))).To(Succeed())
	eventuallyReason(g, teamA, "assets", ReasonHealthy)

	g.Expect(bob.Create(ctx, newBucket(teamB, "assets", "team-a-only"))).To(Succeed())
	g.Expect(bob.Create(ctx, newBucket(teamB, "nothing", "closed"))).To(Succeed())
	for _, name := range []string{"assets", "nothing"} {
		b := eventuallyReason(g, teamB, name, ReasonNamespaceNotAllowed)
		g.Expect(conditions.IsTrue(b.Status.Conditions, conditions.Stalled)).To(BeTrue())
		g.Expect(readyMessage(b)).To(ContainSubstring("is not open to namespace " + teamB))
		g.Expect(b.Status.Claim).To(BeEmpty())
	}
	exists, err := direct(g).BucketExists(ctx, teamB+"-assets")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exists).To(BeFalse(), "nothing made in a store not open to the namespace")
	// The refusal is an Event in bob's namespace.
	g.Eventually(func(g Gomega) {
		events := &corev1.EventList{}
		g.Expect(k8s.List(ctx, events, client.InNamespace(teamB))).To(Succeed())
		var reasons []string
		for _, e := range events.Items {
			reasons = append(reasons, e.Reason)
		}
		g.Expect(reasons).To(ContainElement(ReasonNamespaceNotAllowed))
	}, timeout, poll).Should(Succeed())

	// Bob cannot open the store himself, nor label his namespace into it.
	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"namespaceSelector":null}}`))
	err = bob.Patch(ctx, &storagev1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "team-a-only"}}, patch)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
	err = bob.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: teamB}}, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"a"}}}`)))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)

	// The platform team opens it: the bucket follows within a minute.
	g.Expect(k8s.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: teamB}}, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"team":"a"}}}`)))).To(Succeed())
	start := time.Now()
	g.Eventually(func(g Gomega) {
		b := getBucket(g, teamB, "assets")
		g.Expect(conditions.IsTrue(b.Status.Conditions, conditions.Ready)).To(BeTrue(), readyMessage(b))
	}, namespaceLabelsTTL+timeout, poll).Should(Succeed())
	t.Logf("bucket Ready %.1fs after its namespace was labelled into the store", time.Since(start).Seconds())

	for _, b := range []struct{ ns, name string }{{teamA, "assets"}, {teamB, "assets"}, {teamB, "nothing"}} {
		deleteBucket(g, b.ns, b.name)
	}
	g.Expect(k8s.Delete(ctx, store)).To(Succeed())
	g.Expect(k8s.Delete(ctx, closed)).To(Succeed())
}

// TestKeptBucketStaysWithItsNamespace, acting as namespace editors: a bucket
// kept by deletionPolicy Retain can be taken back by its namespace, and by no
// other without the store's leave; other namespaces' names are not free to
// take either.
func TestKeptBucketStaysWithItsNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	store := ensureStore(g)
	teamA, teamB := newNamespace(t), newNamespace(t)
	alice, bob := editorOf(t, "alice-"+teamA, teamA), editorOf(t, "bob-"+teamB, teamB)
	c := direct(g)
	kept := teamA + "-kept"

	first := newBucket(teamA, "data", store)
	first.Spec.BucketName = kept
	g.Expect(alice.Create(ctx, first)).To(Succeed())
	first = eventuallyReason(g, teamA, "data", ReasonHealthy)
	putObject(g, kept, "secret-plans.txt")
	g.Expect(alice.Delete(ctx, first)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(first), &storagev1.StorageBucket{}))
	}, timeout, poll).Should(BeTrue())
	owner, err := c.Owner(ctx, kept)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(owner).To(Equal(s3.Owner{UID: string(first.UID), Namespace: teamA}), "kept, and still saying whose it was")

	// Team B tries to take it, with and without adoptExisting.
	grab := newBucket(teamB, "grab", store)
	grab.Spec.BucketName = kept
	grab.Spec.AdoptExisting = ptr.To(true)
	g.Expect(bob.Create(ctx, grab)).To(Succeed())
	got := eventuallyReason(g, teamB, "grab", ReasonAdoptionNotAllowed)
	g.Expect(conditions.IsTrue(got.Status.Conditions, conditions.Stalled)).To(BeTrue())
	g.Expect(readyMessage(got)).To(ContainSubstring("was not created for namespace " + teamB))
	g.Expect(readyMessage(got)).To(ContainSubstring("does not let this namespace adopt buckets"))
	peek := newBucket(teamB, "peek", store)
	peek.Spec.BucketName = kept
	g.Expect(bob.Create(ctx, peek)).To(Succeed())
	got = eventuallyReason(g, teamB, "peek", ReasonConflict)
	g.Expect(readyMessage(got)).To(ContainSubstring("does not let this namespace adopt buckets"))
	owner, err = c.Owner(ctx, kept)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(owner).To(Equal(s3.Owner{UID: string(first.UID), Namespace: teamA}), "left untouched")

	// Nor may team B make a bucket under team A's names.
	squat := newBucket(teamB, "squat", store)
	squat.Spec.BucketName = teamA + "-later"
	g.Expect(bob.Create(ctx, squat)).To(Succeed())
	got = eventuallyReason(g, teamB, "squat", ReasonBucketNameNotAllowed)
	g.Expect(readyMessage(got)).To(ContainSubstring("name the bucket " + teamB + "-"))
	exists, err := c.BucketExists(ctx, teamA+"-later")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exists).To(BeFalse())

	// Team A takes it back.
	back := newBucket(teamA, "back", store)
	back.Spec.BucketName = kept
	g.Expect(alice.Create(ctx, back)).To(Succeed())
	got = eventuallyReason(g, teamA, "back", ReasonConflict)
	g.Expect(readyMessage(got)).To(ContainSubstring("set adoptExisting: true to take it back"))
	got.Spec.AdoptExisting = ptr.To(true)
	g.Expect(alice.Update(ctx, got)).To(Succeed())
	got = eventuallyReason(g, teamA, "back", ReasonHealthy)
	owner, err = c.Owner(ctx, kept)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(owner).To(Equal(s3.Owner{UID: string(got.UID), Namespace: teamA}))
	n, err := c.CountObjects(ctx, kept, 10)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(1), "with its data")

	for _, b := range []struct{ ns, name string }{{teamB, "grab"}, {teamB, "peek"}, {teamB, "squat"}, {teamA, "back"}} {
		deleteBucket(g, b.ns, b.name)
	}
}

// TestRetainRecordsTheNamespace: a bucket tagged before namespaces were
// recorded (only its UID) gets its namespace tag when its StorageBucket is
// deleted with Retain, so its namespace can take it back.
func TestRetainRecordsTheNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	store := ensureStore(g)
	ns := newNamespace(t)
	g.Expect(k8s.Create(ctx, newBucket(ns, "old", store))).To(Succeed())
	b := eventuallyReason(g, ns, "old", ReasonHealthy)
	c := direct(g)
	g.Expect(c.SetOwner(ctx, ns+"-old", s3.Owner{UID: string(b.UID)})).To(Succeed()) // as an earlier Trellis tagged it
	deleteBucket(g, ns, "old")
	owner, err := c.Owner(ctx, ns+"-old")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(owner).To(Equal(s3.Owner{UID: string(b.UID), Namespace: ns}))
}
