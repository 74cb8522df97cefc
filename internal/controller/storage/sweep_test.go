package storage

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	bucketaccess "github.com/trellis-dev/trellis/internal/controller/storage/access"
	storagebucket "github.com/trellis-dev/trellis/internal/controller/storage/bucket"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/controller/storage/sweep"
	"github.com/trellis-dev/trellis/internal/s3"
)

// sweepInterval is the suite manager's --storage-sweep-interval.
const sweepInterval = 3 * time.Second

// withinASweep is how long a sweep may take to come: one interval, its
// jitter, and the sweep of every store of the suite before this one.
const withinASweep = sweepInterval*11/10 + 5*time.Second

// holdSweeps keeps the manager's sweep from running until the returned
// function is called: what a test then sees is another writer's doing.
func holdSweeps(t *testing.T) (release func()) {
	t.Helper()
	s := mgrShared.sweeper
	if s == nil {
		t.Fatal("the suite's manager runs no sweep")
	}
	release = s.Hold()
	t.Cleanup(release)
	return release
}

// eventsAbout returns the messages of the Events of a reason about an
// object of a name, in any namespace (a cluster-scoped object's are in default).
func eventsAbout(g Gomega, name, reason string) []string {
	list := &corev1.EventList{}
	g.Expect(k8s.List(context.Background(), list)).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name && e.Reason == reason {
			out = append(out, e.Message)
		}
	}
	return out
}

// touchStore gives the ObjectStore a new resourceVersion, and waits until
// the manager's cache has it.
func touchStore(g Gomega, name string) {
	ctx := context.Background()
	st := &storagev1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: name}}
	touched := strconv.FormatInt(time.Now().UnixNano(), 10)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{"test.trellis.dev/touched":%q}}}`, touched)
	g.Expect(k8s.Patch(ctx, st, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		cached := &storagev1.ObjectStore{}
		g.Expect(mgrCache.Get(ctx, client.ObjectKey{Name: name}, cached)).To(Succeed())
		g.Expect(cached.Annotations).To(HaveKeyWithValue("test.trellis.dev/touched", touched))
	}, timeout, poll).Should(Succeed())
}

// policyOf reads a bucket's policy as the suite versitygw's admin.
func policyOf(g Gomega, bucket string) string {
	p, err := direct(g).Policy(context.Background(), bucket)
	g.Expect(err).NotTo(HaveOccurred())
	return p
}

// versitygwOn is the suite's versitygw as a storeOn, for the helpers that
// take one.
func versitygwOn() storeOn {
	return storeOn{endpoint: s3srv.Endpoint, direct: s3srv.Direct, root: testS3Config()}
}

// statementsOf returns a policy's statements by Sid.
func statementsOf(g Gomega, policy string) map[string]json.RawMessage {
	out := map[string]json.RawMessage{}
	if policy == "" {
		return out
	}
	var d struct{ Statement []json.RawMessage }
	g.Expect(json.Unmarshal([]byte(policy), &d)).To(Succeed())
	for _, st := range d.Statement {
		var s struct{ Sid string }
		g.Expect(json.Unmarshal(st, &s)).To(Succeed())
		out[s.Sid] = st
	}
	return out
}

// tamper rewrites a bucket's policy as the store's root: what a key
// granted s3:PutBucketPolicy can do. edit gets the statements and returns
// the ones to write.
func tamper(g Gomega, on storeOn, bucket string, edit func([]map[string]any) []map[string]any) {
	d := map[string]any{"Version": "2012-10-17"}
	if p := on.policy(g, bucket); p != "" {
		g.Expect(json.Unmarshal([]byte(p), &d)).To(Succeed())
	}
	var statements []map[string]any
	raw, err := json.Marshal(d["Statement"])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(json.Unmarshal(raw, &statements)).To(Succeed())
	d["Statement"] = edit(statements)
	doc, err := json.Marshal(d)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(on.client(g).SetPolicy(context.Background(), bucket, string(doc))).To(Succeed())
}

// asList reads a policy element that is a string or a list of them.
func asList(v any) []any {
	if l, ok := v.([]any); ok {
		return l
	}
	return []any{v}
}

// forgedGrant is a statement with Trellis' Sid prefix granting key read and
// write on bucket.
func forgedGrant(sid, bucket, key string) string {
	return `{"Sid":"` + sid + `","Effect":"Allow","Principal":{"AWS":["` + key + `"]},"Action":["s3:GetObject","s3:PutObject","s3:ListBucket"],` +
		`"Resource":["arn:aws:s3:::` + bucket + `","arn:aws:s3:::` + bucket + `/*"]}`
}

// TestSweepRevokesKeysOfAccessesDeletedWithoutFinalizer: a namespace
// editor takes the finalizer off a BucketAccess and deletes it, so its own
// reconcile revokes nothing; the sweep refuses its key within an interval,
// takes its grant out of the bucket's policy and says so, and leaves the
// bucket's other access alone. On each backend.
func TestSweepRevokesKeysOfAccessesDeletedWithoutFinalizer(t *testing.T) {
	for _, b := range accessBackends {
		t.Run(b.name, func(t *testing.T) { sweepRevokesKeysOfAccessesDeletedWithoutFinalizer(t, b) })
	}
}

func sweepRevokesKeysOfAccessesDeletedWithoutFinalizer(t *testing.T, b backend) {
	g := NewWithT(t)
	ctx := context.Background()
	on := b.store(t, g)
	store := on.name
	ns := newNamespace(t)
	editor := editorOf(t, "dev-"+ns, ns)
	g.Expect(editor.Create(ctx, newBucket(ns, "data", store))).To(Succeed())
	eventuallyReason(g, ns, "data", storagebucket.ReasonHealthy)
	bucket := ns + "-data"
	g.Expect(editor.Create(ctx, newAccess(ns, "w", "data", "w-creds", storagev1.AccessReadWrite))).To(Succeed())
	g.Expect(editor.Create(ctx, newAccess(ns, "keep", "data", "keep-creds", storagev1.AccessReadOnly))).To(Succeed())
	w := eventuallyAccessReason(g, ns, "w", bucketaccess.ReasonGranted)
	keep := eventuallyAccessReason(g, ns, "keep", bucketaccess.ReasonGranted)
	key, kept := on.creds(g, ns, "w-creds"), on.creds(g, ns, "keep-creds")
	on.applied(g, func(g Gomega) { g.Expect(key.put(g, bucket, "before.txt")).To(Succeed()) })
	sid := s3.GrantSidPrefix + stores.GrantID(w.UID)
	// Where a bucket policy grants keys nothing (MinIO), no statement
	// stands for a grant, and none is there to take out.
	inPolicy := b.noPolicyGrants == ""
	if inPolicy {
		g.Expect(statementsOf(g, on.policy(g, bucket))).To(HaveKey(sid))
	} else {
		g.Expect(on.policy(g, bucket)).NotTo(ContainSubstring(s3.GrantSidPrefix))
	}
	revokedBefore := testutil.ToFloat64(sweep.RevokedTotal.WithLabelValues(store, "account"))
	// The events recorder folds an Event into an earlier one about the same
	// object, resourceVersion included, of the same reason: the second is
	// written as a series of two under the first one's note, later ones
	// only counted in memory for minutes. The store's other subtests revoke
	// keys too; a new resourceVersion makes this sweep's Event a new one.
	touchStore(g, store)

	// As the issue tells it: the finalizer off, then deleted.
	g.Expect(editor.Patch(ctx, w, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))).To(Succeed())
	g.Expect(editor.Delete(ctx, w)).To(Succeed())
	deleted := time.Now()
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(w), &storagev1.BucketAccess{}))
	}, timeout, poll).Should(BeTrue())
	// Its finalizer did not run: it would have deleted the Secret (and
	// envtest runs no garbage collector).
	g.Expect(secretOf(g, ns, "w-creds").Data).To(HaveKey("AWS_SECRET_ACCESS_KEY"))

	g.Eventually(func() int { return httpStatus(key.put(g, bucket, "after.txt")) }, withinASweep, poll).
		Should(Equal(http.StatusForbidden), "the key of a deleted access is refused within a sweep")
	t.Logf("key refused %.1fs after its BucketAccess went (sweep every %s)", time.Since(deleted).Seconds(), sweepInterval)
	// The key goes before its user (IAM deletes them one call apart), so
	// the account and the count follow the refusal by a moment: less than
	// a sweep, since the same sweep deletes both.
	g.Eventually(func(g Gomega) {
		g.Expect(on.accounts(g, stores.AccountPrefix(uidOf(g, store), w.UID))).To(BeEmpty())
		g.Expect(testutil.ToFloat64(sweep.RevokedTotal.WithLabelValues(store, "account"))).To(BeNumerically(">", revokedBefore))
	}, sweepInterval-time.Second, poll).Should(Succeed())
	// The Event names the account.
	g.Eventually(func(g Gomega) {
		msgs := eventsAbout(g, store, "OrphanKeysRevoked")
		g.Expect(slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, accountOf(w)) })).To(BeTrue(),
			"an Event names the account %s: %v", accountOf(w), msgs)
	}, timeout, poll).Should(Succeed())

	// Its grant goes from the policy too (the same sweep), and the bucket says so.
	if inPolicy {
		g.Eventually(func(g Gomega) {
			g.Expect(statementsOf(g, on.policy(g, bucket))).NotTo(HaveKey(sid))
			msgs := eventsAbout(g, "data", "GrantRemoved")
			g.Expect(slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, sid) })).To(BeTrue(), "%v", msgs)
		}, withinASweep, poll).Should(Succeed())
	}

	// The bucket's other access: its key works, its account and grant stay.
	got, err := kept.get(g, bucket, "before.txt")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal("hello"))
	g.Expect(on.accounts(g, stores.AccountPrefix(uidOf(g, store), keep.UID))).To(Equal([]string{accountOf(keep)}))
	if inPolicy {
		g.Expect(statementsOf(g, on.policy(g, bucket))).To(HaveKey(s3.GrantSidPrefix + stores.GrantID(keep.UID)))
	}
	// No Event names a secret.
	for _, m := range append(eventsAbout(g, store, "OrphanKeysRevoked"), eventsAbout(g, "data", "GrantRemoved")...) {
		g.Expect(m).NotTo(ContainSubstring(key.secretKey))
	}

	deleteAccess(g, ns, "keep")
	g.Expect(k8s.Delete(ctx, &corev1.Secret{ObjectMeta: secretOf(g, ns, "w-creds").ObjectMeta})).To(Succeed())
	deleteBucket(g, ns, "data")
}

// TestForgedGrantsAreTakenOut: whoever may write a bucket's policy
// directly (here the store's root, as a key granted s3:PutBucketPolicy
// would) writes statements with Trellis' Sid prefix: one for a key of
// their own, and the grant of a live access widened to that key. Each
// writer of the policy (the sweep, the bucket's spec.policy, an access's
// grant) takes them out or puts them back, and a Warning on the
// StorageBucket names the Sid; a forged statement does not survive a
// Retain and a later adoption either. On each backend: on an IAM store the
// forgeries name the attacker's key by its user's ARN, as a policy there must.
func TestForgedGrantsAreTakenOut(t *testing.T) {
	for _, b := range accessBackends {
		t.Run(b.name, func(t *testing.T) { forgedGrantsAreTakenOut(t, b) })
	}
}

func forgedGrantsAreTakenOut(t *testing.T, be backend) {
	if be.noPolicyGrants != "" {
		t.Skip("does not apply: " + be.noPolicyGrants)
	}
	g := NewWithT(t)
	ctx := context.Background()
	on := be.store(t, g)
	store := on.name
	ns := newNamespace(t)
	// The attacker's own key: a BucketAccess of another bucket.
	g.Expect(k8s.Create(ctx, newBucket(ns, "mine", store))).To(Succeed())
	eventuallyReason(g, ns, "mine", storagebucket.ReasonHealthy)
	g.Expect(k8s.Create(ctx, newAccess(ns, "attacker", "mine", "attacker-creds", storagev1.AccessReadWrite))).To(Succeed())
	attackerKey, _ := stores.CurrentKey(&eventuallyAccessReason(g, ns, "attacker", bucketaccess.ReasonGranted).Status)
	attacker := on.creds(g, ns, "attacker-creds")
	// How a policy names the attacker's key on this store.
	attackerPrincipal := attackerKey.PrincipalName()

	// setUp makes a bucket with a read-only access, plants the forgeries
	// and checks that they work: the test could fail.
	setUp := func(g Gomega, name string) (bucket, forgedSid, widenedSid string, reader creds) {
		bucket = ns + "-" + name
		on.putAsRoot(g, bucket, "secret.txt")
		g.Expect(k8s.Create(ctx, newAccess(ns, name+"-reader", name, name+"-reader-creds", storagev1.AccessReadOnly))).To(Succeed())
		a := eventuallyAccessReason(g, ns, name+"-reader", bucketaccess.ReasonGranted)
		reader = on.creds(g, ns, name+"-reader-creds")
		forgedSid, widenedSid = s3.GrantSidPrefix+"forged0123456789", s3.GrantSidPrefix+stores.GrantID(a.UID)
		g.Expect(statementsOf(g, on.policy(g, bucket))).To(HaveKey(widenedSid))
		// One write, so no writer of the policy comes in between: the live
		// grant widened to the attacker's key and to writing, and a grant
		// of the attacker's own.
		tamper(g, on, bucket, func(list []map[string]any) []map[string]any {
			for _, st := range list {
				if st["Sid"] == widenedSid {
					principal := st["Principal"].(map[string]any)
					principal["AWS"] = append(asList(principal["AWS"]), attackerPrincipal)
					st["Action"] = append(asList(st["Action"]), "s3:PutObject")
				}
			}
			var forged map[string]any
			g.Expect(json.Unmarshal([]byte(forgedGrant(forgedSid, bucket, attackerPrincipal)), &forged)).To(Succeed())
			return append(list, forged)
		})
		g.Expect(string(statementsOf(g, on.policy(g, bucket))[widenedSid])).To(ContainSubstring(attackerPrincipal))
		on.applied(g, func(g Gomega) {
			_, err := attacker.get(g, bucket, "secret.txt")
			g.Expect(err).NotTo(HaveOccurred(), "the forgery works in the store")
		})
		return bucket, forgedSid, widenedSid, reader
	}
	// takenOut waits until the forgeries are gone: the attacker refused,
	// the reader's grant as recorded, Warnings on the StorageBucket.
	takenOut := func(g Gomega, name, bucket, forgedSid, widenedSid string, reader creds) {
		g.Eventually(func(g Gomega) {
			_, err := attacker.get(g, bucket, "secret.txt")
			g.Expect(httpStatus(err)).To(Equal(http.StatusForbidden))
			statements := statementsOf(g, on.policy(g, bucket))
			g.Expect(statements).NotTo(HaveKey(forgedSid))
			g.Expect(string(statements[widenedSid])).NotTo(ContainSubstring(attackerPrincipal))
			g.Expect(string(statements[widenedSid])).NotTo(ContainSubstring("s3:PutObject"))
			g.Expect(eventsAbout(g, name, "GrantRemoved")).To(ContainElement(ContainSubstring(forgedSid)))
			g.Expect(eventsAbout(g, name, "GrantRewritten")).To(ContainElement(ContainSubstring(widenedSid)))
		}, timeout, poll).Should(Succeed())
		got, err := reader.get(g, bucket, "secret.txt")
		g.Expect(err).NotTo(HaveOccurred(), "the reader keeps its grant")
		g.Expect(got).To(Equal("data"))
		g.Expect(httpStatus(reader.put(g, bucket, "no.txt"))).To(Equal(http.StatusForbidden), "and it is read-only again")
		for _, m := range append(eventsAbout(g, name, "GrantRemoved"), eventsAbout(g, name, "GrantRewritten")...) {
			g.Expect(m).NotTo(ContainSubstring(attacker.secretKey))
			g.Expect(m).NotTo(ContainSubstring(reader.secretKey))
		}
	}

	t.Run("by the sweep", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(k8s.Create(ctx, newBucket(ns, "swept", store))).To(Succeed())
		eventuallyReason(g, ns, "swept", storagebucket.ReasonHealthy)
		release := holdSweeps(t)
		bucket, forged, widened, reader := setUp(g, "swept")
		release()
		takenOut(g, "swept", bucket, forged, widened, reader)
	})

	t.Run("by the bucket's own policy", func(t *testing.T) {
		g := NewWithT(t)
		b := newBucket(ns, "declared", store)
		b.Spec.Policy = `{"Version":"2012-10-17","Statement":[{"Sid":"PublicRead","Effect":"Deny","Principal":"*","Action":["s3:GetObject"],"Resource":["arn:aws:s3:::` + ns + `-declared/pub/*"]}]}`
		g.Expect(k8s.Create(ctx, b)).To(Succeed())
		eventuallyReason(g, ns, "declared", storagebucket.ReasonHealthy)
		holdSweeps(t)
		bucket, forged, widened, reader := setUp(g, "declared")
		// Its next check (every 10s) puts the policy back.
		takenOut(g, "declared", bucket, forged, widened, reader)
		g.Expect(on.policy(g, bucket)).To(ContainSubstring("PublicRead"))
	})

	t.Run("by an access's grant", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(k8s.Create(ctx, newBucket(ns, "granted", store))).To(Succeed())
		eventuallyReason(g, ns, "granted", storagebucket.ReasonHealthy)
		holdSweeps(t)
		bucket, forged, widened, reader := setUp(g, "granted")
		// Another access of the bucket is made: its grant rewrites the policy.
		g.Expect(k8s.Create(ctx, newAccess(ns, "second", "granted", "second-creds", storagev1.AccessReadOnly))).To(Succeed())
		eventuallyAccessReason(g, ns, "second", bucketaccess.ReasonGranted)
		takenOut(g, "granted", bucket, forged, widened, reader)
		deleteAccess(g, ns, "second")
	})

	t.Run("not kept through a Retain and an adoption", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(k8s.Create(ctx, newBucket(ns, "kept", store))).To(Succeed())
		eventuallyReason(g, ns, "kept", storagebucket.ReasonHealthy)
		bucket := ns + "-kept"
		on.putAsRoot(g, bucket, "secret.txt")
		release := holdSweeps(t)
		forged := s3.GrantSidPrefix + "forged0123456789"
		tamper(g, on, bucket, func(list []map[string]any) []map[string]any {
			var v map[string]any
			g.Expect(json.Unmarshal([]byte(forgedGrant(forged, bucket, attackerPrincipal)), &v)).To(Succeed())
			return append(list, v)
		})
		deleteBucket(g, ns, "kept") // Retain: the bucket and its policy stay
		on.applied(g, func(g Gomega) {
			_, err := attacker.get(g, bucket, "secret.txt")
			g.Expect(err).NotTo(HaveOccurred(), "kept with the bucket")
		})
		again := newBucket(ns, "kept", store)
		again.Spec.AdoptExisting = ptr.To(true)
		g.Expect(k8s.Create(ctx, again)).To(Succeed())
		eventuallyReason(g, ns, "kept", storagebucket.ReasonHealthy)
		release()
		g.Eventually(func(g Gomega) {
			_, err := attacker.get(g, bucket, "secret.txt")
			g.Expect(httpStatus(err)).To(Equal(http.StatusForbidden))
			g.Expect(statementsOf(g, on.policy(g, bucket))).NotTo(HaveKey(forged))
		}, withinASweep, poll).Should(Succeed())
		deleteBucket(g, ns, "kept")
	})

	for _, name := range []string{"swept-reader", "declared-reader", "granted-reader", "attacker"} {
		deleteAccess(g, ns, name)
	}
	for _, name := range []string{"swept", "declared", "granted", "mine"} {
		deleteBucket(g, ns, name)
	}
}

// TestSweepLeavesOtherStoresAlone: accounts of another ObjectStore's mark
// (another cluster's Trellis on the same store) and accounts Trellis did not
// make are never touched, however many sweeps pass, while each of two
// ObjectStores on this store keeps its own accesses working.
func TestSweepLeavesOtherStoresAlone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	store := ensureStore(g)
	twin := newStore("twin-s3", credsSecret)
	g.Expect(k8s.Create(ctx, twin)).To(Succeed())
	ns := newNamespace(t)
	g.Expect(k8s.Create(ctx, newBucket(ns, "here", store))).To(Succeed())
	g.Expect(k8s.Create(ctx, newBucket(ns, "there", "twin-s3"))).To(Succeed())
	eventuallyReason(g, ns, "here", storagebucket.ReasonHealthy)
	eventuallyReason(g, ns, "there", storagebucket.ReasonHealthy)
	g.Expect(k8s.Create(ctx, newAccess(ns, "here", "here", "here-creds", storagev1.AccessReadWrite))).To(Succeed())
	g.Expect(k8s.Create(ctx, newAccess(ns, "there", "there", "there-creds", storagev1.AccessReadWrite))).To(Succeed())
	eventuallyAccessReason(g, ns, "here", bucketaccess.ReasonGranted)
	eventuallyAccessReason(g, ns, "there", bucketaccess.ReasonGranted)

	admin, err := s3.NewVersitygwAccounts(testS3Config(), "")
	g.Expect(err).NotTo(HaveOccurred())
	// Another cluster's ObjectStore issued this one, for an access this
	// cluster never had; and someone made an account by hand.
	theirs := stores.AccountName("uid-of-another-clusters-store", "uid-of-their-access", 1)
	byHand := "SOMEONEELSE0123456789"
	for _, id := range []string{theirs, byHand} {
		_, err := admin.IssueKey(ctx, id)
		g.Expect(err).NotTo(HaveOccurred())
	}
	runs := func(store string) float64 {
		return testutil.ToFloat64(sweep.Sweeps.WithLabelValues(store, sweep.Clean)) + testutil.ToFloat64(sweep.Sweeps.WithLabelValues(store, sweep.Revoked))
	}
	before, beforeTwin := runs(store), runs("twin-s3")
	g.Eventually(func() bool { return runs(store) >= before+2 && runs("twin-s3") >= beforeTwin+2 }, 4*withinASweep, poll).
		Should(BeTrue(), "two sweeps of each store")
	g.Expect(storeAccounts(g, theirs)).To(Equal([]string{theirs}), "another store object's account is never swept")
	g.Expect(storeAccounts(g, byHand)).To(Equal([]string{byHand}), "nor one Trellis did not make")
	for _, c := range []struct{ secret, bucket string }{{"here-creds", ns + "-here"}, {"there-creds", ns + "-there"}} {
		g.Expect(credsOf(g, ns, c.secret).put(g, c.bucket, "ok.txt")).To(Succeed(), "both stores' accesses work")
	}

	for _, id := range []string{theirs, byHand} {
		g.Expect(admin.DeleteAccount(ctx, id)).To(Succeed())
	}
	deleteAccess(g, ns, "here")
	deleteAccess(g, ns, "there")
	deleteBucket(g, ns, "here")
	deleteBucket(g, ns, "there")
	g.Expect(k8s.Delete(ctx, twin)).To(Succeed())
}

// TestSweepThroughStoreFailures: while the store answers its account list
// with errors, sweeps revoke nothing, and a live access keeps working; once
// it answers, the key of a deleted access is revoked.
func TestSweepThroughStoreFailures(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	store := ensureStore(g)
	ns := newNamespace(t)
	g.Expect(k8s.Create(ctx, newBucket(ns, "flaky", store))).To(Succeed())
	eventuallyReason(g, ns, "flaky", storagebucket.ReasonHealthy)
	bucket := ns + "-flaky"
	g.Expect(k8s.Create(ctx, newAccess(ns, "live", "flaky", "live-creds", storagev1.AccessReadWrite))).To(Succeed())
	g.Expect(k8s.Create(ctx, newAccess(ns, "gone", "flaky", "gone-creds", storagev1.AccessReadWrite))).To(Succeed())
	eventuallyAccessReason(g, ns, "live", bucketaccess.ReasonGranted)
	gone := eventuallyAccessReason(g, ns, "gone", bucketaccess.ReasonGranted)
	live, orphan := credsOf(g, ns, "live-creds"), credsOf(g, ns, "gone-creds")

	var failing atomic.Bool
	failing.Store(true)
	s3srv.Fail(func(r *http.Request) bool {
		return failing.Load() && r.Method == http.MethodPatch && r.URL.Path == "/list-users"
	}, http.StatusServiceUnavailable, 1<<30)
	defer failing.Store(false)
	failed := testutil.ToFloat64(sweep.Sweeps.WithLabelValues(store, string(s3.ReasonStoreUnreachable)))
	g.Expect(k8s.Patch(ctx, gone, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))).To(Succeed())
	g.Expect(k8s.Delete(ctx, gone)).To(Succeed())
	g.Eventually(func() float64 {
		return testutil.ToFloat64(sweep.Sweeps.WithLabelValues(store, string(s3.ReasonStoreUnreachable)))
	}, 3*withinASweep, poll).Should(BeNumerically(">=", failed+2), "two sweeps met the failing store")
	g.Expect(orphan.put(g, bucket, "still.txt")).To(Succeed(), "nothing revoked while the store fails")
	g.Expect(live.put(g, bucket, "live.txt")).To(Succeed(), "nor anything live")

	failing.Store(false)
	g.Eventually(func() int { return httpStatus(orphan.put(g, bucket, "late.txt")) }, withinASweep, poll).
		Should(Equal(http.StatusForbidden), "revoked once the store answers")
	g.Expect(live.put(g, bucket, "live.txt")).To(Succeed())
	g.Expect(storeAccounts(g, stores.AccountPrefix(uidOf(g, store), gone.UID))).To(BeEmpty())

	deleteAccess(g, ns, "live")
	g.Expect(k8s.Delete(ctx, &corev1.Secret{ObjectMeta: secretOf(g, ns, "gone-creds").ObjectMeta})).To(Succeed())
	deleteBucket(g, ns, "flaky")
}
