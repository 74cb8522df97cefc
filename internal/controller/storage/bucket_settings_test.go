package storage

import (
	"context"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	bucketaccess "github.com/trellis-dev/trellis/internal/controller/storage/access"
	storagebucket "github.com/trellis-dev/trellis/internal/controller/storage/bucket"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/s3"
)

func settingsCondition(g Gomega, ns, name string) *metav1.Condition {
	c := meta.FindStatusCondition(getBucket(g, ns, name).Status.Conditions, conditions.SettingsApplied)
	g.Expect(c).NotTo(BeNil())
	return c
}

// TestBucketSettingsAgainstVersitygw: versioning, a policy and CORS rules
// reach the store, live next to a BucketAccess's grant, are put back after
// drift, and cost no store write while unchanged; lifecycle rules, which
// versitygw v1.8.0 does not implement, are reported as such, not faked; a
// policy that is not JSON is refused.
func TestBucketSettingsAgainstVersitygw(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	// A store of its own, so its request counts are this test's alone; it
	// lets every namespace grant to anyone (the policy below is public).
	const store = "settings-s3"
	settingsStore := newStore(store, credsSecret)
	settingsStore.Spec.PublicAccess = storagev1.PublicAccessAllowed
	settingsStore.Spec.PublicAccessNamespaceSelector = everyNamespace
	g.Expect(k8s.Create(ctx, settingsStore)).To(Succeed())
	ns := newNamespace(t)
	bucket := ns + "-set"
	policy := `{"Version":"2012-10-17","Statement":[{"Sid":"PublicRead","Effect":"Allow","Principal":"*","Action":["s3:GetObject"],"Resource":["arn:aws:s3:::` + bucket + `/pub/*"]}]}`
	b := newBucket(ns, "set", store)
	b.Spec.Versioning = storagev1.VersioningEnabled
	b.Spec.Policy = policy
	b.Spec.CORS = &storagev1.BucketCORS{Rules: []storagev1.CORSRule{{
		AllowedOrigins: []string{"https://app.example.com"}, AllowedMethods: []storagev1.CORSMethod{"GET", "PUT"},
		AllowedHeaders: []string{"*"}, ExposeHeaders: []string{"ETag"}, MaxAgeSeconds: 600,
	}}}
	g.Expect(k8s.Create(ctx, b)).To(Succeed())
	eventuallyReason(g, ns, "set", storagebucket.ReasonHealthy)
	applied := settingsCondition(g, ns, "set")
	g.Expect(applied.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(applied.Message).To(Equal("versioning, policy, cors in place"))

	c := direct(g)
	v, err := c.Versioning(ctx, bucket)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v).To(Equal(s3.VersioningEnabled))
	p, err := c.Policy(ctx, bucket)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s3.SamePolicy(p, policy)).To(BeTrue(), p)
	rules, err := c.CORS(ctx, bucket)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(rules).To(HaveLen(1))
	g.Expect(rules[0].AllowedOrigins).To(Equal([]string{"https://app.example.com"}))

	// The policy works: anonymous reads under pub/, nothing else.
	putObject(g, bucket, "pub/hello.txt")
	putObject(g, bucket, "private.txt")
	for key, want := range map[string]int{"pub/hello.txt": http.StatusOK, "private.txt": http.StatusForbidden} {
		resp, err := http.Get(s3srv.Direct + "/" + bucket + "/" + key)
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(want), key)
	}

	// A BucketAccess's grant joins the user's statement, and both stay.
	g.Expect(k8s.Create(ctx, newAccess(ns, "app", "set", "set-creds", storagev1.AccessReadOnly))).To(Succeed())
	a := eventuallyAccessReason(g, ns, "app", bucketaccess.ReasonGranted)
	p, err = c.Policy(ctx, bucket)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p).To(ContainSubstring(`"Sid":"PublicRead"`))
	g.Expect(p).To(ContainSubstring(s3.GrantSidPrefix + stores.GrantID(a.UID)))
	_, err = credsOf(g, ns, "set-creds").get(g, bucket, "private.txt")
	g.Expect(err).NotTo(HaveOccurred())

	// Unchanged: checks read the settings and write nothing.
	writes := func() map[string]float64 {
		out := map[string]float64{}
		for _, op := range []string{"PutBucketVersioning", "PutBucketPolicy", "PutBucketCors", "PutBucketLifecycle", "IssueKey", "PutBucketTagging"} {
			out[op] = testutil.ToFloat64(stores.Requests.WithLabelValues(store, op))
		}
		return out
	}
	reads := func() float64 { return testutil.ToFloat64(stores.Requests.WithLabelValues(store, "GetBucketCors")) }
	w0, r0 := writes(), reads()
	// Two checks (10s interval, ±10%, on a one-second ticker).
	g.Eventually(reads, 3*timeout, poll).Should(BeNumerically(">=", r0+2), "the settings were looked at")
	g.Expect(writes()).To(Equal(w0), "and nothing was written")

	// Drift is put back at the next check; the bucket's accesses look at
	// their grants at once when the policy had to be rewritten.
	g.Expect(c.SetCORS(ctx, bucket, nil)).To(Succeed())
	g.Expect(c.SetPolicy(ctx, bucket, "")).To(Succeed())
	g.Eventually(func(g Gomega) {
		rules, err := c.CORS(ctx, bucket)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rules).To(HaveLen(1))
		p, err := c.Policy(ctx, bucket)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(p).To(ContainSubstring("PublicRead"))
		g.Expect(p).To(ContainSubstring(s3.GrantSidPrefix + stores.GrantID(a.UID)))
	}, timeout, poll).Should(Succeed())
	_, err = credsOf(g, ns, "set-creds").get(g, bucket, "private.txt")
	g.Expect(err).NotTo(HaveOccurred(), "the access works again")

	// Lifecycle rules: versitygw does not implement them. Said so; the rest stays applied.
	g.Expect(k8s.Patch(ctx, getBucket(g, ns, "set"), client.RawPatch(types.MergePatchType,
		[]byte(`{"spec":{"lifecycle":{"rules":[{"id":"tmp","prefix":"tmp/","expirationDays":7}]}}}`)))).To(Succeed())
	got := eventuallyReason(g, ns, "set", storagebucket.ReasonSettingNotSupported)
	g.Expect(conditions.IsTrue(got.Status.Conditions, conditions.Stalled)).To(BeTrue())
	applied = settingsCondition(g, ns, "set")
	g.Expect(applied.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(applied.Message).To(ContainSubstring("lifecycle: the store does not implement it"))
	g.Expect(got.Status.Claim).To(Equal(storagev1.BucketClaimed), "the bucket itself is fine")
	g.Expect(k8s.Patch(ctx, got, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"lifecycle":null}}`)))).To(Succeed())
	eventuallyReason(g, ns, "set", storagebucket.ReasonHealthy)

	// A policy that is not JSON: refused with the reason, nothing sent.
	g.Expect(k8s.Patch(ctx, getBucket(g, ns, "set"), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"policy":"allow everyone please"}}`)))).To(Succeed())
	got = eventuallyReason(g, ns, "set", stores.ReasonInvalidPolicy)
	g.Expect(conditions.IsTrue(got.Status.Conditions, conditions.Stalled)).To(BeTrue())
	g.Expect(readyMessage(got)).To(ContainSubstring("not a JSON object"))
	p, err = c.Policy(ctx, bucket)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p).To(ContainSubstring("PublicRead"), "the policy in the store is left as it was")

	deleteAccess(g, ns, "app")
	deleteBucket(g, ns, "set")
	g.Expect(k8s.Delete(ctx, &storagev1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: store}})).To(Succeed())
}
