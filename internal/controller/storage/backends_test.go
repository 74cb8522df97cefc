package storage

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/s3"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// backend is an S3 server with accounts that the tests attacking keys run
// against: one table, the backend a column. Each promise about keys
// (scope, rotation, revocation) is checked on each.
type backend struct {
	name string
	// noPolicyGrants, when set, says why a bucket policy naming a key
	// grants it nothing on this backend: the rows that forge such a grant
	// do not apply, and say so.
	noPolicyGrants string
	// store makes an ObjectStore on the backend, Ready and open to every
	// namespace, for one test.
	store func(t *testing.T, g Gomega) storeOn
}

// storeOn is an ObjectStore on one backend, and the test's own ways into
// its server, past Trellis.
type storeOn struct {
	name string
	// endpoint is the ObjectStore's (what the Secret says); direct is the
	// server's own, for the test's clients (versitygw's endpoint is a
	// counting proxy).
	endpoint, direct string
	root             s3.Config
	// asAdmin is the store's account driver with the given keys.
	asAdmin func(accessKey, secretKey string) (s3.Accounts, error)
	// settle is how long the server may take to apply a key or a bucket
	// policy after Trellis wrote it (0: it applies it before it answers).
	settle time.Duration
}

// applied checks what a key may do once the server has applied what
// Trellis wrote: at once where it applies it before it answers (versitygw),
// within settle where it applies it later (SeaweedFS).
func (on storeOn) applied(g Gomega, check func(g Gomega)) {
	if on.settle == 0 {
		check(g)
		return
	}
	g.Eventually(check, on.settle, poll).Should(Succeed())
}

var accessBackends = []backend{
	{name: "versitygw", store: func(_ *testing.T, g Gomega) storeOn {
		name := ensureStore(g)
		return storeOn{name: name, endpoint: s3srv.Endpoint, direct: s3srv.Direct, root: testS3Config(),
			asAdmin: func(access, secret string) (s3.Accounts, error) {
				return s3.NewVersitygwAccounts(s3.Config{Endpoint: s3srv.Direct, Region: "us-east-1", AccessKey: access, SecretKey: secret}, "")
			}}
	}},
	{name: "SeaweedFS", store: seaweedStore},
	{name: "MinIO", store: minioStore,
		noPolicyGrants: "MinIO applies bucket policies to anonymous requests only: a statement naming a key grants it nothing, " +
			"so a forged one cannot work (TestMinIOAccounts); each key's grant is its MinIO user's own policy, put back at each check " +
			"(TestMinIOAccounts, TestAccessSyncGrantsByAccount), and every TrellisAccess statement leaves the bucket's policy (TestLiveGrants)"},
}

// seaweed is the suite's SeaweedFS, started by the first test that needs
// it and stopped as the suite ends (stopSeaweedFS): one start, not one per
// test.
var seaweed struct {
	once sync.Once
	sw   *testenv.SeaweedFS
	stop func()
	dir  string
	err  error
}

func sharedSeaweedFS(t *testing.T) *testenv.SeaweedFS {
	t.Helper()
	if !testenv.HaveSeaweedFS() {
		t.Skip("SeaweedFS not built (make seaweedfs)")
	}
	seaweed.once.Do(func() {
		if seaweed.dir, seaweed.err = os.MkdirTemp("", "trellis-seaweedfs-"); seaweed.err == nil {
			seaweed.sw, seaweed.stop, seaweed.err = testenv.RunSeaweedFS(seaweed.dir)
		}
	})
	if seaweed.err != nil {
		t.Fatal(seaweed.err)
	}
	return seaweed.sw
}

func stopSeaweedFS() {
	if seaweed.stop != nil {
		seaweed.stop()
	}
	if seaweed.dir != "" {
		_ = os.RemoveAll(seaweed.dir)
	}
}

// seaweedStore is the suite's ObjectStore of type IAM on the suite's
// SeaweedFS (its IAM API on the S3 endpoint), made once.
func seaweedStore(t *testing.T, g Gomega) storeOn {
	sw := sharedSeaweedFS(t)
	on := serverStore(g, "seaweed-s3", storagev1.StoreTypeIAM, sw.Endpoint, sw.AccessKey, sw.SecretKey)
	// SeaweedFS's S3 gateway learns keys and bucket policies from its
	// filer's metadata events, a moment after its IAM and S3 APIs answered.
	on.settle = 10 * time.Second
	return on
}

// minio is the suite's MinIO, started by the first test that needs it and
// stopped as the suite ends (stopMinIO), as seaweed is.
var minioSrv struct {
	once sync.Once
	m    *testenv.MinIO
	stop func()
	dir  string
	err  error
}

func sharedMinIO(t *testing.T) *testenv.MinIO {
	t.Helper()
	if !testenv.HaveMinIO() {
		t.Skip("MinIO not built (make minio)")
	}
	minioSrv.once.Do(func() {
		if minioSrv.dir, minioSrv.err = os.MkdirTemp("", "trellis-minio-"); minioSrv.err == nil {
			minioSrv.m, minioSrv.stop, minioSrv.err = testenv.RunMinIO(minioSrv.dir)
		}
	})
	if minioSrv.err != nil {
		t.Fatal(minioSrv.err)
	}
	return minioSrv.m
}

func stopMinIO() {
	if minioSrv.stop != nil {
		minioSrv.stop()
	}
	if minioSrv.dir != "" {
		_ = os.RemoveAll(minioSrv.dir)
	}
}

// minioStore is the suite's ObjectStore of type MinIO on the suite's MinIO
// (its admin API on the S3 endpoint), made once. MinIO applies users and
// their policies before it answers.
func minioStore(t *testing.T, g Gomega) storeOn {
	m := sharedMinIO(t)
	return serverStore(g, "minio-s3", storagev1.StoreTypeMinIO, m.Endpoint, m.AccessKey, m.SecretKey)
}

// serverStore makes, once, an ObjectStore of the type on a server the
// suite started, with its admin's keys, and waits until it is Ready.
func serverStore(g Gomega, name string, typ storagev1.StoreType, endpoint, access, secretKey string) storeOn {
	ctx := context.Background()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: managerNS, Name: name},
		Data: map[string][]byte{stores.AccessKeyIDKey: []byte(access), stores.SecretAccessKeyKey: []byte(secretKey)}}
	if err := k8s.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	store := &storagev1.ObjectStore{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: storagev1.ObjectStoreSpec{
			Type:     typ,
			Endpoint: endpoint, Region: "us-east-1", PathStyle: ptr.To(true),
			CredentialsSecretRef: storagev1.SecretReference{Namespace: managerNS, Name: name},
			NamespaceSelector:    everyNamespace,
		},
	}
	if err := k8s.Create(ctx, store); err != nil && !apierrors.IsAlreadyExists(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Eventually(func(g Gomega) {
		st := &storagev1.ObjectStore{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Name: name}, st)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(st.Status.Conditions, conditions.Ready)).To(BeTrue(), "%+v", st.Status)
		store = st
	}, timeout, poll).Should(Succeed())
	root := s3.Config{Endpoint: endpoint, Region: "us-east-1", PathStyle: true, AccessKey: access, SecretKey: secretKey}
	return storeOn{name: name, endpoint: endpoint, direct: endpoint, root: root,
		asAdmin: func(access, secret string) (s3.Accounts, error) {
			cfg := root
			cfg.AccessKey, cfg.SecretKey = access, secret
			return stores.NewAccounts(cfg, store)
		}}
}

// accounts lists the store's accounts with the prefix, as its admin sees them.
func (on storeOn) accounts(g Gomega, prefix string) []string {
	a, err := on.asAdmin(on.root.AccessKey, on.root.SecretKey)
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

// putAsRoot writes a small object as the server's admin.
func (on storeOn) putAsRoot(g Gomega, bucket, key string) {
	mc, err := minio.New(strings.TrimPrefix(on.direct, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(on.root.AccessKey, on.root.SecretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath,
		MaxRetries: 1, // a failure shows at once, not after minutes of back-off
	})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = mc.PutObject(context.Background(), bucket, key, bytes.NewReader([]byte("data")), 4, minio.PutObjectOptions{})
	g.Expect(err).NotTo(HaveOccurred())
}

// client is an S3 client of the server's admin.
func (on storeOn) client(g Gomega) s3.Client {
	c, err := s3.New(on.root)
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

// policy reads a bucket's policy as the server's admin.
func (on storeOn) policy(g Gomega, bucket string) string {
	p, err := on.client(g).Policy(context.Background(), bucket)
	g.Expect(err).NotTo(HaveOccurred())
	return p
}

// creds reads a BucketAccess's Secret, for a workload talking to the
// server straight.
func (on storeOn) creds(g Gomega, ns, secret string) creds {
	c := credsOf(g, ns, secret)
	c.direct = on.direct
	return c
}

// accountOf is the store account of the key an access's status records.
func accountOf(a *storagev1.BucketAccess) string {
	k, _ := stores.CurrentKey(&a.Status)
	return k.AccountName()
}
