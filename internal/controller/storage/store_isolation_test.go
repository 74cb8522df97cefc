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
	storagebucket "github.com/trellis-dev/trellis/internal/controller/storage/bucket"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
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
	eventuallyReason(g, teamA, "assets", storagebucket.ReasonHealthy)

	g.Expect(bob.Create(ctx, newBucket(teamB, "assets", "team-a-only"))).To(Succeed())
	g.Expect(bob.Create(ctx, newBucket(teamB, "nothing", "closed"))).To(Succeed())
	for _, name := range []string{"assets", "nothing"} {
		b := eventuallyReason(g, teamB, name, stores.ReasonNamespaceNotAllowed)
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
		g.Expect(reasons).To(ContainElement(stores.ReasonNamespaceNotAllowed))
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
	}, stores.NamespaceLabelsTTL+timeout, poll).Should(Succeed())
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
	first = eventuallyReason(g, teamA, "data", storagebucket.ReasonHealthy)
	putObject(g, kept, "secret-plans.txt")
	g.Expect(alice.Delete(ctx, first)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(first), &storagev1.StorageBucket{}))
	}, timeout, poll).Should(BeTrue())
	owner, err := c.Owner(ctx, kept)
	g.Expect(err).NotTo(HaveOccurred())
	teamAUID := namespaceUID(g, teamA)
	g.Expect(owner).To(Equal(s3.Owner{UID: string(first.UID), Namespace: teamA, NamespaceUID: teamAUID}), "kept, and still saying whose it was")

	// Team B tries to take it, with and without adoptExisting.
	grab := newBucket(teamB, "grab", store)
	grab.Spec.BucketName = kept
	grab.Spec.AdoptExisting = ptr.To(true)
	g.Expect(bob.Create(ctx, grab)).To(Succeed())
	got := eventuallyReason(g, teamB, "grab", storagebucket.ReasonAdoptionNotAllowed)
	g.Expect(conditions.IsTrue(got.Status.Conditions, conditions.Stalled)).To(BeTrue())
	g.Expect(readyMessage(got)).To(ContainSubstring("was not created for namespace " + teamB))
	g.Expect(readyMessage(got)).To(ContainSubstring("does not let this namespace adopt buckets"))
	peek := newBucket(teamB, "peek", store)
	peek.Spec.BucketName = kept
	g.Expect(bob.Create(ctx, peek)).To(Succeed())
	got = eventuallyReason(g, teamB, "peek", storagebucket.ReasonConflict)
	g.Expect(readyMessage(got)).To(ContainSubstring("does not let this namespace adopt buckets"))
	owner, err = c.Owner(ctx, kept)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(owner).To(Equal(s3.Owner{UID: string(first.UID), Namespace: teamA, NamespaceUID: teamAUID}), "left untouched")

	// Nor may team B make a bucket under team A's names.
	squat := newBucket(teamB, "squat", store)
	squat.Spec.BucketName = teamA + "-later"
	g.Expect(bob.Create(ctx, squat)).To(Succeed())
	got = eventuallyReason(g, teamB, "squat", storagebucket.ReasonBucketNameNotAllowed)
	g.Expect(readyMessage(got)).To(ContainSubstring("name the bucket " + teamB + "-"))
	exists, err := c.BucketExists(ctx, teamA+"-later")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exists).To(BeFalse())

	// Team A takes it back.
	back := newBucket(teamA, "back", store)
	back.Spec.BucketName = kept
	g.Expect(alice.Create(ctx, back)).To(Succeed())
	got = eventuallyReason(g, teamA, "back", storagebucket.ReasonConflict)
	g.Expect(readyMessage(got)).To(ContainSubstring("set adoptExisting: true to take it back"))
	got.Spec.AdoptExisting = ptr.To(true)
	g.Expect(alice.Update(ctx, got)).To(Succeed())
	got = eventuallyReason(g, teamA, "back", storagebucket.ReasonHealthy)
	owner, err = c.Owner(ctx, kept)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(owner).To(Equal(s3.Owner{UID: string(got.UID), Namespace: teamA, NamespaceUID: teamAUID}))
	n, err := c.CountObjects(ctx, kept, 10)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(1), "with its data")

	for _, b := range []struct{ ns, name string }{{teamB, "grab"}, {teamB, "peek"}, {teamB, "squat"}, {teamA, "back"}} {
		deleteBucket(g, b.ns, b.name)
	}
}

// TestKeptBucketStaysWithItsNamespaceNotItsName: a bucket kept by Retain
// goes back to the namespace it was kept for, that very object (its UID),
// and not to a namespace deleted and made again under the same name (a
// later Tenant with the same prefix, a NamespaceRequest), whose editor asks
// for it with adoptExisting: refused, untouched, its data unread.
func TestKeptBucketStaysWithItsNamespaceNotItsName(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	store := ensureStore(g)
	ns := newNamespace(t)
	alice := editorOf(t, "alice-"+ns, ns)
	c := direct(g)
	kept := ns + "-kept"
	keep := func(name string, adopt bool) {
		b := newBucket(ns, name, store)
		b.Spec.BucketName, b.Spec.AdoptExisting = kept, ptr.To(adopt)
		g.Expect(alice.Create(ctx, b)).To(Succeed())
		eventuallyReason(g, ns, name, storagebucket.ReasonHealthy)
		g.Expect(alice.Delete(ctx, b)).To(Succeed())
		g.Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(b), &storagev1.StorageBucket{}))
		}, timeout, poll).Should(BeTrue())
	}
	keep("data", false)
	putObject(g, kept, "secret-plans.txt")
	// The namespace it was kept for takes it back, and keeps it again.
	keep("back", true)
	before := namespaceUID(g, ns)
	owner, err := c.Owner(ctx, kept)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(owner.Namespace).To(Equal(ns))
	g.Expect(owner.NamespaceUID).To(Equal(before))

	remakeNamespace(g, ns)
	after := namespaceUID(g, ns)
	g.Expect(after).NotTo(Equal(before))
	mallory := editorOf(t, "mallory-"+ns, ns)
	grab := newBucket(ns, "grab", store)
	grab.Spec.BucketName, grab.Spec.AdoptExisting = kept, ptr.To(true)
	g.Expect(mallory.Create(ctx, grab)).To(Succeed())
	got := eventuallyReason(g, ns, "grab", storagebucket.ReasonAdoptionNotAllowed)
	g.Expect(conditions.IsTrue(got.Status.Conditions, conditions.Stalled)).To(BeTrue())
	g.Expect(readyMessage(got)).To(ContainSubstring("it was kept for an earlier namespace named " + ns))
	g.Expect(readyMessage(got)).To(ContainSubstring("not this one (UID " + after + ")"))
	peek := newBucket(ns, "peek", store)
	peek.Spec.BucketName = kept
	g.Expect(mallory.Create(ctx, peek)).To(Succeed())
	got = eventuallyReason(g, ns, "peek", storagebucket.ReasonConflict)
	g.Expect(readyMessage(got)).NotTo(ContainSubstring("take it back"))
	g.Expect(c.Owner(ctx, kept)).To(Equal(owner), "left untouched")
	n, err := c.CountObjects(ctx, kept, 10)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(1))
	access := newAccess(ns, "read", "grab", "read-s3", storagev1.AccessReadOnly)
	g.Expect(mallory.Create(ctx, access)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(getAccess(g, ns, "read").Status.AccessKeyID).To(BeEmpty(), "no key to a bucket not claimed")
		g.Expect(conditions.IsTrue(getAccess(g, ns, "read").Status.Conditions, conditions.Stalled)).To(BeTrue())
	}, timeout, poll).Should(Succeed())
	g.Expect(client.IgnoreNotFound(k8s.Delete(ctx, access))).To(Succeed())
	for _, name := range []string{"grab", "peek"} {
		deleteBucket(g, ns, name)
	}
}

// TestAdoptionLeaveStaysWithItsNamespace: the store lets namespace N adopt
// buckets (its adoptionNamespaceSelector selects N's label). N is deleted
// and made again under its name without that label, a moment after Trellis
// read N's labels: an editor of the new N asking for another namespace's
// kept bucket is refused, though the labels Trellis read are not 30 s old.
func TestAdoptionLeaveStaysWithItsNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	store := ensureStore(g)
	victim := newNamespace(t)
	kept := victim + "-kept"
	b := newBucket(victim, "data", store)
	b.Spec.BucketName = kept
	g.Expect(k8s.Create(ctx, b)).To(Succeed())
	eventuallyReason(g, victim, "data", storagebucket.ReasonHealthy)
	deleteBucket(g, victim, "data")
	c := direct(g)
	owner, err := c.Owner(ctx, kept)
	g.Expect(err).NotTo(HaveOccurred())

	ns := newNamespace(t, adopterLabel)
	g.Expect(k8s.Create(ctx, newBucket(ns, "mine", store))).To(Succeed())
	eventuallyReason(g, ns, "mine", storagebucket.ReasonHealthy) // its namespace's labels read
	deleteBucket(g, ns, "mine")
	remakeNamespace(g, ns)
	mallory := editorOf(t, "mallory-"+ns, ns)
	grab := newBucket(ns, "grab", store)
	grab.Spec.BucketName, grab.Spec.AdoptExisting = kept, ptr.To(true)
	g.Expect(mallory.Create(ctx, grab)).To(Succeed())
	eventuallyReason(g, ns, "grab", storagebucket.ReasonAdoptionNotAllowed)
	g.Expect(c.Owner(ctx, kept)).To(Equal(owner), "left untouched")
	deleteBucket(g, ns, "grab")
}

// namespaceUID is the UID of a namespace.
func namespaceUID(g Gomega, name string) string {
	ns := &corev1.Namespace{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Name: name}, ns)).To(Succeed())
	return string(ns.UID)
}

// remakeNamespace deletes a namespace and makes another under its name.
// envtest runs no namespace controller: the test finalizes the namespace
// itself, as that controller does once the namespace is empty, and what was
// left in it stays in etcd (here, RoleBindings of the earlier editors).
func remakeNamespace(g Gomega, name string) {
	ctx := context.Background()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	g.Expect(k8s.Delete(ctx, ns)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, ns)).To(Succeed())
		ns.Spec.Finalizers = nil
		g.Expect(k8s.SubResource("finalize").Update(ctx, ns)).To(Succeed())
	}, timeout, poll).Should(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: name}, &corev1.Namespace{}))
	}, timeout, poll).Should(BeTrue())
	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
}

// TestRetainRecordsTheNamespace: a bucket tagged before namespaces were
// recorded (only its UID), or before their UIDs were, gets its namespace
// tags when its StorageBucket is deleted with Retain, so its namespace can
// take it back.
func TestRetainRecordsTheNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	store := ensureStore(g)
	ns := newNamespace(t)
	c := direct(g)
	for name, earlier := range map[string]func(b *storagev1.StorageBucket) s3.Owner{
		"old":   func(b *storagev1.StorageBucket) s3.Owner { return s3.Owner{UID: string(b.UID)} },
		"named": func(b *storagev1.StorageBucket) s3.Owner { return s3.Owner{UID: string(b.UID), Namespace: ns} },
	} {
		g.Expect(k8s.Create(ctx, newBucket(ns, name, store))).To(Succeed())
		b := eventuallyReason(g, ns, name, storagebucket.ReasonHealthy)
		g.Expect(c.SetOwner(ctx, ns+"-"+name, earlier(b))).To(Succeed()) // as an earlier Trellis tagged it
		deleteBucket(g, ns, name)
		owner, err := c.Owner(ctx, ns+"-"+name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(owner).To(Equal(s3.Owner{UID: string(b.UID), Namespace: ns, NamespaceUID: namespaceUID(g, ns)}), name)
	}
}
