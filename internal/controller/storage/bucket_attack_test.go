package storage

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

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
	bucketaccess "github.com/trellis-dev/trellis/internal/controller/storage/access"
	storagebucket "github.com/trellis-dev/trellis/internal/controller/storage/bucket"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/s3"
)

// The bucket attacks of a namespace editor: a policy that makes a bucket
// public or grants it to another namespace's key, a derived bucket name
// another namespace would derive, and what a later claimant of a kept
// bucket is told.

// readPolicy is a policy letting principal read the objects under pub/.
func readPolicy(bucket, principal string) string {
	return `{"Version":"2012-10-17","Statement":[{"Sid":"Read","Effect":"Allow","Principal":` + principal +
		`,"Action":["s3:GetObject"],"Resource":["arn:aws:s3:::` + bucket + `/pub/*"]}]}`
}

// anonymousGet is a plain HTTP GET of pub/index.html, without credentials.
func anonymousGet(g Gomega, bucket string) int { return anonymousGetOn(g, versitygwOn(), bucket) }

// anonymousGetOn is anonymousGet on the server of a store.
func anonymousGetOn(g Gomega, on storeOn, bucket string) int {
	resp, err := http.Get(on.direct + "/" + bucket + "/pub/index.html")
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	return resp.StatusCode
}

func setPolicy(g Gomega, c client.Client, ns, name, policy string) {
	body := fmt.Sprintf(`{"spec":{"policy":%q}}`, policy)
	g.Expect(c.Patch(context.Background(), getBucket(g, ns, name), client.RawPatch(types.MergePatchType, []byte(body)))).To(Succeed())
}

// eventuallyObservedReason waits for Ready's reason on the bucket's current generation.
func eventuallyObservedReason(g Gomega, ns, name, reason string) *storagev1.StorageBucket {
	var b *storagev1.StorageBucket
	g.Eventually(func(g Gomega) {
		b = getBucket(g, ns, name)
		g.Expect(b.Status.ObservedGeneration).To(Equal(b.Generation))
		c := meta.FindStatusCondition(b.Status.Conditions, conditions.Ready)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(reason), "message: %s", c.Message)
	}, timeout, poll).Should(Succeed())
	return b
}

func eventReasons(g Gomega, ns string) []string {
	events := &corev1.EventList{}
	g.Expect(k8s.List(context.Background(), events, client.InNamespace(ns))).To(Succeed())
	reasons := make([]string, 0, len(events.Items))
	for _, e := range events.Items {
		reasons = append(reasons, e.Reason)
	}
	return reasons
}

// TestPublicPolicyIsRefusedWhereBlocked, as a namespace editor: on a store
// that blocks public access (the default), a policy granting the
// namespace's own key is applied; one granting everyone is refused: the
// bucket is Stalled (PolicyRefused) with a Warning, the policy in the store
// stays the previous one, and an anonymous GET is still refused. On a store
// that allows public access to the namespaces it selects, the same policy is
// applied for a selected namespace (the anonymous GET succeeds) and refused
// for another. The blocked half runs on each backend (its own key named as a
// policy names it there); the allowed half is Trellis' rule alone, shown on
// versitygw.
func TestPublicPolicyIsRefusedWhereBlocked(t *testing.T) {
	for _, b := range accessBackends {
		t.Run(b.name, func(t *testing.T) { publicPolicyIsRefusedWhereBlocked(t, b) })
	}
}

func publicPolicyIsRefusedWhereBlocked(t *testing.T, be backend) {
	g := NewWithT(t)
	ctx := context.Background()
	on := be.store(t, g)
	store := on.name
	ns := newNamespace(t)
	editor := editorOf(t, "dev-"+ns, ns)
	bucket := ns + "-site"
	c := on.client(g)

	g.Expect(editor.Create(ctx, newBucket(ns, "site", store))).To(Succeed())
	eventuallyReason(g, ns, "site", storagebucket.ReasonHealthy)
	g.Expect(editor.Create(ctx, newAccess(ns, "app", "site", "site-creds", storagev1.AccessReadOnly))).To(Succeed())
	own, _ := stores.CurrentKey(&eventuallyAccessReason(g, ns, "app", bucketaccess.ReasonGranted).Status)
	key := own.PrincipalName()
	on.putAsRoot(g, bucket, "pub/index.html")

	// The namespace's own key: applied.
	setPolicy(g, editor, ns, "site", readPolicy(bucket, `{"AWS":["`+key+`"]}`))
	eventuallyObservedReason(g, ns, "site", storagebucket.ReasonHealthy)
	before, err := c.Policy(ctx, bucket)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(before).To(ContainSubstring(`"Sid":"Read"`))

	// Everyone, in each spelling: refused, nothing sent.
	for _, principal := range []string{`"*"`, `{"AWS":"*"}`, `{"AWS":["` + key + `","*"]}`} {
		setPolicy(g, editor, ns, "site", readPolicy(bucket, principal))
		got := eventuallyObservedReason(g, ns, "site", storagebucket.ReasonPolicyRefused)
		g.Expect(conditions.IsTrue(got.Status.Conditions, conditions.Stalled)).To(BeTrue())
		g.Expect(readyMessage(got)).To(ContainSubstring(`Principal "*" is everyone`))
		g.Expect(readyMessage(got)).To(ContainSubstring("publicAccess: Blocked"))
		g.Expect(meta.FindStatusCondition(got.Status.Conditions, conditions.SettingsApplied).Reason).To(Equal(storagebucket.ReasonPolicyRefused))
		p, err := c.Policy(ctx, bucket)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p).To(Equal(before), "the policy in the store is the previous one")
		g.Expect(anonymousGetOn(g, on, bucket)).To(Equal(http.StatusForbidden), "still not public")
	}
	g.Eventually(func(g Gomega) { g.Expect(eventReasons(g, ns)).To(ContainElement(storagebucket.ReasonPolicyRefused)) }, timeout, poll).Should(Succeed())
	_, err = on.creds(g, ns, "site-creds").get(g, bucket, "pub/index.html")
	g.Expect(err).NotTo(HaveOccurred(), "the key still reads")

	// The editor cannot lift the block: ObjectStores are the platform team's.
	err = editor.Patch(ctx, &storagev1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: store}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"publicAccess":"Allowed"}}`)))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "got %v", err)
	deleteAccess(g, ns, "app")
	deleteBucket(g, ns, "site")
	if be.name != "versitygw" {
		return
	}

	// A store that allows public access to the namespaces it selects.
	publicLabel := map[string]string{"storage-test/public": "yes"}
	public := newStore("public-s3", credsSecret)
	public.Spec.PublicAccess = storagev1.PublicAccessAllowed
	public.Spec.PublicAccessNamespaceSelector = &metav1.LabelSelector{MatchLabels: publicLabel}
	g.Expect(k8s.Create(ctx, public)).To(Succeed())
	opted := newNamespace(t, publicLabel)
	for _, n := range []string{opted, ns} {
		b := newBucket(n, "www", "public-s3")
		b.Spec.Policy = readPolicy(n+"-www", `"*"`)
		g.Expect(k8s.Create(ctx, b)).To(Succeed())
	}
	eventuallyReason(g, opted, "www", storagebucket.ReasonHealthy)
	putObject(g, opted+"-www", "pub/index.html")
	g.Expect(anonymousGet(g, opted+"-www")).To(Equal(http.StatusOK), "public where the store allows it")
	got := eventuallyReason(g, ns, "www", storagebucket.ReasonPolicyRefused)
	g.Expect(readyMessage(got)).To(ContainSubstring("publicAccessNamespaceSelector selects, not " + ns))
	putObject(g, ns+"-www", "pub/index.html")
	g.Expect(anonymousGet(g, ns+"-www")).To(Equal(http.StatusForbidden))

	for _, b := range []struct{ ns, name string }{{ns, "www"}, {opted, "www"}} {
		deleteBucket(g, b.ns, b.name)
	}
	g.Expect(k8s.Delete(ctx, public)).To(Succeed())
}

// TestPolicyNamingAnotherNamespacesKeyIsRefused, as a namespace editor: team
// B's bucket policy grants team A's key, by the principal a policy names it
// with (its key id on versitygw, its user's ARN on an IAM store); refused,
// and the key still cannot read team B's bucket. Team B's own key, by the
// same kind of principal, is applied, and reads. On each backend.
func TestPolicyNamingAnotherNamespacesKeyIsRefused(t *testing.T) {
	for _, b := range accessBackends {
		t.Run(b.name, func(t *testing.T) { policyNamingAnotherNamespacesKeyIsRefused(t, b) })
	}
}

func policyNamingAnotherNamespacesKeyIsRefused(t *testing.T, be backend) {
	g := NewWithT(t)
	ctx := context.Background()
	on := be.store(t, g)
	store := on.name
	teamA, teamB := newNamespace(t), newNamespace(t)
	bob := editorOf(t, "bob-"+teamB, teamB)

	g.Expect(k8s.Create(ctx, newBucket(teamA, "data", store))).To(Succeed())
	eventuallyReason(g, teamA, "data", storagebucket.ReasonHealthy)
	g.Expect(k8s.Create(ctx, newAccess(teamA, "app", "data", "data-creds", storagev1.AccessReadOnly))).To(Succeed())
	theirs := eventuallyAccessReason(g, teamA, "app", bucketaccess.ReasonGranted)
	theirKey, _ := stores.CurrentKey(&theirs.Status)

	b := newBucket(teamB, "leak", store)
	b.Spec.Policy = readPolicy(teamB+"-leak", `{"AWS":"`+theirKey.PrincipalName()+`"}`)
	g.Expect(bob.Create(ctx, b)).To(Succeed())
	got := eventuallyReason(g, teamB, "leak", storagebucket.ReasonPolicyRefused)
	g.Expect(conditions.IsTrue(got.Status.Conditions, conditions.Stalled)).To(BeTrue())
	g.Expect(readyMessage(got)).To(ContainSubstring(fmt.Sprintf("principal %q is not a key of this namespace's BucketAccesses", theirKey.PrincipalName())))
	g.Expect(got.Status.Claim).To(Equal(storagev1.BucketClaimed), "the bucket itself is made")
	g.Expect(on.policy(g, teamB+"-leak")).To(BeEmpty(), "nothing was applied")
	on.putAsRoot(g, teamB+"-leak", "pub/secret.txt")
	_, err := on.creds(g, teamA, "data-creds").get(g, teamB+"-leak", "pub/secret.txt")
	g.Expect(httpStatus(err)).To(Equal(http.StatusForbidden), "team A's key reads nothing of team B's: %v", err)

	// Team B's own key, named as a policy names it there: applied.
	g.Expect(bob.Create(ctx, newAccess(teamB, "reader", "leak", "leak-creds", storagev1.AccessReadOnly))).To(Succeed())
	mine := eventuallyAccessReason(g, teamB, "reader", bucketaccess.ReasonGranted)
	myKey, _ := stores.CurrentKey(&mine.Status)
	if be.name == "SeaweedFS" {
		g.Expect(myKey.Principal).To(HavePrefix("arn:"), "an IAM store names the key's user by ARN")
	}
	setPolicy(g, bob, teamB, "leak", readPolicy(teamB+"-leak", `{"AWS":"`+myKey.PrincipalName()+`"}`))
	eventuallyObservedReason(g, teamB, "leak", storagebucket.ReasonHealthy)
	g.Expect(on.policy(g, teamB+"-leak")).To(ContainSubstring(`"Sid":"Read"`))

	deleteAccess(g, teamB, "reader")
	deleteBucket(g, teamB, "leak")
	deleteAccess(g, teamA, "app")
	deleteBucket(g, teamA, "data")
}

// TestCollidingDerivedNamesStayApart: acme/dev-data and acme-dev/data used
// to derive the same bucket name. Now each gets its own, and namespace acme
// cannot name acme-dev's bucket first either.
func TestCollidingDerivedNamesStayApart(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	store := ensureStore(g)
	acme := fmt.Sprintf("acme%d", nsCounter.Add(1))
	acmeDev := acme + "-dev"
	for _, n := range []string{acme, acmeDev} {
		g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}})).To(Succeed())
	}
	alice := editorOf(t, "alice-"+acme, acme)
	theirs := s3.DeriveBucketName(acmeDev, "data")
	g.Expect(theirs).To(HavePrefix(acmeDev + "-data--"))

	// acme tries to take acme-dev's derived name first, by naming it.
	squat := newBucket(acme, "squat", store)
	squat.Spec.BucketName = theirs
	g.Expect(alice.Create(ctx, squat)).To(Succeed())
	got := eventuallyReason(g, acme, "squat", storagebucket.ReasonBucketNameNotAllowed)
	g.Expect(got.Status.Claim).To(BeEmpty())

	g.Expect(alice.Create(ctx, newBucket(acme, "dev-data", store))).To(Succeed())
	g.Expect(k8s.Create(ctx, newBucket(acmeDev, "data", store))).To(Succeed())
	mine := eventuallyReason(g, acme, "dev-data", storagebucket.ReasonHealthy)
	other := eventuallyReason(g, acmeDev, "data", storagebucket.ReasonHealthy)
	g.Expect(mine.Status.BucketName).To(Equal(acme + "-dev-data"))
	g.Expect(other.Status.BucketName).To(Equal(theirs))
	c := direct(g)
	for _, b := range []*storagev1.StorageBucket{mine, other} {
		owner, err := c.Owner(ctx, b.Status.BucketName)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(owner).To(Equal(s3.Owner{UID: string(b.UID), Namespace: b.Namespace, NamespaceUID: namespaceUID(g, b.Namespace)}), "each its own bucket")
	}

	for _, b := range []struct{ ns, name string }{{acme, "squat"}, {acme, "dev-data"}, {acmeDev, "data"}} {
		deleteBucket(g, b.ns, b.name)
	}
}

// TestRetainedBucketSaysWhoseItIs: a later claimant of a bucket is told the
// truth in each state: claimed by a live StorageBucket; claimed by one being
// deleted, which keeps it (deletionPolicy: Retain) for its namespace; then,
// that StorageBucket gone, kept for its namespace by the bucket's tags, with
// who can take it back or hand it over.
func TestRetainedBucketSaysWhoseItIs(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	store := ensureStore(g)
	teamA, teamB := newNamespace(t), newNamespace(t)
	kept := teamA + "-kept"

	first := newBucket(teamA, "data", store)
	first.Spec.BucketName = kept
	g.Expect(k8s.Create(ctx, first)).To(Succeed())
	first = eventuallyReason(g, teamA, "data", storagebucket.ReasonHealthy)
	// A BucketAccess holds the deletion, so the middle state can be seen.
	g.Expect(k8s.Create(ctx, newAccess(teamA, "hold", "data", "hold-creds", storagev1.AccessReadOnly))).To(Succeed())
	eventuallyAccessReason(g, teamA, "hold", bucketaccess.ReasonGranted)

	later := newBucket(teamB, "later", store)
	later.Spec.BucketName = kept
	later.Spec.AdoptExisting = ptr.To(true)
	g.Expect(k8s.Create(ctx, later)).To(Succeed())
	got := eventuallyReason(g, teamB, "later", storagebucket.ReasonConflict)
	g.Expect(readyMessage(got)).To(Equal(fmt.Sprintf("bucket %s is claimed by StorageBucket %s/data", kept, teamA)))

	g.Expect(k8s.Delete(ctx, first)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(readyMessage(getBucket(g, teamB, "later"))).To(ContainSubstring(
			fmt.Sprintf("is claimed by StorageBucket %s/data, which is being deleted with deletionPolicy: Retain: the bucket stays, kept for namespace %s", teamA, teamA)))
	}, timeout, poll).Should(Succeed())

	deleteAccess(g, teamA, "hold")
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(first), &storagev1.StorageBucket{}))
	}, timeout, poll).Should(BeTrue())
	g.Eventually(func(g Gomega) {
		b := getBucket(g, teamB, "later")
		c := meta.FindStatusCondition(b.Status.Conditions, conditions.Ready)
		g.Expect(c.Reason).To(Equal(storagebucket.ReasonAdoptionNotAllowed))
		g.Expect(c.Message).NotTo(ContainSubstring("is claimed by StorageBucket"), "that StorageBucket is gone")
		for _, want := range []string{
			"No StorageBucket claims it: it was kept for namespace " + teamA + " after its StorageBucket was deleted (deletionPolicy: Retain",
			s3.OwnerNamespaceTag + "=" + teamA, s3.OwnerTag + "=" + string(first.UID),
			"Namespace " + teamA + " can take it back with a StorageBucket naming it (bucketName: " + kept + ") and adoptExisting: true",
			"hand it over by setting its tags " + s3.OwnerNamespaceTag + " to " + teamB + " and " + s3.OwnerNamespaceUIDTag + " to " + namespaceUID(g, teamB),
		} {
			g.Expect(c.Message).To(ContainSubstring(want))
		}
	}, timeout, poll).Should(Succeed())
	owner, err := direct(g).Owner(ctx, kept)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(owner).To(Equal(s3.Owner{UID: string(first.UID), Namespace: teamA, NamespaceUID: namespaceUID(g, teamA)}), "untouched")

	// What the message says works: the platform team hands it over.
	teamBUID := namespaceUID(g, teamB)
	g.Expect(direct(g).SetOwner(ctx, kept, s3.Owner{UID: string(first.UID), Namespace: teamB, NamespaceUID: teamBUID})).To(Succeed())
	got = getBucket(g, teamB, "later")
	got.Spec.HealthCheck.IntervalSeconds = 11 // a spec change: checked now
	g.Expect(k8s.Update(ctx, got)).To(Succeed())
	got = eventuallyObservedReason(g, teamB, "later", storagebucket.ReasonHealthy)
	owner, err = direct(g).Owner(ctx, kept)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(owner).To(Equal(s3.Owner{UID: string(got.UID), Namespace: teamB, NamespaceUID: teamBUID}))
	g.Expect(strings.Join(eventReasons(g, teamB), " ")).To(ContainSubstring("BucketAdopted"))

	deleteBucket(g, teamB, "later")
}

// TestBlockingPublicAccessHoldsWhateverCameBefore, in the order that used to
// slip through: a store allows public access, a namespace's buckets are made
// public (one keeps its public spec.policy, one has it removed, which leaves
// the statement in the store), then the platform team blocks public access.
// Both buckets stop being public at once (no check interval waited out): the
// public statements are taken out of their policies in the store, with a
// Warning, and a BucketAccess's grant in the same policy stays and reads.
func TestBlockingPublicAccessHoldsWhateverCameBefore(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	publicLabel := map[string]string{"storage-test/public-before": "yes"}
	store := newStore("public-before-s3", credsSecret)
	store.Spec.PublicAccess = storagev1.PublicAccessAllowed
	store.Spec.PublicAccessNamespaceSelector = &metav1.LabelSelector{MatchLabels: publicLabel}
	g.Expect(k8s.Create(ctx, store)).To(Succeed())
	ns := newNamespace(t, publicLabel)

	for _, name := range []string{"kept", "dropped"} {
		b := newBucket(ns, name, store.Name)
		b.Spec.Policy = readPolicy(ns+"-"+name, `"*"`)
		// Checks far apart: what happens below is not a periodic check.
		b.Spec.HealthCheck = &storagev1.HealthCheck{IntervalSeconds: 3600}
		g.Expect(k8s.Create(ctx, b)).To(Succeed())
		eventuallyReason(g, ns, name, storagebucket.ReasonHealthy)
		putObject(g, ns+"-"+name, "pub/index.html")
		g.Expect(anonymousGet(g, ns+"-"+name)).To(Equal(http.StatusOK), "public while the store allows it")
	}
	g.Expect(k8s.Create(ctx, newAccess(ns, "app", "dropped", "dropped-creds", storagev1.AccessReadOnly))).To(Succeed())
	eventuallyAccessReason(g, ns, "app", bucketaccess.ReasonGranted)
	// Unset, spec.policy leaves the statements in the store as they are.
	g.Expect(k8s.Patch(ctx, getBucket(g, ns, "dropped"), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"policy":null}}`)))).To(Succeed())
	eventuallyObservedReason(g, ns, "dropped", storagebucket.ReasonHealthy)
	g.Expect(anonymousGet(g, ns+"-dropped")).To(Equal(http.StatusOK))

	g.Expect(k8s.Patch(ctx, &storagev1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: store.Name}},
		client.RawPatch(types.MergePatchType, []byte(`{"spec":{"publicAccess":"Blocked"}}`)))).To(Succeed())

	got := eventuallyReason(g, ns, "kept", storagebucket.ReasonPolicyRefused)
	g.Expect(conditions.IsTrue(got.Status.Conditions, conditions.Stalled)).To(BeTrue())
	g.Eventually(func(g Gomega) {
		for _, name := range []string{"kept", "dropped"} {
			g.Expect(anonymousGet(g, ns+"-"+name)).To(Equal(http.StatusForbidden), "%s is no longer public", name)
		}
	}, timeout, poll).Should(Succeed())
	for _, name := range []string{"kept", "dropped"} {
		p, err := direct(g).Policy(ctx, ns+"-"+name)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p).NotTo(ContainSubstring(`"Sid":"Read"`), "the public statement of %s is out of the store's policy", name)
	}
	_, err := credsOf(g, ns, "dropped-creds").get(g, ns+"-dropped", "pub/index.html")
	g.Expect(err).NotTo(HaveOccurred(), "the BucketAccess's grant stays")
	g.Eventually(func(g Gomega) {
		g.Expect(eventReasons(g, ns)).To(ContainElement(storagebucket.ReasonPublicAccessRemoved))
	}, timeout, poll).Should(Succeed())
	eventuallyReason(g, ns, "dropped", storagebucket.ReasonHealthy)

	deleteAccess(g, ns, "app")
	for _, name := range []string{"kept", "dropped"} {
		deleteBucket(g, ns, name)
	}
	g.Expect(k8s.Delete(ctx, store)).To(Succeed())
}
