package storage

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
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
	"github.com/trellis-dev/trellis/internal/testenv"
)

const (
	timeout = 30 * time.Second
	poll    = 100 * time.Millisecond
)

var nsCounter atomic.Int32

func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

func waitListening(addr string) error {
	for range 100 {
		if c, err := net.Dial("tcp", addr); err == nil {
			return c.Close()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("nothing listens on %s", addr)
}

// adopterLabel marks the namespaces the suite's store lets adopt buckets.
var adopterLabel = map[string]string{"storage-test/adopt": "yes"}

// newNamespace makes a namespace without '-' in its name, so its buckets'
// derived names are the readable "<namespace>-<name>".
func newNamespace(t *testing.T, labels ...map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("sb%d", nsCounter.Add(1))}}
	for _, l := range labels {
		ns.Labels = l
	}
	if err := k8s.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// direct is a client straight to versitygw, for the test's own checks.
func direct(g Gomega) s3.Client {
	c, err := s3.New(testS3Config())
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

// everyNamespace selects every namespace (all have this label).
var everyNamespace = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
	{Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpExists},
}}

// newStore is the suite's versitygw, open to every namespace.
func newStore(name, secret string) *storagev1.ObjectStore {
	return &storagev1.ObjectStore{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.ObjectStoreSpec{
			Type:     storagev1.StoreTypeVersitygw,
			Endpoint: s3srv.Endpoint, Region: "us-east-1", PathStyle: ptr.To(true),
			CredentialsSecretRef:      storagev1.SecretReference{Namespace: managerNS, Name: secret},
			NamespaceSelector:         everyNamespace,
			AdoptionNamespaceSelector: &metav1.LabelSelector{MatchLabels: adopterLabel},
		},
	}
}

func newBucket(ns, name, store string) *storagev1.StorageBucket {
	return &storagev1.StorageBucket{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: storagev1.StorageBucketSpec{
			StoreRef:    storagev1.StoreReference{Name: store},
			HealthCheck: &storagev1.HealthCheck{IntervalSeconds: 10},
		},
	}
}

// ensureStore creates the shared, healthy store once.
func ensureStore(g Gomega) string {
	const name = "local-s3"
	err := k8s.Create(context.Background(), newStore(name, credsSecret))
	if err != nil && !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Eventually(func(g Gomega) {
		st := &storagev1.ObjectStore{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Name: name}, st)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(st.Status.Conditions, conditions.Ready)).To(BeTrue(), "%+v", st.Status)
	}, timeout, poll).Should(Succeed())
	return name
}

func getBucket(g Gomega, ns, name string) *storagev1.StorageBucket {
	b := &storagev1.StorageBucket{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, b)).To(Succeed())
	return b
}

func eventuallyReason(g Gomega, ns, name, reason string) *storagev1.StorageBucket {
	var b *storagev1.StorageBucket
	g.Eventually(func(g Gomega) {
		b = getBucket(g, ns, name)
		c := meta.FindStatusCondition(b.Status.Conditions, conditions.Ready)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(reason), "message: %s", c.Message)
	}, timeout, poll).Should(Succeed())
	return b
}

func deleteBucket(g Gomega, ns, name string) {
	b := &storagev1.StorageBucket{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	g.Expect(client.IgnoreNotFound(k8s.Delete(context.Background(), b))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(context.Background(), client.ObjectKeyFromObject(b), &storagev1.StorageBucket{}))
	}, timeout, poll).Should(BeTrue())
}

func TestObjectStoreReportsCredentials(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ensureStore(g)

	g.Expect(k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: managerNS, Name: "wrong-keys"},
		Data:       map[string][]byte{stores.AccessKeyIDKey: []byte("nobody"), stores.SecretAccessKeyKey: []byte("wrong-secret-key")},
	})).To(Succeed())
	g.Expect(k8s.Create(ctx, newStore("wrong-keys", "wrong-keys"))).To(Succeed())
	g.Expect(k8s.Create(ctx, newStore("no-secret", "does-not-exist"))).To(Succeed())
	elsewhere := newStore("elsewhere", credsSecret)
	elsewhere.Spec.CredentialsSecretRef.Namespace = "default"
	g.Expect(k8s.Create(ctx, elsewhere)).To(Succeed())

	for name, want := range map[string]string{
		"wrong-keys": string(s3.ReasonAccessDenied),
		"no-secret":  string(s3.ReasonCredentialsMissing),
		"elsewhere":  string(s3.ReasonCredentialsMissing),
	} {
		g.Eventually(func(g Gomega) {
			st := &storagev1.ObjectStore{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, st)).To(Succeed())
			c := meta.FindStatusCondition(st.Status.Conditions, conditions.Ready)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(want), "store %s: %s", name, c.Message)
			// Never the keys themselves.
			g.Expect(c.Message).NotTo(ContainSubstring(s3srv.SecretKey))
			g.Expect(c.Message).NotTo(ContainSubstring("wrong-secret-key"))
		}, timeout, poll).Should(Succeed())
	}
	for _, name := range []string{"wrong-keys", "no-secret", "elsewhere"} {
		g.Expect(k8s.Delete(ctx, &storagev1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
	}
}

func TestBucketIsCreatedTaggedAndHealthy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	store := ensureStore(g)
	ns := newNamespace(t)
	g.Expect(k8s.Create(ctx, newBucket(ns, "assets", store))).To(Succeed())

	b := eventuallyReason(g, ns, "assets", storagebucket.ReasonHealthy)
	g.Expect(b.Status.BucketName).To(Equal(ns + "-assets"))
	g.Expect(b.Status.Claim).To(Equal(storagev1.BucketClaimed))
	g.Expect(meta.IsStatusConditionTrue(b.Status.Conditions, conditions.Ready)).To(BeTrue())
	g.Expect(b.Finalizers).To(ContainElement(stores.BucketFinalizer))

	c := direct(g)
	exists, err := c.BucketExists(ctx, ns+"-assets")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exists).To(BeTrue())
	owner, err := c.Owner(ctx, ns+"-assets")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(owner).To(Equal(s3.Owner{UID: string(b.UID), Namespace: ns, NamespaceUID: namespaceUID(g, ns)}), "tagged with its StorageBucket and namespace")
	deleteBucket(g, ns, "assets")
}

func TestExistingBucketIsAConflictUnlessAdopted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	store := ensureStore(g)
	ns := newNamespace(t, adopterLabel)
	c := direct(g)
	const foreign = "someone-elses"
	g.Expect(c.CreateBucket(ctx, foreign)).To(Succeed())

	b := newBucket(ns, "grab", store)
	b.Spec.BucketName = foreign
	g.Expect(k8s.Create(ctx, b)).To(Succeed())
	got := eventuallyReason(g, ns, "grab", storagebucket.ReasonConflict)
	g.Expect(meta.FindStatusCondition(got.Status.Conditions, conditions.Ready).Message).To(ContainSubstring("adoptExisting"))
	owner, err := c.Owner(ctx, foreign)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(owner).To(BeZero(), "a conflict must not touch the bucket")

	// Deleting the conflicted StorageBucket, even with policy Delete, leaves the bucket.
	got.Spec.DeletionPolicy = storagev1.DeletionDelete
	g.Expect(k8s.Update(ctx, got)).To(Succeed())
	deleteBucket(g, ns, "grab")
	exists, err := c.BucketExists(ctx, foreign)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exists).To(BeTrue())

	adopt := newBucket(ns, "adopt", store)
	adopt.Spec.BucketName = foreign
	adopt.Spec.AdoptExisting = ptr.To(true)
	g.Expect(k8s.Create(ctx, adopt)).To(Succeed())
	got = eventuallyReason(g, ns, "adopt", storagebucket.ReasonHealthy)
	owner, err = c.Owner(ctx, foreign)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(owner).To(Equal(s3.Owner{UID: string(got.UID), Namespace: ns, NamespaceUID: namespaceUID(g, ns)}))

	// A second StorageBucket claiming the same bucket: the first keeps it.
	second := newBucket(newNamespace(t, adopterLabel), "copycat", store)
	second.Spec.BucketName = foreign
	second.Spec.AdoptExisting = ptr.To(true)
	g.Expect(k8s.Create(ctx, second)).To(Succeed())
	got = eventuallyReason(g, second.Namespace, "copycat", storagebucket.ReasonConflict)
	g.Expect(meta.FindStatusCondition(got.Status.Conditions, conditions.Ready).Message).To(ContainSubstring(ns + "/adopt"))
	owner, _ = c.Owner(ctx, foreign)
	g.Expect(owner.UID).NotTo(Equal(string(got.UID)))
	deleteBucket(g, second.Namespace, "copycat")
	deleteBucket(g, ns, "adopt")
}

func TestDeletionPolicies(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	store := ensureStore(g)
	ns := newNamespace(t)
	c := direct(g)

	keep := newBucket(ns, "keep", store)
	g.Expect(k8s.Create(ctx, keep)).To(Succeed())
	eventuallyReason(g, ns, "keep", storagebucket.ReasonHealthy)
	deleteBucket(g, ns, "keep")
	exists, err := c.BucketExists(ctx, ns+"-keep")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exists).To(BeTrue(), "Retain keeps the bucket")

	empty := newBucket(ns, "empty", store)
	empty.Spec.DeletionPolicy = storagev1.DeletionDelete
	g.Expect(k8s.Create(ctx, empty)).To(Succeed())
	eventuallyReason(g, ns, "empty", storagebucket.ReasonHealthy)
	deleteBucket(g, ns, "empty")
	exists, err = c.BucketExists(ctx, ns+"-empty")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exists).To(BeFalse(), "Delete removes an empty bucket")

	full := newBucket(ns, "full", store)
	full.Spec.DeletionPolicy = storagev1.DeletionDelete
	g.Expect(k8s.Create(ctx, full)).To(Succeed())
	eventuallyReason(g, ns, "full", storagebucket.ReasonHealthy)
	putObject(g, ns+"-full", "a.txt")
	putObject(g, ns+"-full", "b.txt")
	g.Expect(k8s.Delete(ctx, full)).To(Succeed())
	b := eventuallyReason(g, ns, "full", storagebucket.ReasonDeleteBlocked)
	g.Expect(meta.FindStatusCondition(b.Status.Conditions, conditions.Ready).Message).To(ContainSubstring("2 objects"))
	g.Eventually(func(g Gomega) {
		events := &corev1.EventList{}
		g.Expect(k8s.List(ctx, events, client.InNamespace(ns))).To(Succeed())
		var reasons []string
		for _, e := range events.Items {
			reasons = append(reasons, e.Reason)
		}
		g.Expect(reasons).To(ContainElement(storagebucket.ReasonDeleteBlocked))
	}, timeout, poll).Should(Succeed())
	// Switching to Retain releases it; the objects stay.
	b.Spec.DeletionPolicy = storagev1.DeletionRetain
	g.Expect(k8s.Update(ctx, b)).To(Succeed())
	deleteBucket(g, ns, "full")
	n, err := c.CountObjects(ctx, ns+"-full", 10)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(2))
}

func putObject(g Gomega, bucket, key string) {
	g.Expect(putViaProbeClient(bucket, key)).To(Succeed())
}

// putViaProbeClient writes a small object straight to versitygw.
func putViaProbeClient(bucket, key string) error {
	cfg := testS3Config()
	mc, err := minio.New(strings.TrimPrefix(cfg.Endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(cfg.AccessKey, cfg.SecretKey, ""), Region: cfg.Region, BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		return err
	}
	_, err = mc.PutObject(context.Background(), bucket, key, bytes.NewReader([]byte("data")), 4, minio.PutObjectOptions{})
	return err
}

func TestStoreInUseIsProtected(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, newStore("guarded", credsSecret))).To(Succeed())
	ns := newNamespace(t)
	g.Expect(k8s.Create(ctx, newBucket(ns, "user", "guarded"))).To(Succeed())
	eventuallyReason(g, ns, "user", storagebucket.ReasonHealthy)

	g.Expect(k8s.Delete(ctx, &storagev1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "guarded"}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		st := &storagev1.ObjectStore{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "guarded"}, st)).To(Succeed())
		c := meta.FindStatusCondition(st.Status.Conditions, conditions.Ready)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(stores.ReasonInUse))
		g.Expect(c.Message).To(ContainSubstring("1 StorageBuckets"))
	}, timeout, poll).Should(Succeed())

	deleteBucket(g, ns, "user")
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: "guarded"}, &storagev1.ObjectStore{}))
	}, timeout, poll).Should(BeTrue())
}

func TestBucketEventsTriggerAnImmediateCheck(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	store := ensureStore(g)
	ns := newNamespace(t)
	b := newBucket(ns, "hooked", store)
	b.Spec.HealthCheck.IntervalSeconds = 3600 // only events can trigger a check
	g.Expect(k8s.Create(ctx, b)).To(Succeed())
	eventuallyReason(g, ns, "hooked", storagebucket.ReasonHealthy)
	bucket := ns + "-hooked"

	// The bucket disappears behind our back. A bad token changes nothing.
	c := direct(g)
	g.Expect(c.DeleteBucket(ctx, bucket)).To(Succeed())
	body := fmt.Sprintf(`{"Records":[{"eventName":"s3:ObjectCreated:Put","s3":{"bucket":{"name":%q}}}]}`, bucket)
	resp, err := http.Post(eventsURL+"?token=wrong-token-0123456789", "application/json", strings.NewReader(body))
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))
	req, _ := http.NewRequest(http.MethodPost, eventsURL, strings.NewReader(body))
	resp, err = http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized), "no token at all")
	g.Consistently(func() bool {
		exists, _ := c.BucketExists(ctx, bucket)
		return exists
	}, 2*time.Second, 200*time.Millisecond).Should(BeFalse())

	// A valid notification makes the controller look now: it finds the
	// bucket gone and creates it again.
	req, _ = http.NewRequest(http.MethodPost, eventsURL, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+eventsToken)
	resp, err = http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusAccepted))
	g.Eventually(func() bool {
		exists, _ := c.BucketExists(ctx, bucket)
		return exists
	}, 10*time.Second, 100*time.Millisecond).Should(BeTrue())

	// versitygw's own notification (its --event-webhook-url points at the
	// receiver, token in the query) reaches us too: the check it triggers is
	// counted in the metrics. The recreating check is counted after the
	// bucket exists; its Event comes after the count, so once the Event is
	// there, before cannot miss it.
	g.Eventually(func(g Gomega) {
		events := &corev1.EventList{}
		g.Expect(k8s.List(ctx, events, client.InNamespace(ns))).To(Succeed())
		g.Expect(events.Items).To(ContainElement(HaveField("Reason", "BucketRecreated")))
	}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
	before := checksIn(g, ns)
	g.Expect(putViaProbeClient(bucket, "hello.txt")).To(Succeed())
	g.Eventually(func() float64 { return checksIn(g, ns) }, 10*time.Second, 100*time.Millisecond).Should(BeNumerically(">", before))
	deleteBucket(g, ns, "hooked")
}

// checksIn sums the health-check counter of the buckets in namespace ns
// (each test's namespace holds one).
func checksIn(g Gomega, ns string) float64 {
	n, err := testenv.Counter("trellis_storagebucket_checks_total", "namespace", ns)
	g.Expect(err).NotTo(HaveOccurred())
	return n
}

func TestStoreOutageIsBoundedAndHeals(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	store := ensureStore(g)
	ns := newNamespace(t)
	for i := range 5 {
		g.Expect(k8s.Create(ctx, newBucket(ns, fmt.Sprintf("o%d", i), store))).To(Succeed())
	}
	for i := range 5 {
		eventuallyReason(g, ns, fmt.Sprintf("o%d", i), storagebucket.ReasonHealthy)
	}

	s3srv.Stop()
	// Within two intervals (10s each) every bucket says why it is unhealthy.
	for i := range 5 {
		var b *storagev1.StorageBucket
		g.Eventually(func(g Gomega) {
			b = getBucket(g, ns, fmt.Sprintf("o%d", i))
			c := meta.FindStatusCondition(b.Status.Conditions, conditions.Ready)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		}, 25*time.Second, poll).Should(Succeed())
		c := meta.FindStatusCondition(b.Status.Conditions, conditions.Ready)
		g.Expect(meta.IsStatusConditionTrue(b.Status.Conditions, conditions.Reconciling)).To(BeTrue(), "a store outage heals by itself: not Stalled")
		g.Expect(c.Reason).To(Equal(string(s3.ReasonStoreUnreachable)))
		g.Expect(c.Message).To(ContainSubstring("ObjectStore local-s3"))
	}
	// While it is down: no storm. Over 20s, with 5+ buckets due twice each,
	// only the store-level check (backing off) sends requests.
	before := s3srv.Requests()
	time.Sleep(20 * time.Second)
	sent := s3srv.Requests() - before
	t.Logf("requests to the store during 20s of outage: %d", sent)
	g.Expect(sent).To(BeNumerically("<=", 5))

	g.Expect(s3srv.Start()).To(Succeed())
	for i := range 5 {
		g.Eventually(func(g Gomega) {
			b := getBucket(g, ns, fmt.Sprintf("o%d", i))
			g.Expect(meta.IsStatusConditionTrue(b.Status.Conditions, conditions.Ready)).To(BeTrue())
		}, 5*time.Minute, 200*time.Millisecond).Should(Succeed())
	}
	for i := range 5 {
		deleteBucket(g, ns, fmt.Sprintf("o%d", i))
	}
}

func TestHealthyBucketsCostNoWrites(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	store := ensureStore(g)
	ns := newNamespace(t)
	g.Expect(k8s.Create(ctx, newBucket(ns, "calm", store))).To(Succeed())
	eventuallyReason(g, ns, "calm", storagebucket.ReasonHealthy)
	time.Sleep(time.Second)

	mgrWrites.Reset()
	before := s3srv.Requests()
	time.Sleep(22 * time.Second) // two check intervals
	_, paths := mgrWrites.Writes()
	var mine []string
	for _, p := range paths {
		if strings.Contains(p, "/namespaces/"+ns+"/") {
			mine = append(mine, p)
		}
	}
	g.Expect(mine).To(BeEmpty())
	checks := s3srv.Requests() - before
	t.Logf("store requests in 22s for healthy buckets: %d", checks)
	g.Expect(checks).To(BeNumerically(">=", 1), "the bucket is checked on its interval")
	deleteBucket(g, ns, "calm")
}

func TestStorageAdmission(t *testing.T) {
	ns := newNamespace(t)
	ctx := context.Background()
	mk := func(mutate func(*storagev1.StorageBucket)) *storagev1.StorageBucket {
		b := newBucket(ns, "adm", "local-s3")
		mutate(b)
		return b
	}
	cases := map[string]struct {
		obj  client.Object
		want string
	}{
		"bucket name too short": {mk(func(b *storagev1.StorageBucket) { b.Spec.BucketName = "ab" }), "spec.bucketName"},
		"upper case":            {mk(func(b *storagev1.StorageBucket) { b.Spec.BucketName = "MyBucket" }), "bucketName must be 3-63 lower-case"},
		"IP form":               {mk(func(b *storagev1.StorageBucket) { b.Spec.BucketName = "192.168.1.1" }), "must not look like an IP address"},
		"double dot":            {mk(func(b *storagev1.StorageBucket) { b.Spec.BucketName = "a..b" }), "must not contain"},
		"reserved prefix":       {mk(func(b *storagev1.StorageBucket) { b.Spec.BucketName = "xn--abc" }), "reserves"},
		"interval too short":    {mk(func(b *storagev1.StorageBucket) { b.Spec.HealthCheck.IntervalSeconds = 5 }), "spec.healthCheck.intervalSeconds"},
		"bad policy":            {mk(func(b *storagev1.StorageBucket) { b.Spec.DeletionPolicy = "Shred" }), "Unsupported value"},
		"bucket name too long":  {mk(func(b *storagev1.StorageBucket) { b.Spec.BucketName = strings.Repeat("a", 64) }), "spec.bucketName"},
		"ends with a dash":      {mk(func(b *storagev1.StorageBucket) { b.Spec.BucketName = "bucket-" }), "bucketName must be 3-63 lower-case"},
		"reserved suffix":       {mk(func(b *storagev1.StorageBucket) { b.Spec.BucketName = "abc-s3alias" }), "reserves"},
		"interval too long":     {mk(func(b *storagev1.StorageBucket) { b.Spec.HealthCheck.IntervalSeconds = 25 * 3600 }), "spec.healthCheck.intervalSeconds"},
		"no store":              {mk(func(b *storagev1.StorageBucket) { b.Spec.StoreRef.Name = "" }), "spec.storeRef"},
		"store endpoint with a path": {func() client.Object {
			s := newStore("bad-endpoint", credsSecret)
			s.Spec.Endpoint = "http://127.0.0.1:7070/path"
			return s
		}(), "endpoint must be an http(s) URL"},
		"iam options on a versitygw": {func() client.Object {
			s := newStore("iam-on-vgw", credsSecret)
			s.Spec.IAM = &storagev1.IAMOptions{Endpoint: "https://iam.example.com"}
			return s
		}(), "iam options need type: IAM"},
		"versitygw options on an IAM store": {func() client.Object {
			s := newStore("vgw-on-iam", credsSecret)
			s.Spec.Type, s.Spec.Versitygw = storagev1.StoreTypeIAM, &storagev1.VersitygwOptions{AdminEndpoint: "http://127.0.0.1:7071"}
			return s
		}(), "versitygw options need type: Versitygw"},
		"IAM endpoint with a path": {func() client.Object {
			s := newStore("iam-path", credsSecret)
			s.Spec.Type, s.Spec.IAM = storagev1.StoreTypeIAM, &storagev1.IAMOptions{Endpoint: "https://iam.example.com/x"}
			return s
		}(), "iam.endpoint must be an http(s) URL"},
		"minio options on an IAM store": {func() client.Object {
			s := newStore("minio-on-iam", credsSecret)
			s.Spec.Type, s.Spec.MinIO = storagev1.StoreTypeIAM, &storagev1.MinIOOptions{AdminEndpoint: "http://127.0.0.1:9000"}
			return s
		}(), "minio options need type: MinIO"},
		"MinIO admin endpoint with a path": {func() client.Object {
			s := newStore("minio-path", credsSecret)
			s.Spec.Type, s.Spec.MinIO = storagev1.StoreTypeMinIO, &storagev1.MinIOOptions{AdminEndpoint: "http://127.0.0.1:9000/minio"}
			return s
		}(), "minio.adminEndpoint must be an http(s) URL"},
		"store endpoint with credentials": {func() client.Object {
			s := newStore("bad-endpoint2", credsSecret)
			s.Spec.Endpoint = "http://user:pass@127.0.0.1:7070"
			return s
		}(), "endpoint must be an http(s) URL"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			err := k8s.Create(ctx, tc.obj)
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
		})
	}
	t.Run("bucketName and storeRef are immutable", func(t *testing.T) {
		g := NewWithT(t)
		b := newBucket(ns, "fixed", "local-s3")
		b.Spec.BucketName = ns + "-fixed-name"
		g.Expect(k8s.Create(ctx, b)).To(Succeed())
		for mutate, want := range map[string]string{"bucketName": "bucketName is immutable", "storeRef": "storeRef is immutable"} {
			// Patch, so the controller's own writes (finalizer, status) cannot make it a conflict.
			body := `{"spec":{"bucketName":"` + ns + `-other-name"}}`
			if mutate == "storeRef" {
				body = `{"spec":{"storeRef":{"name":"elsewhere"}}}`
			}
			err := k8s.Patch(ctx, getBucket(g, ns, "fixed"), client.RawPatch(types.MergePatchType, []byte(body)))
			g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(want))
		}
		deleteBucket(g, ns, "fixed")
	})
}

// TestCreateThenTagSurvivesAStoreFailureInBetween is the crash window of
// claiming: the store creates the bucket, then fails the tagging. The intent
// recorded before the create makes the next check claim the untagged bucket;
// the bucket is Ready, ours, and deleted under deletionPolicy Delete.
func TestCreateThenTagSurvivesAStoreFailureInBetween(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	store := ensureStore(g)
	ns := newNamespace(t)
	bucket := ns + "-fragile"
	s3srv.Fail(func(r *http.Request) bool {
		return r.Method == http.MethodPut && r.URL.Query().Has("tagging") && strings.Contains(r.URL.Path, bucket)
	}, http.StatusServiceUnavailable, 1)

	b := newBucket(ns, "fragile", store)
	b.Spec.DeletionPolicy = storagev1.DeletionDelete
	g.Expect(k8s.Create(ctx, b)).To(Succeed())

	got := eventuallyReason(g, ns, "fragile", storagebucket.ReasonHealthy)
	g.Expect(got.Status.Claim).To(Equal(storagev1.BucketClaimed))
	owner, err := direct(g).Owner(ctx, bucket)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(owner.UID).To(Equal(string(got.UID)), "the bucket Trellis created is tagged as its own")
	g.Expect(checksIn(g, ns)).To(BeNumerically(">=", 2), "the failed tagging was a check of its own")

	deleteBucket(g, ns, "fragile")
	exists, err := direct(g).BucketExists(ctx, bucket)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exists).To(BeFalse(), "an empty bucket Trellis created goes with deletionPolicy Delete")
}
