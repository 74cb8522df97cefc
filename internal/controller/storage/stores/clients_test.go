package stores

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/s3"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// stubClient is an s3.Client the tests tell apart by id; its methods are never called.
type stubClient struct {
	s3.Client
	id int
}

// countingBuilder builds stubClients (and stub account drivers) and counts
// how often it was asked.
type countingBuilder struct {
	calls int
	// hooks are the request counters of the configs built, by store endpoint.
	hooks         []func(op string)
	fail          error
	last          s3.Config
	accountCalls  int
	adminEndpoint string
}

// stubAccounts is an s3.Accounts the tests tell apart by id; never called.
type stubAccounts struct {
	s3.Accounts
	id int
}

func (b *countingBuilder) accounts(cfg s3.Config, store *storagev1.ObjectStore) (s3.Accounts, error) {
	b.accountCalls++
	b.last, b.adminEndpoint = withoutHook(cfg), accountsEndpoint(store)
	return &stubAccounts{id: b.accountCalls}, nil
}

func (b *countingBuilder) build(cfg s3.Config) (s3.Client, error) {
	b.calls++
	b.last = withoutHook(cfg)
	b.hooks = append(b.hooks, cfg.OnRequest)
	if b.fail != nil {
		return nil, b.fail
	}
	return &stubClient{id: b.calls}, nil
}

// withoutHook is cfg without its request counter, which every config of a
// store has (TestStoresCountEveryRequest), so that configs compare.
func withoutHook(cfg s3.Config) s3.Config {
	cfg.OnRequest = nil
	return cfg
}

// secretsReader serves Secrets (and ConfigMaps) from maps, or an error,
// and counts reads of Secrets.
type secretsReader struct {
	client.Reader
	secrets    map[client.ObjectKey]map[string][]byte
	configMaps map[client.ObjectKey]map[string]string
	err        error
	reads      int
}

func (r *secretsReader) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		data, ok := r.configMaps[key]
		if !ok {
			return apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, key.Name)
		}
		cm.Data = data
		return nil
	}
	r.reads++
	if r.err != nil {
		return r.err
	}
	data, ok := r.secrets[key]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, key.Name)
	}
	obj.(*corev1.Secret).Data = data
	return nil
}

const testManagerNS = "trellis-system"

func testStore(name string) *storagev1.ObjectStore {
	return &storagev1.ObjectStore{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1},
		Spec: storagev1.ObjectStoreSpec{Endpoint: "http://127.0.0.1:9000", Region: "us-east-1", PathStyle: ptr.To(true),
			CredentialsSecretRef: storagev1.SecretReference{Namespace: testManagerNS, Name: "creds"}},
	}
}

func newTestStores(secrets *secretsReader, b *countingBuilder) *Clients {
	return NewClients(secrets, testManagerNS, Backends{S3: b.build, Accounts: b.accounts})
}

func keys(access, secret string) map[string][]byte {
	return map[string][]byte{AccessKeyIDKey: []byte(access), SecretAccessKeyKey: []byte(secret)}
}

var credsKey = client.ObjectKey{Namespace: testManagerNS, Name: "creds"}

func TestStoresRefreshRebuildsOnlyOnChange(t *testing.T) {
	tests := map[string]struct {
		change  func(*storagev1.ObjectStore, *secretsReader)
		rebuild bool
	}{
		"nothing":       {change: func(*storagev1.ObjectStore, *secretsReader) {}},
		"rotated key":   {change: func(_ *storagev1.ObjectStore, r *secretsReader) { r.secrets[credsKey] = keys("access", "rotated") }, rebuild: true},
		"other access":  {change: func(_ *storagev1.ObjectStore, r *secretsReader) { r.secrets[credsKey] = keys("other", "secret") }, rebuild: true},
		"endpoint":      {change: func(s *storagev1.ObjectStore, _ *secretsReader) { s.Spec.Endpoint = "https://s3.example.com" }, rebuild: true},
		"region":        {change: func(s *storagev1.ObjectStore, _ *secretsReader) { s.Spec.Region = "eu-west-1" }, rebuild: true},
		"path style":    {change: func(s *storagev1.ObjectStore, _ *secretsReader) { s.Spec.PathStyle = nil }, rebuild: true},
		"bytes shifted": {change: func(_ *storagev1.ObjectStore, r *secretsReader) { r.secrets[credsKey] = keys("accessa", "ecret") }, rebuild: true},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			secrets := &secretsReader{secrets: map[client.ObjectKey]map[string][]byte{credsKey: keys("access", "secret")}}
			b := &countingBuilder{}
			s := newTestStores(secrets, b)
			store := testStore("a")
			ctx := context.Background()

			first, err := s.Refresh(ctx, store)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(b.last).To(Equal(s3.Config{Endpoint: "http://127.0.0.1:9000", Region: "us-east-1", PathStyle: true, AccessKey: "access", SecretKey: "secret"}))

			tt.change(store, secrets)
			got, err := s.Refresh(ctx, store)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(secrets.reads).To(Equal(2), "every refresh reads the Secret again: that is how rotated keys are seen")
			if tt.rebuild {
				g.Expect(b.calls).To(Equal(2))
				g.Expect(got).NotTo(BeIdenticalTo(first))
			} else {
				g.Expect(b.calls).To(Equal(1))
				g.Expect(got).To(BeIdenticalTo(first))
			}
			// Client reuses what Refresh built, without reading the Secret.
			again, err := s.Client(ctx, store)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(again).To(BeIdenticalTo(got))
			g.Expect(secrets.reads).To(Equal(2))
		})
	}
}

// TestStoresReadTheCABundle: the CA bundle is read from the Secret or
// ConfigMap the store names, in its credentials' namespace, and a bundle
// that is missing, lacks its key or holds no certificate is reported as
// such, naming the object, before any client is built.
func TestStoresReadTheCABundle(t *testing.T) {
	ca, err := testenv.NewTestCA("test CA")
	if err != nil {
		t.Fatal(err)
	}
	caKey := client.ObjectKey{Namespace: testManagerNS, Name: "ca"}
	tests := map[string]struct {
		ref        storagev1.CABundleReference
		secret     map[string][]byte
		configMap  map[string]string
		wantReason s3.Reason
		wantMsg    string
	}{
		"ConfigMap, default key": {ref: storagev1.CABundleReference{Kind: storagev1.CABundleConfigMap, Name: "ca"},
			configMap: map[string]string{"ca.crt": string(ca.PEM)}},
		"Secret, named key": {ref: storagev1.CABundleReference{Kind: storagev1.CABundleSecret, Name: "ca", Key: "bundle.pem"},
			secret: map[string][]byte{"bundle.pem": ca.PEM}},
		"ConfigMap missing": {ref: storagev1.CABundleReference{Kind: storagev1.CABundleConfigMap, Name: "ca"},
			wantReason: s3.ReasonCABundleMissing, wantMsg: "the CA bundle's ConfigMap trellis-system/ca does not exist"},
		"Secret missing": {ref: storagev1.CABundleReference{Kind: storagev1.CABundleSecret, Name: "ca"},
			wantReason: s3.ReasonCABundleMissing, wantMsg: "the CA bundle's Secret trellis-system/ca does not exist"},
		"key missing": {ref: storagev1.CABundleReference{Kind: storagev1.CABundleConfigMap, Name: "ca", Key: "ca.crt"},
			configMap: map[string]string{"tls.crt": string(ca.PEM)}, wantReason: s3.ReasonCABundleMissing, wantMsg: "the CA bundle's ConfigMap trellis-system/ca has no key ca.crt"},
		"no certificate": {ref: storagev1.CABundleReference{Kind: storagev1.CABundleSecret, Name: "ca", Key: "ca.crt"},
			secret: map[string][]byte{"ca.crt": []byte("-----BEGIN NOTHING-----")}, wantReason: s3.ReasonCABundleInvalid,
			wantMsg: "the CA bundle's Secret trellis-system/ca, key ca.crt, holds no PEM certificate"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := &secretsReader{secrets: map[client.ObjectKey]map[string][]byte{credsKey: keys("access", "secret")},
				configMaps: map[client.ObjectKey]map[string]string{}}
			if tt.secret != nil {
				r.secrets[caKey] = tt.secret
			}
			if tt.configMap != nil {
				r.configMaps[caKey] = tt.configMap
			}
			b := &countingBuilder{}
			s := newTestStores(r, b)
			store := testStore("a")
			store.Spec.Endpoint = "https://127.0.0.1:9000"
			store.Spec.CABundleRef = tt.ref
			_, err := s.Refresh(context.Background(), store)
			if tt.wantReason == "" {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(b.last.CABundle).To(Equal(ca.PEM))
				return
			}
			reason, msg := ClassifyError(err)
			g.Expect(reason).To(Equal(tt.wantReason), "%v", err)
			g.Expect(msg).To(Equal(tt.wantMsg))
			g.Expect(NeedsPerson(reason)).To(BeTrue(), "a person must fix the bundle: the store is Stalled")
			g.Expect(b.calls).To(BeZero(), "no client is built with a bundle that cannot be read")
		})
	}
}

// TestStoresRebuildOnANewCABundle: a change of the bundle's content
// rebuilds the store's clients at the next check, and CABundle (what the
// BucketAccess Secrets carry) is the new bundle; the same content keeps
// them. That the Secrets follow is TestObjectStoreOverTLS's.
func TestStoresRebuildOnANewCABundle(t *testing.T) {
	g := NewWithT(t)
	ca, err := testenv.NewTestCA("test CA")
	g.Expect(err).NotTo(HaveOccurred())
	renewed, err := testenv.NewTestCA("renewed CA")
	g.Expect(err).NotTo(HaveOccurred())
	caKey := client.ObjectKey{Namespace: testManagerNS, Name: "ca"}
	r := &secretsReader{secrets: map[client.ObjectKey]map[string][]byte{credsKey: keys("access", "secret")},
		configMaps: map[client.ObjectKey]map[string]string{caKey: {"ca.crt": string(ca.PEM)}}}
	b := &countingBuilder{}
	s := newTestStores(r, b)
	store := testStore("a")
	store.Spec.Endpoint = "https://127.0.0.1:9000"
	store.Spec.CABundleRef = storagev1.CABundleReference{Kind: storagev1.CABundleConfigMap, Name: "ca"}
	ctx := context.Background()

	first, err := s.Refresh(ctx, store)
	g.Expect(err).NotTo(HaveOccurred())
	same, err := s.Refresh(ctx, store)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(same).To(BeIdenticalTo(first), "the same bundle keeps the clients")

	r.configMaps[caKey] = map[string]string{"ca.crt": string(ca.PEM) + string(renewed.PEM)}
	got, err := s.Refresh(ctx, store)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).NotTo(BeIdenticalTo(first), "a new bundle rebuilds the clients")
	g.Expect(b.last.CABundle).To(Equal(append(append([]byte{}, ca.PEM...), renewed.PEM...)))
	g.Expect(s.CABundle(ctx, store)).To(Equal(b.last.CABundle))
}

func TestStoresClientBuildsWhenNoCheckHasYet(t *testing.T) {
	g := NewWithT(t)
	secrets := &secretsReader{secrets: map[client.ObjectKey]map[string][]byte{credsKey: keys("access", "secret")}}
	b := &countingBuilder{}
	s := newTestStores(secrets, b)
	ctx := context.Background()

	a, err := s.Client(ctx, testStore("a"))
	g.Expect(err).NotTo(HaveOccurred())
	other, err := s.Client(ctx, testStore("b"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(other).NotTo(BeIdenticalTo(a), "each store has its own client")
	g.Expect(b.calls).To(Equal(2))

	s.Forget("a")
	_, err = s.Client(ctx, testStore("a"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.calls).To(Equal(3), "a forgotten store is built again")
}

// TestStoresCountEveryRequest: the clients of a store count what they send
// under its name in trellis_objectstore_requests_total.
func TestStoresCountEveryRequest(t *testing.T) {
	g := NewWithT(t)
	secrets := &secretsReader{secrets: map[client.ObjectKey]map[string][]byte{credsKey: keys("access", "secret")}}
	b := &countingBuilder{}
	s := newTestStores(secrets, b)
	_, err := s.Client(context.Background(), testStore("counted-a"))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = s.Client(context.Background(), testStore("counted-b"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.hooks).To(HaveLen(2))
	before := testutil.ToFloat64(Requests.WithLabelValues("counted-a", "HeadBucket"))
	b.hooks[0]("HeadBucket")
	g.Expect(testutil.ToFloat64(Requests.WithLabelValues("counted-a", "HeadBucket"))).To(Equal(before + 1))
	g.Expect(testutil.ToFloat64(Requests.WithLabelValues("counted-b", "HeadBucket"))).To(BeZero())
	Requests.DeleteLabelValues("counted-a", "HeadBucket")
	Requests.DeleteLabelValues("counted-b", "HeadBucket")
}

func TestStoresAccountDrivers(t *testing.T) {
	g := NewWithT(t)
	secrets := &secretsReader{secrets: map[client.ObjectKey]map[string][]byte{credsKey: keys("access", "secret")}}
	b := &countingBuilder{}
	s := newTestStores(secrets, b)
	ctx := context.Background()

	plain := testStore("plain")
	_, err := s.Accounts(ctx, plain)
	g.Expect(err).To(MatchError(s3.ErrAccessNotSupported))
	reason, msg := ClassifyError(err)
	g.Expect(reason).To(Equal(s3.ReasonNotSupported))
	g.Expect(msg).To(Equal("this store type does not support managed access"))
	g.Expect(b.accountCalls).To(BeZero(), "an S3 store has no account driver")

	vgw := testStore("vgw")
	vgw.Spec.Type = storagev1.StoreTypeVersitygw
	a, err := s.Accounts(ctx, vgw)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(a).NotTo(BeNil())
	g.Expect(b.adminEndpoint).To(BeEmpty(), "the admin API on the S3 endpoint")
	again, err := s.Accounts(ctx, vgw)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(BeIdenticalTo(a))

	vgw.Spec.Versitygw = &storagev1.VersitygwOptions{AdminEndpoint: "http://127.0.0.1:7071"}
	_, err = s.Refresh(ctx, vgw)
	g.Expect(err).NotTo(HaveOccurred())
	moved, err := s.Accounts(ctx, vgw)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(moved).NotTo(BeIdenticalTo(a), "a new admin endpoint rebuilds the driver")
	g.Expect(b.adminEndpoint).To(Equal("http://127.0.0.1:7071"))

	iam := testStore("iam")
	iam.Spec.Type, iam.Spec.IAM = storagev1.StoreTypeIAM, &storagev1.IAMOptions{Endpoint: "https://iam.example.com"}
	_, err = s.Accounts(ctx, iam)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.adminEndpoint).To(Equal("https://iam.example.com"), "the IAM API on its own URL")

	// A store that became a versitygw since its client was built gets a driver.
	_, err = s.Client(ctx, plain)
	g.Expect(err).NotTo(HaveOccurred())
	plain.Spec.Type = storagev1.StoreTypeVersitygw
	got, err := s.Accounts(ctx, plain)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).NotTo(BeNil())
}

// TestNewAccountsPicksTheDriverByType: the store's type picks its driver,
// and an IAM store's driver manages only the names with the store's mark
// (its UID's), never those of another ObjectStore on the same server.
func TestNewAccountsPicksTheDriverByType(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	cfg := s3.Config{Endpoint: "http://127.0.0.1:1", AccessKey: "access", SecretKey: "secret"}
	store := func(typ storagev1.StoreType, uid types.UID) *storagev1.ObjectStore {
		o := testStore("s")
		o.UID, o.Spec.Type = uid, typ
		return o
	}
	mine, theirs := AccountName("uid-1", "uid-access", 1), AccountName("uid-2", "uid-access", 1)

	_, err := NewAccounts(cfg, store(storagev1.StoreTypeS3, "uid-1"))
	g.Expect(err).To(MatchError(s3.ErrAccessNotSupported))

	vgw, err := NewAccounts(cfg, store(storagev1.StoreTypeVersitygw, "uid-1"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(vgw.Principal(ctx, mine)).To(Equal(mine), "versitygw names the account by its key id")

	iam, err := NewAccounts(cfg, store(storagev1.StoreTypeIAM, "uid-1"))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = iam.Principal(ctx, theirs)
	g.Expect(err).To(MatchError(ContainSubstring("is not one of this ObjectStore's")), "another store's mark is refused before any request")
	_, err = iam.Principal(ctx, mine)
	g.Expect(err).To(HaveOccurred(), "its own name is asked of the server, which is not there")
	g.Expect(err.Error()).NotTo(ContainSubstring("is not one of this ObjectStore's"))

	minio, err := NewAccounts(cfg, store(storagev1.StoreTypeMinIO, "uid-1"))
	g.Expect(err).NotTo(HaveOccurred())
	_, byAccount := minio.(s3.AccountGrants)
	g.Expect(byAccount).To(BeTrue(), "MinIO grants each account by its own policy")
	_, err = minio.Principal(ctx, theirs)
	g.Expect(err).To(MatchError(ContainSubstring("is not one of this ObjectStore's")), "another store's mark is refused")
	_, err = minio.Principal(ctx, mine)
	g.Expect(err).To(MatchError(s3.ErrNoPrincipal))
	g.Expect(GrantsByAccount(store(storagev1.StoreTypeMinIO, "uid-1"))).To(BeTrue())
	g.Expect(GrantsByAccount(store(storagev1.StoreTypeIAM, "uid-1"))).To(BeFalse())
}

func TestStoresLockPolicySerialises(t *testing.T) {
	g := NewWithT(t)
	s := newTestStores(&secretsReader{}, &countingBuilder{})
	unlock := s.LockPolicy("a", "bucket")
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.LockPolicy("a", "bucket")()
	}()
	g.Consistently(done, 100*time.Millisecond).ShouldNot(BeClosed(), "the same bucket waits")
	other := s.LockPolicy("a", "other-bucket") // another bucket does not
	other()
	unlock()
	g.Eventually(done).Should(BeClosed())
}

func TestStoresCredentialErrors(t *testing.T) {
	tests := map[string]struct {
		store   func(*storagev1.ObjectStore)
		secrets *secretsReader
		build   error
		want    string
	}{
		"secret in another namespace": {
			store:   func(s *storagev1.ObjectStore) { s.Spec.CredentialsSecretRef.Namespace = "team-a" },
			secrets: &secretsReader{},
			want:    "must be in the manager's namespace trellis-system, not team-a",
		},
		"secret missing": {
			secrets: &secretsReader{},
			want:    "the credentials Secret does not exist: trellis-system/creds",
		},
		"secret forbidden": {
			secrets: &secretsReader{err: apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "creds", errors.New("no"))},
			want:    "the manager may not read the credentials Secret: trellis-system/creds",
		},
		"keys missing": {
			secrets: &secretsReader{secrets: map[client.ObjectKey]map[string][]byte{credsKey: {"wrong": []byte("x")}}},
			build:   s3.ErrCredentialsIncomplete,
			want:    "needs the keys accessKeyID and secretAccessKey",
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			s := newTestStores(tt.secrets, &countingBuilder{fail: tt.build})
			store := testStore("a")
			if tt.store != nil {
				tt.store(store)
			}
			_, err := s.Refresh(context.Background(), store)
			g.Expect(err).To(HaveOccurred())
			reason, msg := ClassifyError(err)
			g.Expect(reason).To(Equal(s3.ReasonCredentialsMissing))
			g.Expect(msg).To(ContainSubstring(tt.want))
			g.Expect(NeedsPerson(reason)).To(BeTrue())
		})
	}

	t.Run("another error of the API server is passed on", func(t *testing.T) {
		g := NewWithT(t)
		s := newTestStores(&secretsReader{err: apierrors.NewServiceUnavailable("etcd")}, &countingBuilder{})
		_, err := s.Refresh(context.Background(), testStore("a"))
		g.Expect(apierrors.IsServiceUnavailable(err)).To(BeTrue(), "got %v", err)
	})
}
