package storage

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// tlsRegion is the region the TLS versitygw serves: not the default, so
// that a store works only with the region it names.
const tlsRegion = "eu-test-1"

// httpsEndpoint is a store's https endpoint that no test connects to.
const httpsEndpoint = "https://s3.example.com"

// TestObjectStoreOverTLS: a versitygw serving S3 and its admin API over
// TLS, with a certificate for 127.0.0.1 that a test CA signed. A store
// naming that CA is Ready, its bucket is made, and a BucketAccess's Secret
// carries the CA with a key that works from the Secret alone; a store
// without the CA, or with another, or whose bundle is missing or holds no
// certificate, is Stalled and says which; the bundle fixed makes the store
// Ready again without a restart.
func TestObjectStoreOverTLS(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ca, err := testenv.NewTestCA("trellis test CA")
	g.Expect(err).NotTo(HaveOccurred())
	other, err := testenv.NewTestCA("another CA")
	g.Expect(err).NotTo(HaveOccurred())
	certFile, keyFile, err := ca.ServerCert(t.TempDir(), net.ParseIP("127.0.0.1"))
	g.Expect(err).NotTo(HaveOccurred())
	srv, err := testenv.StartS3With(testenv.S3Options{CertFile: certFile, KeyFile: keyFile, Region: tlsRegion})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(srv.Close)

	create := func(obj client.Object) {
		t.Helper()
		g.Expect(k8s.Create(ctx, obj)).To(Succeed())
		t.Cleanup(func() { _ = k8s.Delete(context.Background(), obj) })
	}
	create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: managerNS, Name: "tls-s3"},
		Data: map[string][]byte{stores.AccessKeyIDKey: []byte(srv.AccessKey), stores.SecretAccessKeyKey: []byte(srv.SecretKey)}})
	create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: managerNS, Name: "tls-ca"}, Data: map[string]string{"ca.crt": string(ca.PEM)}})
	create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: managerNS, Name: "tls-other-ca"}, Data: map[string][]byte{"ca.crt": other.PEM}})
	create(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: managerNS, Name: "tls-no-pem"}, Data: map[string]string{"ca.crt": "not a certificate"}})
	fixable := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: managerNS, Name: "tls-fixable-ca"}, Data: map[string]string{"ca.crt": string(other.PEM)}}
	create(fixable)

	tlsStore := func(name string, ref storagev1.CABundleReference) *storagev1.ObjectStore {
		return &storagev1.ObjectStore{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: storagev1.ObjectStoreSpec{
				Type: storagev1.StoreTypeVersitygw, Endpoint: srv.Endpoint, Region: tlsRegion, PathStyle: ptr.To(true),
				CredentialsSecretRef: storagev1.SecretReference{Namespace: managerNS, Name: "tls-s3"},
				CABundleRef:          ref, NamespaceSelector: everyNamespace,
			},
		}
	}
	configMap := func(name, key string) storagev1.CABundleReference {
		return storagev1.CABundleReference{Kind: storagev1.CABundleConfigMap, Name: name, Key: key}
	}
	const unknownAuthority = "x509: certificate signed by unknown authority"
	tests := []struct {
		store *storagev1.ObjectStore
		// reason of Ready; Reachable is Ready, any other Stalled.
		reason, message string
	}{
		{store: tlsStore("tls-trusted", configMap("tls-ca", "")), reason: "Reachable"},
		{store: tlsStore("tls-no-ca", storagev1.CABundleReference{}), reason: string(s3.ReasonCertificateRejected), message: unknownAuthority},
		{store: tlsStore("tls-wrong-ca", storagev1.CABundleReference{Kind: storagev1.CABundleSecret, Name: "tls-other-ca"}),
			reason: string(s3.ReasonCertificateRejected), message: unknownAuthority},
		{store: tlsStore("tls-ca-missing", configMap("tls-nothing", "")),
			reason: string(s3.ReasonCABundleMissing), message: "the CA bundle's ConfigMap " + managerNS + "/tls-nothing does not exist"},
		{store: tlsStore("tls-ca-no-key", configMap("tls-ca", "bundle.pem")),
			reason: string(s3.ReasonCABundleMissing), message: "the CA bundle's ConfigMap " + managerNS + "/tls-ca has no key bundle.pem"},
		{store: tlsStore("tls-ca-no-pem", configMap("tls-no-pem", "")),
			reason: string(s3.ReasonCABundleInvalid), message: "the CA bundle's ConfigMap " + managerNS + "/tls-no-pem, key ca.crt, holds no PEM certificate"},
		{store: tlsStore("tls-fixable", configMap("tls-fixable-ca", "")), reason: string(s3.ReasonCertificateRejected), message: unknownAuthority},
	}
	for _, tt := range tests {
		create(tt.store)
	}
	for _, tt := range tests {
		t.Run(tt.store.Name, func(t *testing.T) {
			eventuallyStore(NewWithT(t), tt.store.Name, tt.reason, tt.message, timeout)
		})
	}

	t.Run("a bucket and a key over TLS", func(t *testing.T) {
		g := NewWithT(t)
		ns := newNamespace(t)
		g.Expect(k8s.Create(ctx, newBucket(ns, "data", "tls-trusted"))).To(Succeed())
		eventuallyReason(g, ns, "data", storagebucket.ReasonHealthy)
		root, err := s3.New(s3.Config{Endpoint: srv.Direct, Region: tlsRegion, PathStyle: true, CABundle: ca.PEM,
			AccessKey: srv.AccessKey, SecretKey: srv.SecretKey})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(root.BucketExists(ctx, ns+"-data")).To(BeTrue(), "the bucket is in the TLS versitygw")

		g.Expect(k8s.Create(ctx, newAccess(ns, "app", "data", "app-s3", storagev1.AccessReadWrite))).To(Succeed())
		eventuallyAccessReason(g, ns, "app", bucketaccess.ReasonGranted)
		s := secretOf(g, ns, "app-s3")
		g.Expect(s.Data).To(HaveKeyWithValue("ca.crt", ca.PEM), "the store's CA, for the app to trust")
		app := workloadFromSecret(g, s)
		_, err = app.PutObject(ctx, ns+"-data", "hello.txt", bytes.NewReader([]byte("hello")), 5, minio.PutObjectOptions{})
		g.Expect(err).NotTo(HaveOccurred(), "the key works over TLS, with the Secret's CA")
		obj, err := app.GetObject(ctx, ns+"-data", "hello.txt", minio.GetObjectOptions{})
		g.Expect(err).NotTo(HaveOccurred())
		got, err := io.ReadAll(obj)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(got)).To(Equal("hello"))

		deleteAccess(g, ns, "app")
		deleteBucket(g, ns, "data")
	})

	t.Run("a new bundle reaches the BucketAccess Secrets at the store's next check", func(t *testing.T) {
		// The platform team rotates the CA: the new one joins the bundle.
		// The store stays Ready, so nothing the BucketAccess watches in it
		// changes: the Secrets must follow the clients all the same, not
		// at their next check (10 minutes), or an app keeps trusting only
		// the old CA after the store's certificate is renewed.
		g := NewWithT(t)
		renewed, err := testenv.NewTestCA("renewed CA")
		g.Expect(err).NotTo(HaveOccurred())
		bundle := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: managerNS, Name: "tls-rotating-ca"}, Data: map[string]string{"ca.crt": string(ca.PEM)}}
		create(bundle)
		create(tlsStore("tls-rotating", configMap("tls-rotating-ca", "")))
		eventuallyStore(g, "tls-rotating", "Reachable", "", timeout)
		ns := newNamespace(t)
		g.Expect(k8s.Create(ctx, newBucket(ns, "data", "tls-rotating"))).To(Succeed())
		eventuallyReason(g, ns, "data", storagebucket.ReasonHealthy)
		g.Expect(k8s.Create(ctx, newAccess(ns, "app", "data", "app-s3", storagev1.AccessReadWrite))).To(Succeed())
		eventuallyAccessReason(g, ns, "app", bucketaccess.ReasonGranted)
		g.Expect(secretOf(g, ns, "app-s3").Data).To(HaveKeyWithValue("ca.crt", ca.PEM))

		both := append(append([]byte{}, ca.PEM...), renewed.PEM...)
		bundle.Data["ca.crt"] = string(both)
		g.Expect(k8s.Update(ctx, bundle)).To(Succeed())
		store := &storagev1.ObjectStore{ObjectMeta: metav1.ObjectMeta{Name: "tls-rotating"}}
		mergePatch(g, store, `{"metadata":{"annotations":{"reconcile.fluxcd.io/requestedAt":"rotated"}}}`)
		g.Eventually(func(g Gomega) string {
			return string(secretOf(g, ns, "app-s3").Data["ca.crt"])
		}, timeout, poll).Should(Equal(string(both)), "the Secret carries the bundle the store's clients trust")

		// The same bundle again costs the Secret nothing.
		mgrWrites.Reset()
		mergePatch(g, store, `{"metadata":{"annotations":{"reconcile.fluxcd.io/requestedAt":"unchanged"}}}`)
		access := &storagev1.BucketAccess{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}}
		mergePatch(g, access, `{"metadata":{"annotations":{"reconcile.fluxcd.io/requestedAt":"unchanged"}}}`)
		g.Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(store), store)).To(Succeed())
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(access), access)).To(Succeed())
			g.Expect(store.Status.LastHandledReconcileAt).To(Equal("unchanged"))
			g.Expect(access.Status.LastHandledReconcileAt).To(Equal("unchanged"))
		}, timeout, poll).Should(Succeed())
		_, paths := mgrWrites.Writes()
		g.Expect(paths).NotTo(ContainElement(ContainSubstring("/secrets/app-s3")))

		deleteAccess(g, ns, "app")
		deleteBucket(g, ns, "data")
	})

	t.Run("the bundle fixed, the store is Ready", func(t *testing.T) {
		g := NewWithT(t)
		cm := &corev1.ConfigMap{}
		g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(fixable), cm)).To(Succeed())
		cm.Data["ca.crt"] = string(ca.PEM)
		g.Expect(k8s.Update(ctx, cm)).To(Succeed())
		// The next check of its back-off (5 s, 10 s ...) reads the new bundle.
		eventuallyStore(g, "tls-fixable", "Reachable", "", time.Minute)
	})
}

// eventuallyStore waits for the store's Ready reason: Reachable and
// Ready, or any other reason, with the message, and Stalled.
func eventuallyStore(g Gomega, name, reason, message string, within time.Duration) {
	g.Eventually(func(g Gomega) {
		st := &storagev1.ObjectStore{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Name: name}, st)).To(Succeed())
		c := meta.FindStatusCondition(st.Status.Conditions, conditions.Ready)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(reason), "message: %s", c.Message)
		g.Expect(c.Message).To(ContainSubstring(message))
		if reason == "Reachable" {
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			return
		}
		g.Expect(meta.IsStatusConditionTrue(st.Status.Conditions, conditions.Stalled)).To(BeTrue(), "a person must act: %+v", st.Status.Conditions)
	}, within, poll).Should(Succeed())
}

// workloadFromSecret is an S3 client built as an application builds it,
// from its BucketAccess Secret alone: endpoint, region, addressing, key,
// and the CA it mounts (ca.crt) as its only root.
func workloadFromSecret(g Gomega, s *corev1.Secret) *minio.Client {
	u, err := url.Parse(string(s.Data["AWS_ENDPOINT_URL_S3"]))
	g.Expect(err).NotTo(HaveOccurred())
	roots := x509.NewCertPool()
	g.Expect(roots.AppendCertsFromPEM(s.Data["ca.crt"])).To(BeTrue())
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	lookup := minio.BucketLookupDNS
	if pathStyle, _ := strconv.ParseBool(string(s.Data["S3_FORCE_PATH_STYLE"])); pathStyle {
		lookup = minio.BucketLookupPath
	}
	mc, err := minio.New(u.Host, &minio.Options{
		Creds:  credentials.NewStaticV4(string(s.Data["AWS_ACCESS_KEY_ID"]), string(s.Data["AWS_SECRET_ACCESS_KEY"]), ""),
		Secure: u.Scheme == "https", Region: string(s.Data["AWS_REGION"]), BucketLookup: lookup,
		Transport: transport, MaxRetries: 1,
	})
	g.Expect(err).NotTo(HaveOccurred())
	return mc
}

// TestCABundleNeedsHTTPS: the API server refuses a CA bundle on an http://
// endpoint, where it would trust nothing: the S3 endpoint's, and an admin
// API's served apart, which carries the keys Trellis makes.
func TestCABundleNeedsHTTPS(t *testing.T) {
	g := NewWithT(t)
	store := newStore("ca-over-http", credsSecret)
	store.Spec.CABundleRef = storagev1.CABundleReference{Kind: storagev1.CABundleConfigMap, Name: "ca"}
	err := k8s.Create(context.Background(), store)
	g.Expect(err).To(MatchError(ContainSubstring("caBundleRef needs an https:// endpoint")))

	for name, admin := range map[string]func(*storagev1.ObjectStoreSpec){
		"versitygw": func(s *storagev1.ObjectStoreSpec) {
			s.Type, s.Versitygw = storagev1.StoreTypeVersitygw, &storagev1.VersitygwOptions{AdminEndpoint: "http://s3.example.com:7071"}
		},
		"iam": func(s *storagev1.ObjectStoreSpec) {
			s.Type, s.IAM = storagev1.StoreTypeIAM, &storagev1.IAMOptions{Endpoint: "http://iam.example.com"}
		},
		"minio": func(s *storagev1.ObjectStoreSpec) {
			s.Type, s.MinIO = storagev1.StoreTypeMinIO, &storagev1.MinIOOptions{AdminEndpoint: "http://s3.example.com:9001"}
		},
	} {
		t.Run("admin API over http, "+name, func(t *testing.T) {
			g := NewWithT(t)
			store := newStore("ca-admin-over-http", credsSecret)
			store.Spec.Endpoint = httpsEndpoint
			store.Spec.CABundleRef = storagev1.CABundleReference{Kind: storagev1.CABundleConfigMap, Name: "ca"}
			admin(&store.Spec)
			err := k8s.Create(context.Background(), store, client.DryRunAll)
			g.Expect(err).To(MatchError(ContainSubstring("caBundleRef needs an https:// endpoint")))
		})
	}

	store.Spec.CABundleRef.Kind = "Pod"
	store.Spec.Endpoint = httpsEndpoint
	err = k8s.Create(context.Background(), store)
	g.Expect(err).To(MatchError(ContainSubstring(`Unsupported value: "Pod"`)))
}
