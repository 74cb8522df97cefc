package storage

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	bucketaccess "github.com/trellis-dev/trellis/internal/controller/storage/access"
	storagebucket "github.com/trellis-dev/trellis/internal/controller/storage/bucket"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/s3"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// editorOf returns a client acting as user, an editor of the namespaces (the
// built-in edit role plus the roles config/rbac aggregates into it).
func editorOf(t *testing.T, user string, namespaces ...string) client.Client {
	t.Helper()
	cfg, err := testenv.AsNamespaceEditor(context.Background(), adminCfg, k8s, user, namespaces, "storagebucket-editor-role")
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func newAccess(ns, name, bucket, secret string, mode storagev1.AccessMode) *storagev1.BucketAccess {
	return &storagev1.BucketAccess{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: storagev1.BucketAccessSpec{
			BucketRef: storagev1.BucketReference{Name: bucket}, Mode: mode, SecretName: secret,
		},
	}
}

func getAccess(g Gomega, ns, name string) *storagev1.BucketAccess {
	a := &storagev1.BucketAccess{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, a)).To(Succeed())
	return a
}

func eventuallyAccessReason(g Gomega, ns, name, reason string) *storagev1.BucketAccess {
	var a *storagev1.BucketAccess
	g.Eventually(func(g Gomega) {
		a = getAccess(g, ns, name)
		c := meta.FindStatusCondition(a.Status.Conditions, conditions.Ready)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(reason), "message: %s", c.Message)
		g.Expect(a.Status.ObservedGeneration).To(Equal(a.Generation))
	}, timeout, poll).Should(Succeed())
	return a
}

func deleteAccess(g Gomega, ns, name string) {
	a := &storagev1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	g.Expect(client.IgnoreNotFound(k8s.Delete(context.Background(), a))).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(context.Background(), client.ObjectKeyFromObject(a), &storagev1.BucketAccess{}))
	}, timeout, poll).Should(BeTrue())
}

// creds is what a workload reads from the Secret of a BucketAccess.
type creds struct {
	accessKey, secretKey, bucket, endpoint string
	// direct is the server's own endpoint (s3srv.Direct when unset).
	direct string
}

func secretOf(g Gomega, ns, name string) *corev1.Secret {
	s := &corev1.Secret{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s)).To(Succeed())
	return s
}

func credsOf(g Gomega, ns, secret string) creds {
	s := secretOf(g, ns, secret)
	return creds{
		accessKey: string(s.Data["AWS_ACCESS_KEY_ID"]), secretKey: string(s.Data["AWS_SECRET_ACCESS_KEY"]),
		bucket: string(s.Data["BUCKET_NAME"]), endpoint: string(s.Data["AWS_ENDPOINT_URL_S3"]),
	}
}

// workload is an S3 client as an application would build it from the Secret
// (straight to versitygw: what it may do is the store's to decide).
func (c creds) workload(g Gomega) *minio.Client {
	direct, retries := c.direct, 0
	if direct == "" {
		direct = s3srv.Direct
	} else {
		retries = 1 // a backend's failure shows at once, not after minutes of back-off
	}
	mc, err := minio.New(strings.TrimPrefix(direct, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(c.accessKey, c.secretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath,
		MaxRetries: retries,
	})
	g.Expect(err).NotTo(HaveOccurred())
	return mc
}

func (c creds) put(g Gomega, bucket, key string) error {
	_, err := c.workload(g).PutObject(context.Background(), bucket, key, bytes.NewReader([]byte("hello")), 5, minio.PutObjectOptions{})
	return err
}

func (c creds) get(g Gomega, bucket, key string) (string, error) {
	obj, err := c.workload(g).GetObject(context.Background(), bucket, key, minio.GetObjectOptions{})
	if err != nil {
		return "", err
	}
	defer func() { _ = obj.Close() }()
	b, err := io.ReadAll(obj)
	return string(b), err
}

func httpStatus(err error) int { return minio.ToErrorResponse(err).StatusCode }

// storeAccounts lists the access key ids the store has, as its admin sees them.
func storeAccounts(g Gomega, prefix string) []string {
	a, err := s3.NewVersitygwAccounts(testS3Config(), "")
	g.Expect(err).NotTo(HaveOccurred())
	ids, err := a.ListAccounts(context.Background())
	g.Expect(err).NotTo(HaveOccurred())
	var out []string
	for _, id := range ids {
		if strings.HasPrefix(id, prefix) {
			out = append(out, id)
		}
	}
	return out
}

// uidOf returns the UID of an ObjectStore, whose mark the keys it issues carry.
func uidOf(g Gomega, store string) types.UID {
	st := &storagev1.ObjectStore{}
	g.Expect(k8s.Get(context.Background(), client.ObjectKey{Name: store}, st)).To(Succeed())
	return st.UID
}

// TestBucketAccessGrantsExactlyOneBucket: a namespace editor asks for a
// read-only and a read-write key; each does what its mode says on its
// bucket, and nothing on another bucket or the admin API. Deleting an access
// revokes its key at once and deletes its Secret. On each backend.
func TestBucketAccessGrantsExactlyOneBucket(t *testing.T) {
	for _, b := range accessBackends {
		t.Run(b.name, func(t *testing.T) { bucketAccessGrantsExactlyOneBucket(t, b) })
	}
}

func bucketAccessGrantsExactlyOneBucket(t *testing.T, b backend) {
	g := NewWithT(t)
	ctx := context.Background()
	on := b.store(t, g)
	store := on.name
	ns := newNamespace(t)
	editor := editorOf(t, "dev-"+ns, ns)

	for _, name := range []string{"data", "other"} {
		g.Expect(editor.Create(ctx, newBucket(ns, name, store))).To(Succeed())
	}
	eventuallyReason(g, ns, "data", storagebucket.ReasonHealthy)
	eventuallyReason(g, ns, "other", storagebucket.ReasonHealthy)
	data, other := ns+"-data", ns+"-other"
	on.putAsRoot(g, data, "seed.txt")
	on.putAsRoot(g, other, "seed.txt")

	g.Expect(editor.Create(ctx, newAccess(ns, "reader", "data", "data-reader", storagev1.AccessReadOnly))).To(Succeed())
	g.Expect(editor.Create(ctx, newAccess(ns, "writer", "data", "data-writer", storagev1.AccessReadWrite))).To(Succeed())
	reader := eventuallyAccessReason(g, ns, "reader", bucketaccess.ReasonGranted)
	writer := eventuallyAccessReason(g, ns, "writer", bucketaccess.ReasonGranted)
	g.Expect(reader.Finalizers).To(ContainElement(stores.AccessFinalizer))
	g.Expect(reader.Status.StoreName).To(Equal(store))
	g.Expect(reader.Status.BucketName).To(Equal(data))
	g.Expect(accountOf(reader)).To(Equal(stores.AccountName(uidOf(g, store), reader.UID, 1)))
	g.Expect(reader.Status.KeyVersion).To(Equal(int32(1)))

	// The Secret: owned by its access, labelled, every key a client needs.
	s := secretOf(g, ns, "data-writer")
	g.Expect(metav1.IsControlledBy(s, writer)).To(BeTrue())
	g.Expect(s.Labels).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "trellis"))
	g.Expect(s.Labels).To(HaveKeyWithValue("app.kubernetes.io/instance", "writer"))
	g.Expect(s.Type).To(Equal(corev1.SecretTypeOpaque))
	for _, k := range []string{"endpoint", "region", "bucketName", "accessKeyID", "secretAccessKey", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION", "AWS_ENDPOINT_URL_S3", "BUCKET_NAME"} {
		g.Expect(s.Data).To(HaveKey(k))
		g.Expect(s.Data[k]).NotTo(BeEmpty(), k)
	}
	g.Expect(string(s.Data["bucketName"])).To(Equal(data))
	g.Expect(string(s.Data["endpoint"])).To(Equal(on.endpoint))
	g.Expect(s.Data["secretAccessKey"]).To(Equal(s.Data["AWS_SECRET_ACCESS_KEY"]))
	g.Expect(testenv.FieldManagers(s)[""]).To(ConsistOf("trellis"))

	ro, rw := on.creds(g, ns, "data-reader"), on.creds(g, ns, "data-writer")
	g.Expect(ro.accessKey).To(Equal(reader.Status.AccessKeyID), "the status names the key the Secret holds")
	g.Expect(ro.accessKey).NotTo(Equal(rw.accessKey))
	// The key never shows in status or Events.
	for _, a := range []*storagev1.BucketAccess{reader, writer} {
		for _, c := range a.Status.Conditions {
			g.Expect(c.Message).NotTo(ContainSubstring(ro.secretKey))
			g.Expect(c.Message).NotTo(ContainSubstring(rw.secretKey))
		}
	}
	events := &corev1.EventList{}
	g.Expect(k8s.List(ctx, events, client.InNamespace(ns))).To(Succeed())
	for _, e := range events.Items {
		g.Expect(e.Message).NotTo(ContainSubstring(ro.secretKey))
		g.Expect(e.Message).NotTo(ContainSubstring(rw.secretKey))
	}

	// ReadOnly reads and lists, and is refused writes.
	on.applied(g, func(g Gomega) {
		got, err := ro.get(g, data, "seed.txt")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal("data"))
	})
	err := ro.put(g, data, "nope.txt")
	g.Expect(httpStatus(err)).To(Equal(http.StatusForbidden), "ReadOnly writes: %v", err)
	// ReadWrite does both.
	on.applied(g, func(g Gomega) { g.Expect(rw.put(g, data, "written.txt")).To(Succeed()) })
	got, err := rw.get(g, data, "written.txt")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal("hello"))
	// Neither reaches another bucket, nor changes the bucket itself.
	for _, c := range []creds{ro, rw} {
		_, err := c.get(g, other, "seed.txt")
		g.Expect(httpStatus(err)).To(Equal(http.StatusForbidden), "another bucket: %v", err)
		g.Expect(httpStatus(c.put(g, other, "x.txt"))).To(Equal(http.StatusForbidden))
		g.Expect(c.workload(g).SetBucketPolicy(ctx, data, "")).NotTo(Succeed(), "no policy changes")
		g.Expect(c.workload(g).RemoveBucket(ctx, data)).NotTo(Succeed(), "no bucket deletion")
		admin, err := on.asAdmin(c.accessKey, c.secretKey)
		g.Expect(err).NotTo(HaveOccurred())
		_, err = admin.ListAccounts(ctx)
		reason, _ := s3.Classify(err)
		g.Expect(reason).To(Equal(s3.ReasonAccessDenied), "no admin API: %v", err)
	}

	// The store has exactly the two accounts.
	g.Expect(on.accounts(g, stores.AccountPrefix(uidOf(g, store), reader.UID))).To(Equal([]string{accountOf(reader)}))
	g.Expect(on.accounts(g, stores.AccountPrefix(uidOf(g, store), writer.UID))).To(Equal([]string{accountOf(writer)}))

	// Deleted: the key stops working at once, the Secret goes, the reader stays.
	g.Expect(editor.Delete(ctx, writer)).To(Succeed())
	deleteAccess(g, ns, "writer")
	on.applied(g, func(g Gomega) {
		_, err := rw.get(g, data, "written.txt")
		g.Expect(httpStatus(err)).To(Equal(http.StatusForbidden), "a revoked key gets 403: %v", err)
	})
	g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "data-writer"}, &corev1.Secret{}))).To(BeTrue())
	g.Expect(on.accounts(g, stores.AccountPrefix(uidOf(g, store), writer.UID))).To(BeEmpty())
	_, err = ro.get(g, data, "written.txt")
	g.Expect(err).NotTo(HaveOccurred(), "the other access is untouched")

	deleteAccess(g, ns, "reader")
	deleteBucket(g, ns, "data")
	deleteBucket(g, ns, "other")
}

// TestKeyRotation: raising keyVersion issues a new key into the Secret; the
// old one keeps working for the grace period and is then revoked. On each
// backend.
func TestKeyRotation(t *testing.T) {
	for _, b := range accessBackends {
		t.Run(b.name, func(t *testing.T) { keyRotation(t, b) })
	}
}

func keyRotation(t *testing.T, b backend) {
	g := NewWithT(t)
	ctx := context.Background()
	on := b.store(t, g)
	store := on.name
	ns := newNamespace(t)
	g.Expect(k8s.Create(ctx, newBucket(ns, "rot", store))).To(Succeed())
	eventuallyReason(g, ns, "rot", storagebucket.ReasonHealthy)
	bucket := ns + "-rot"
	a := newAccess(ns, "app", "rot", "rot-creds", storagev1.AccessReadWrite)
	const grace = 15 * time.Second
	a.Spec.RotationGracePeriodSeconds = ptr.To(int32(grace / time.Second))
	g.Expect(k8s.Create(ctx, a)).To(Succeed())
	a = eventuallyAccessReason(g, ns, "app", bucketaccess.ReasonGranted)
	old := on.creds(g, ns, "rot-creds")
	on.applied(g, func(g Gomega) { g.Expect(old.put(g, bucket, "v1.txt")).To(Succeed()) })

	a.Spec.KeyVersion = 2
	g.Expect(k8s.Update(ctx, a)).To(Succeed())
	rotated := time.Now()
	var next creds
	g.Eventually(func(g Gomega) {
		a = getAccess(g, ns, "app")
		g.Expect(a.Status.KeyVersion).To(Equal(int32(2)))
		next = on.creds(g, ns, "rot-creds")
		g.Expect(next.accessKey).To(Equal(a.Status.AccessKeyID))
		g.Expect(accountOf(a)).To(Equal(stores.AccountName(uidOf(g, store), a.UID, 2)))
	}, timeout, poll).Should(Succeed())
	g.Expect(a.Status.RetiringKeys).To(HaveLen(1))
	g.Expect(a.Status.RetiringKeys[0].AccessKeyID).To(Equal(old.accessKey))
	g.Expect(next.secretKey).NotTo(Equal(old.secretKey))
	on.applied(g, func(g Gomega) { g.Expect(next.put(g, bucket, "v2.txt")).To(Succeed(), "the new key works at once") })
	if time.Since(rotated) < grace-2*time.Second {
		g.Expect(old.put(g, bucket, "still.txt")).To(Succeed(), "the old key works during the grace period")
	}

	g.Eventually(func() int {
		return httpStatus(old.put(g, bucket, "late.txt"))
	}, grace+timeout, poll).Should(Equal(http.StatusForbidden), "the old key is revoked after the grace period")
	t.Logf("old key refused %.1fs after the rotation (grace %s)", time.Since(rotated).Seconds(), grace)
	g.Expect(time.Since(rotated)).To(BeNumerically(">=", grace-time.Second), "not before the grace period ends")
	g.Eventually(func(g Gomega) {
		g.Expect(getAccess(g, ns, "app").Status.RetiringKeys).To(BeEmpty())
	}, timeout, poll).Should(Succeed())
	g.Expect(on.accounts(g, stores.AccountPrefix(uidOf(g, store), a.UID))).To(Equal([]string{accountOf(a)}), "exactly the current key's account")
	g.Expect(next.put(g, bucket, "after.txt")).To(Succeed())

	// A Secret deleted by hand is written again, with a new key of the same
	// account (versitygw: the same key id; IAM: one the server makes).
	g.Expect(k8s.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rot-creds"}})).To(Succeed())
	a = getAccess(g, ns, "app")
	a.Spec.Mode = storagev1.AccessReadOnly // a spec change, so the access looks now instead of at its periodic check
	g.Expect(k8s.Update(ctx, a)).To(Succeed())
	var again creds
	g.Eventually(func(g Gomega) {
		again = on.creds(g, ns, "rot-creds")
		g.Expect(again.secretKey).NotTo(Equal(next.secretKey))
		a := getAccess(g, ns, "app")
		g.Expect(again.accessKey).To(Equal(a.Status.AccessKeyID))
		g.Expect(accountOf(a)).To(Equal(stores.AccountName(uidOf(g, store), a.UID, 2)))
	}, timeout, poll).Should(Succeed())
	g.Expect(again.secretKey).NotTo(Equal(next.secretKey))
	eventuallyAccessReason(g, ns, "app", bucketaccess.ReasonGranted)
	on.applied(g, func(g Gomega) {
		_, err := again.get(g, bucket, "after.txt")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(httpStatus(again.put(g, bucket, "ro.txt"))).To(Equal(http.StatusForbidden), "now ReadOnly")
		g.Expect(httpStatus(next.put(g, bucket, "lost.txt"))).To(Equal(http.StatusForbidden), "the lost secret no longer works")
	})

	deleteAccess(g, ns, "app")
	g.Expect(on.accounts(g, stores.AccountPrefix(uidOf(g, store), a.UID))).To(BeEmpty())
	deleteBucket(g, ns, "rot")
}

// TestBucketAccessThroughStoreFailures: a store down while an access is
// made, one that fails between the account and its grant, and one down
// while an access is deleted: each ends in exactly the desired state, and
// the store's list of accounts shows no orphan.
func TestBucketAccessThroughStoreFailures(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	store := ensureStore(g)
	ns := newNamespace(t)
	g.Expect(k8s.Create(ctx, newBucket(ns, "flaky", store))).To(Succeed())
	eventuallyReason(g, ns, "flaky", storagebucket.ReasonHealthy)
	bucket := ns + "-flaky"

	t.Run("down while created", func(t *testing.T) {
		g := NewWithT(t)
		s3srv.Stop()
		g.Expect(k8s.Create(ctx, newAccess(ns, "early", "flaky", "early-creds", storagev1.AccessReadWrite))).To(Succeed())
		g.Eventually(func(g Gomega) {
			a := getAccess(g, ns, "early")
			g.Expect(conditions.IsTrue(a.Status.Conditions, conditions.Reconciling)).To(BeTrue(), "%+v", a.Status.Conditions)
		}, timeout, poll).Should(Succeed())
		g.Expect(s3srv.Start()).To(Succeed())
		a := eventuallyAccessReason(g, ns, "early", bucketaccess.ReasonGranted)
		c := credsOf(g, ns, "early-creds")
		g.Expect(c.put(g, bucket, "early.txt")).To(Succeed())
		g.Expect(storeAccounts(g, stores.AccountPrefix(uidOf(g, store), a.UID))).To(Equal([]string{stores.AccountName(uidOf(g, store), a.UID, 1)}))
	})

	t.Run("fails between the account and its grant", func(t *testing.T) {
		g := NewWithT(t)
		s3srv.Fail(func(r *http.Request) bool {
			return r.Method == http.MethodPut && r.URL.Query().Has("policy") && strings.Contains(r.URL.Path, bucket)
		}, http.StatusServiceUnavailable, 1)
		g.Expect(k8s.Create(ctx, newAccess(ns, "mid", "flaky", "mid-creds", storagev1.AccessReadOnly))).To(Succeed())
		a := eventuallyAccessReason(g, ns, "mid", bucketaccess.ReasonGranted)
		c := credsOf(g, ns, "mid-creds")
		_, err := c.get(g, bucket, "early.txt")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(storeAccounts(g, stores.AccountPrefix(uidOf(g, store), a.UID))).To(Equal([]string{stores.AccountName(uidOf(g, store), a.UID, 1)}), "one account, whatever was tried")
	})

	t.Run("down while deleted", func(t *testing.T) {
		g := NewWithT(t)
		a := getAccess(g, ns, "early")
		c := credsOf(g, ns, "early-creds")
		s3srv.Stop()
		g.Expect(k8s.Delete(ctx, a)).To(Succeed())
		g.Eventually(func(g Gomega) {
			a := getAccess(g, ns, "early")
			g.Expect(a.Finalizers).To(ContainElement(stores.AccessFinalizer), "held until the key is revoked")
			ready := meta.FindStatusCondition(a.Status.Conditions, conditions.Ready)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Message).To(ContainSubstring("revoked once"))
		}, timeout, poll).Should(Succeed())
		g.Expect(s3srv.Start()).To(Succeed())
		g.Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(a), &storagev1.BucketAccess{}))
		}, 3*time.Minute, poll).Should(BeTrue())
		g.Expect(storeAccounts(g, stores.AccountPrefix(uidOf(g, store), a.UID))).To(BeEmpty(), "no orphan account")
		_, err := c.get(g, bucket, "early.txt")
		g.Expect(httpStatus(err)).To(Equal(http.StatusForbidden))
	})

	deleteAccess(g, ns, "mid")
	deleteBucket(g, ns, "flaky")
}

// TestBucketAccessHostileInput: what a BucketAccess may not do is refused at
// admission or shown as Stalled, and touches nothing that is not its own.
func TestBucketAccessHostileInput(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	store := ensureStore(g)
	ns := newNamespace(t)
	editor := editorOf(t, "dev-"+ns, ns)

	t.Run("admission", func(t *testing.T) {
		mk := func(mutate func(*storagev1.BucketAccess)) *storagev1.BucketAccess {
			a := newAccess(ns, "adm", "b", "s", storagev1.AccessReadOnly)
			mutate(a)
			return a
		}
		cases := map[string]struct {
			obj  *storagev1.BucketAccess
			want string
		}{
			"bad mode":          {mk(func(a *storagev1.BucketAccess) { a.Spec.Mode = "Admin" }), "Unsupported value"},
			"no mode":           {mk(func(a *storagev1.BucketAccess) { a.Spec.Mode = "" }), "spec.mode"},
			"no bucket":         {mk(func(a *storagev1.BucketAccess) { a.Spec.BucketRef.Name = "" }), "spec.bucketRef"},
			"secret name":       {mk(func(a *storagev1.BucketAccess) { a.Spec.SecretName = "Not_A_Name" }), "secretName must be a DNS subdomain"},
			"key version 0":     {mk(func(a *storagev1.BucketAccess) { a.Spec.KeyVersion = -1 }), "spec.keyVersion"},
			"grace too long":    {mk(func(a *storagev1.BucketAccess) { a.Spec.RotationGracePeriodSeconds = ptr.To(int32(8 * 86400)) }), "rotationGracePeriodSeconds"},
			"negative grace":    {mk(func(a *storagev1.BucketAccess) { a.Spec.RotationGracePeriodSeconds = ptr.To(int32(-1)) }), "rotationGracePeriodSeconds"},
			"secret name empty": {mk(func(a *storagev1.BucketAccess) { a.Spec.SecretName = "" }), "spec.secretName"},
		}
		for name, tc := range cases {
			t.Run(name, func(t *testing.T) {
				g := NewWithT(t)
				err := editor.Create(ctx, tc.obj)
				g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
				g.Expect(err.Error()).To(ContainSubstring(tc.want))
			})
		}
		t.Run("no namespace in bucketRef", func(t *testing.T) {
			g := NewWithT(t)
			u := &unstructured.Unstructured{}
			g.Expect(u.UnmarshalJSON([]byte(`{"apiVersion":"storage.trellis.dev/v1","kind":"BucketAccess","metadata":{"name":"elsewhere","namespace":"` + ns +
				`"},"spec":{"bucketRef":{"name":"b","namespace":"kube-system"},"mode":"ReadOnly","secretName":"s"}}`))).To(Succeed())
			err := editor.Create(ctx, u, client.FieldValidation("Strict"))
			g.Expect(err).To(HaveOccurred(), "a BucketAccess names a bucket of its own namespace only")
			g.Expect(err.Error()).To(ContainSubstring(`unknown field "spec.bucketRef.namespace"`))
		})
		t.Run("immutable and one-way fields", func(t *testing.T) {
			g := NewWithT(t)
			a := newAccess(ns, "fixed", "nothing-here", "fixed-creds", storagev1.AccessReadOnly)
			a.Spec.KeyVersion = 3
			g.Expect(editor.Create(ctx, a)).To(Succeed())
			for body, want := range map[string]string{
				`{"spec":{"bucketRef":{"name":"other"}}}`: "bucketRef is immutable",
				`{"spec":{"secretName":"other"}}`:         "secretName is immutable",
				`{"spec":{"keyVersion":2}}`:               "keyVersion cannot go down",
			} {
				err := editor.Patch(ctx, getAccess(g, ns, "fixed"), client.RawPatch(types.MergePatchType, []byte(body)))
				g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: got %v", body, err)
				g.Expect(err.Error()).To(ContainSubstring(want))
			}
			deleteAccess(g, ns, "fixed")
		})
	})

	t.Run("a bucket of another namespace is not found", func(t *testing.T) {
		g := NewWithT(t)
		theirs := newNamespace(t)
		g.Expect(k8s.Create(ctx, newBucket(theirs, "shared", store))).To(Succeed())
		eventuallyReason(g, theirs, "shared", storagebucket.ReasonHealthy)
		g.Expect(editor.Create(ctx, newAccess(ns, "grab", "shared", "grab-creds", storagev1.AccessReadWrite))).To(Succeed())
		a := eventuallyAccessReason(g, ns, "grab", bucketaccess.ReasonBucketNotFound)
		g.Expect(conditions.IsTrue(a.Status.Conditions, conditions.Stalled)).To(BeTrue())
		g.Expect(meta.FindStatusCondition(a.Status.Conditions, conditions.Ready).Message).To(ContainSubstring("does not exist in namespace " + ns))
		g.Expect(storeAccounts(g, stores.AccountPrefix(uidOf(g, store), a.UID))).To(BeEmpty())
		g.Expect(a.Status.StoreName).To(BeEmpty())
		deleteAccess(g, ns, "grab")
		deleteBucket(g, theirs, "shared")
	})

	t.Run("a Secret that is not ours is never overwritten", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(k8s.Create(ctx, newBucket(ns, "mine", store))).To(Succeed())
		eventuallyReason(g, ns, "mine", storagebucket.ReasonHealthy)
		taken := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "taken"}, Data: map[string][]byte{"password": []byte("hunter2")}}
		g.Expect(k8s.Create(ctx, taken)).To(Succeed())
		g.Expect(editor.Create(ctx, newAccess(ns, "squat", "mine", "taken", storagev1.AccessReadWrite))).To(Succeed())
		a := eventuallyAccessReason(g, ns, "squat", bucketaccess.ReasonSecretConflict)
		g.Expect(conditions.IsTrue(a.Status.Conditions, conditions.Stalled)).To(BeTrue())
		g.Expect(meta.FindStatusCondition(a.Status.Conditions, conditions.Ready).Message).To(ContainSubstring("never adopts"))
		s := secretOf(g, ns, "taken")
		g.Expect(s.Data).To(Equal(map[string][]byte{"password": []byte("hunter2")}))
		g.Expect(s.OwnerReferences).To(BeEmpty())
		g.Expect(storeAccounts(g, stores.AccountPrefix(uidOf(g, store), a.UID))).To(BeEmpty(), "no account made for a Secret it cannot write")

		// Deleting the access leaves the foreign Secret alone.
		deleteAccess(g, ns, "squat")
		g.Expect(secretOf(g, ns, "taken").Data).To(Equal(map[string][]byte{"password": []byte("hunter2")}))
		deleteBucket(g, ns, "mine")
	})

	t.Run("a store type without accounts", func(t *testing.T) {
		g := NewWithT(t)
		plain := newStore("plain-s3", credsSecret)
		plain.Spec.Type = storagev1.StoreTypeS3
		g.Expect(k8s.Create(ctx, plain)).To(Succeed())
		g.Expect(k8s.Create(ctx, newBucket(ns, "plain", "plain-s3"))).To(Succeed())
		eventuallyReason(g, ns, "plain", storagebucket.ReasonHealthy)
		g.Expect(editor.Create(ctx, newAccess(ns, "noacc", "plain", "noacc-creds", storagev1.AccessReadOnly))).To(Succeed())
		a := eventuallyAccessReason(g, ns, "noacc", bucketaccess.ReasonAccessNotSupported)
		g.Expect(conditions.IsTrue(a.Status.Conditions, conditions.Stalled)).To(BeTrue())
		g.Expect(meta.FindStatusCondition(a.Status.Conditions, conditions.Ready).Message).To(ContainSubstring("this store type does not support managed access"))
		g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "noacc-creds"}, &corev1.Secret{}))).To(BeTrue())
		deleteAccess(g, ns, "noacc")
		deleteBucket(g, ns, "plain")
		g.Expect(k8s.Delete(ctx, plain)).To(Succeed())
	})
}

// TestDeletionWaitsForAccesses: a StorageBucket is not deleted from the
// store while BucketAccesses use it, and says which; deleting both at once,
// as a namespace deletion does, revokes the key before the bucket goes.
func TestDeletionWaitsForAccesses(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	store := ensureStore(g)
	ns := newNamespace(t)
	c := direct(g)

	b := newBucket(ns, "held", store)
	b.Spec.DeletionPolicy = storagev1.DeletionDelete
	g.Expect(k8s.Create(ctx, b)).To(Succeed())
	eventuallyReason(g, ns, "held", storagebucket.ReasonHealthy)
	g.Expect(k8s.Create(ctx, newAccess(ns, "user", "held", "held-creds", storagev1.AccessReadWrite))).To(Succeed())
	eventuallyAccessReason(g, ns, "user", bucketaccess.ReasonGranted)
	key := credsOf(g, ns, "held-creds")

	g.Expect(k8s.Delete(ctx, b)).To(Succeed())
	got := eventuallyReason(g, ns, "held", stores.ReasonInUse)
	g.Expect(conditions.IsTrue(got.Status.Conditions, conditions.Stalled)).To(BeTrue(), "the access is not being deleted: a person must act")
	g.Expect(meta.FindStatusCondition(got.Status.Conditions, conditions.Ready).Message).To(ContainSubstring("BucketAccesses user still use this bucket"))
	exists, err := c.BucketExists(ctx, ns+"-held")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exists).To(BeTrue())
	g.Expect(key.put(g, ns+"-held", "still.txt")).To(Succeed(), "the access keeps working meanwhile")
	a := eventuallyAccessReason(g, ns, "user", bucketaccess.ReasonBucketDeleting)
	g.Expect(conditions.IsTrue(a.Status.Conditions, conditions.Stalled)).To(BeTrue())

	// Remove the object so deletionPolicy Delete can finish, then the access.
	mc, err := minio.New(strings.TrimPrefix(s3srv.Direct, "http://"), &minio.Options{Creds: credentials.NewStaticV4(s3srv.AccessKey, s3srv.SecretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mc.RemoveObject(ctx, ns+"-held", "still.txt", minio.RemoveObjectOptions{})).To(Succeed())
	deleteAccess(g, ns, "user")
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(b), &storagev1.StorageBucket{}))
	}, timeout, poll).Should(BeTrue())
	exists, err = c.BucketExists(ctx, ns+"-held")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exists).To(BeFalse())
	g.Expect(storeAccounts(g, stores.AccountPrefix(uidOf(g, store), a.UID))).To(BeEmpty())

	// Both at once, as a namespace deletion: the key is revoked, then the bucket goes.
	b = newBucket(ns, "both", store)
	b.Spec.DeletionPolicy = storagev1.DeletionDelete
	g.Expect(k8s.Create(ctx, b)).To(Succeed())
	eventuallyReason(g, ns, "both", storagebucket.ReasonHealthy)
	g.Expect(k8s.Create(ctx, newAccess(ns, "both", "both", "both-creds", storagev1.AccessReadWrite))).To(Succeed())
	a = eventuallyAccessReason(g, ns, "both", bucketaccess.ReasonGranted)
	g.Expect(k8s.Delete(ctx, b)).To(Succeed())
	g.Expect(k8s.Delete(ctx, a)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(b), &storagev1.StorageBucket{})) &&
			apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(a), &storagev1.BucketAccess{}))
	}, timeout, poll).Should(BeTrue())
	exists, err = c.BucketExists(ctx, ns+"-both")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(exists).To(BeFalse())
	g.Expect(storeAccounts(g, stores.AccountPrefix(uidOf(g, store), a.UID))).To(BeEmpty(), "no account outlives its bucket")
}

// TestSettledAccessCostsNoWrites: an access that is as it should be costs no
// API write and no store write when it is looked at again.
func TestSettledAccessCostsNoWrites(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	quiet := newStore("quiet-s3", credsSecret)
	g.Expect(k8s.Create(ctx, quiet)).To(Succeed())
	ns := newNamespace(t)
	g.Expect(k8s.Create(ctx, newBucket(ns, "calm", "quiet-s3"))).To(Succeed())
	eventuallyReason(g, ns, "calm", storagebucket.ReasonHealthy)
	g.Expect(k8s.Create(ctx, newAccess(ns, "calm", "calm", "calm-creds", storagev1.AccessReadWrite))).To(Succeed())
	eventuallyAccessReason(g, ns, "calm", bucketaccess.ReasonGranted)
	time.Sleep(time.Second)
	holdSweeps(t) // the sweep reads policies too: only the access's count here

	mgrWrites.Reset()
	puts := func() float64 {
		total := 0.0
		for _, op := range []string{"PutBucketPolicy", "IssueKey", "DeleteAccount"} {
			total += testutil.ToFloat64(stores.Requests.WithLabelValues("quiet-s3", op))
		}
		return total
	}
	policyReads := func() float64 {
		return testutil.ToFloat64(stores.Requests.WithLabelValues("quiet-s3", "GetBucketPolicy"))
	}
	putsBefore, readsBefore := puts(), policyReads()
	// A change of the store's spec makes every access of it look again.
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "quiet-s3"}, quiet)).To(Succeed())
	quiet.Spec.AdoptionNamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"nobody": "here"}}
	g.Expect(k8s.Update(ctx, quiet)).To(Succeed())
	g.Eventually(policyReads, timeout, poll).Should(BeNumerically(">", readsBefore), "the access looked again")
	time.Sleep(2 * time.Second)
	_, paths := mgrWrites.Writes()
	var mine []string
	for _, p := range paths {
		if strings.Contains(p, "/namespaces/"+ns+"/") {
			mine = append(mine, p)
		}
	}
	g.Expect(mine).To(BeEmpty(), "no API write for a settled access")
	g.Expect(puts()).To(Equal(putsBefore), "no store write for a settled access")

	deleteAccess(g, ns, "calm")
	deleteBucket(g, ns, "calm")
	g.Expect(k8s.Delete(ctx, quiet)).To(Succeed())
}
