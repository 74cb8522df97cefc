package s3

import (
	"bytes"
	"context"
	"encoding/pem"
	"net"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/trellis-dev/trellis/internal/testenv"
)

// tlsGateway is a versitygw serving S3 and its admin API over TLS, with a
// certificate for 127.0.0.1 that a test CA signed, in region.
func tlsGateway(t *testing.T, region string) (*testenv.S3Server, *testenv.TestCA) {
	t.Helper()
	if !testenv.HaveVersitygw() {
		t.Skip("versitygw not built (run `make tools`)")
	}
	ca, err := testenv.NewTestCA("trellis test CA")
	if err != nil {
		t.Fatal(err)
	}
	cert, key, err := ca.ServerCert(t.TempDir(), net.ParseIP("127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	srv, err := testenv.StartS3With(testenv.S3Options{CertFile: cert, KeyFile: key, Region: region})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	return srv, ca
}

// TestTLSTrustsTheCABundleOnly: over TLS, the S3 client and the admin API
// client trust the store's CA bundle, and only it: no bundle (the system's
// roots) and another CA's are refused with the certificate's failure named,
// and a bundle with no certificate is refused before any request.
func TestTLSTrustsTheCABundleOnly(t *testing.T) {
	srv, ca := tlsGateway(t, "us-east-1")
	other, err := testenv.NewTestCA("another CA")
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Endpoint: srv.Endpoint, Region: "us-east-1", PathStyle: true,
		AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, Timeout: 5 * time.Second}
	tests := []struct {
		name     string
		caBundle []byte
		// reason is Classify's for the failure; "" for success.
		reason  Reason
		message string
	}{
		{name: "the CA that signed the certificate", caBundle: ca.PEM},
		{name: "the CA among others", caBundle: append(append([]byte{}, other.PEM...), ca.PEM...)},
		{name: "no bundle: the system's roots", reason: ReasonCertificateRejected, message: "x509: certificate signed by unknown authority"},
		{name: "another CA", caBundle: other.PEM, reason: ReasonCertificateRejected, message: "x509: certificate signed by unknown authority"},
		{name: "no PEM certificate", caBundle: []byte("not a certificate"), reason: ReasonCABundleInvalid, message: "holds no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			cfg := cfg
			cfg.CABundle = tt.caBundle
			var errS3, errAdmin error
			if c, err := New(cfg); err != nil {
				errS3 = err
			} else {
				errS3 = c.Ping(ctx)
			}
			if a, err := NewVersitygwAccounts(cfg, ""); err != nil {
				errAdmin = err
			} else {
				_, errAdmin = a.ListAccounts(ctx)
			}
			for what, err := range map[string]error{"S3": errS3, "admin API": errAdmin} {
				if tt.reason == "" {
					g.Expect(err).NotTo(HaveOccurred(), what)
					continue
				}
				reason, msg := Classify(err)
				g.Expect(reason).To(Equal(tt.reason), "%s: %v", what, err)
				g.Expect(msg).To(ContainSubstring(tt.message), what)
			}
		})
	}
}

// TestRegionAgainstTheServer: a client that signs for another region than
// the server's is refused where the server checks the region, and the
// refusal says so. versitygw does not check it on ListBuckets (the store
// check) nor CreateBucket; it does on object listings, and answers a
// HeadBucket with a bare 400.
func TestRegionAgainstTheServer(t *testing.T) {
	srv, ca := tlsGateway(t, "eu-test-1")
	ctx := context.Background()
	client := func(g Gomega, region string) Client {
		c, err := New(Config{Endpoint: srv.Endpoint, Region: region, PathStyle: true, CABundle: ca.PEM,
			AccessKey: srv.AccessKey, SecretKey: srv.SecretKey, Timeout: 5 * time.Second})
		g.Expect(err).NotTo(HaveOccurred())
		return c
	}
	g := NewWithT(t)
	right, wrong := client(g, "eu-test-1"), client(g, "us-east-1")
	g.Expect(right.CreateBucket(ctx, "regional")).To(Succeed())
	g.Expect(right.CountObjects(ctx, "regional", 5)).To(Equal(0))

	_, err := wrong.CountObjects(ctx, "regional", 5)
	reason, msg := Classify(err)
	g.Expect(reason).To(Equal(ReasonWrongRegion), "%v", err)
	g.Expect(msg).To(ContainSubstring(`expecting "eu-test-1"`))
	g.Expect(wrong.Ping(ctx)).To(Succeed(), "versitygw does not check the region of a ListBuckets: if it starts to, the store check catches a wrong region and docs/storage.md should say so")
}

// TestCertificatesKeepOnlyCertificates: of a bundle, only its certificates
// are kept, so a private key stored beside them in the object an
// ObjectStore names never reaches a BucketAccess Secret.
func TestCertificatesKeepOnlyCertificates(t *testing.T) {
	g := NewWithT(t)
	ca, err := testenv.NewTestCA("trellis test CA")
	g.Expect(err).NotTo(HaveOccurred())
	dir := t.TempDir()
	certFile, keyFile, err := ca.ServerCert(dir, net.ParseIP("127.0.0.1"))
	g.Expect(err).NotTo(HaveOccurred())
	cert, err := os.ReadFile(certFile)
	g.Expect(err).NotTo(HaveOccurred())
	key, err := os.ReadFile(keyFile)
	g.Expect(err).NotTo(HaveOccurred())

	mixed := bytes.Join([][]byte{[]byte("a comment\n"), key, ca.PEM, []byte("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n"), cert}, nil)
	got, err := Certificates(mixed)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(append(append([]byte{}, ca.PEM...), cert...)))
	g.Expect(string(got)).NotTo(ContainSubstring("PRIVATE KEY"))

	_, err = Certificates(key)
	g.Expect(err).To(MatchError(ErrCABundleNoCertificate), "a key alone is no bundle")

	// Odd forms of a key or of data beside a certificate: each is dropped,
	// and what is kept is only the certificates, re-encoded.
	keyBlock, _ := pem.Decode(key)
	g.Expect(keyBlock).NotTo(BeNil())
	caBlock, _ := pem.Decode(ca.PEM)
	g.Expect(caBlock).NotTo(BeNil())
	relabel := func(b *pem.Block) []byte {
		return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Headers: b.Headers, Bytes: b.Bytes})
	}
	for name, odd := range map[string][]byte{
		"a key labelled CERTIFICATE": relabel(keyBlock),
		"a certificate with headers": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Headers: map[string]string{"Note": string(keyBlock.Bytes[:16])}, Bytes: caBlock.Bytes}),
		"a key after a certificate's DER": pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE",
			Bytes: append(append([]byte{}, caBlock.Bytes...), keyBlock.Bytes...)}),
	} {
		got, err := Certificates(append(append([]byte{}, odd...), cert...))
		g.Expect(err).NotTo(HaveOccurred(), name)
		g.Expect(got).To(Equal(cert), name)
	}
}
