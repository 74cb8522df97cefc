package s3

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestEveryOperationIsCountedOnce: Config.OnRequest hears every operation
// of a client and of the account driver once, by its name, whatever the
// store answers and however many HTTP requests the operation takes (a
// versitygw IssueKey of an account that exists is two calls of the admin API, an
// IssueKey of the IAM driver at least three of the IAM API).
// These names are the op label of trellis_objectstore_requests_total.
func TestEveryOperationIsCountedOnce(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPatch { // the admin API: the account exists
			w.WriteHeader(http.StatusConflict)
			_, _ = w.Write([]byte(`<Error><Code>XAdminUserExists</Code><Message>exists</Message></Error>`))
			return
		}
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	var ops []string
	cfg := Config{Endpoint: srv.URL, Region: "us-east-1", PathStyle: true, AccessKey: fakeAccessKey, SecretKey: "admin-secret",
		Timeout: 2 * time.Second, OnRequest: func(op string) { ops = append(ops, op) }}
	c, err := New(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	a, err := NewVersitygwAccounts(cfg, "")
	g.Expect(err).NotTo(HaveOccurred())
	viaIAM, err := NewIAMAccounts(cfg, "", iamScope)
	g.Expect(err).NotTo(HaveOccurred())

	ctx, b := context.Background(), "bucket"
	calls := []struct {
		op   string
		call func() error
	}{
		{"ListBuckets", func() error { return c.Ping(ctx) }},
		{"HeadBucket", func() error { _, err := c.BucketExists(ctx, b); return err }},
		{"CreateBucket", func() error { return c.CreateBucket(ctx, b) }},
		{"DeleteBucket", func() error { return c.DeleteBucket(ctx, b) }},
		{"GetBucketTagging", func() error { _, err := c.Owner(ctx, b); return err }},
		{"PutBucketTagging", func() error { return c.SetOwner(ctx, b, Owner{UID: "u"}) }},
		{"ListObjects", func() error { _, err := c.CountObjects(ctx, b, 10); return err }},
		{"Probe", func() error { return c.Probe(ctx, b) }},
		{"GetBucketVersioning", func() error { _, err := c.Versioning(ctx, b); return err }},
		{"PutBucketVersioning", func() error { return c.SetVersioning(ctx, b, VersioningEnabled) }},
		{"GetBucketPolicy", func() error { _, err := c.Policy(ctx, b); return err }},
		{"PutBucketPolicy", func() error { return c.SetPolicy(ctx, b, "") }},
		{"GetBucketCors", func() error { _, err := c.CORS(ctx, b); return err }},
		{"PutBucketCors", func() error { return c.SetCORS(ctx, b, nil) }},
		{"GetBucketLifecycle", func() error { _, err := c.Lifecycle(ctx, b); return err }},
		{"PutBucketLifecycle", func() error { return c.SetLifecycle(ctx, b, nil) }},
		{"DeleteAccount", func() error { return a.DeleteAccount(ctx, testAccountA) }},
		{"ListAccounts", func() error { _, err := a.ListAccounts(ctx); return err }},
		{"IssueKey", func() error { _, err := a.IssueKey(ctx, testAccountA); return err }},
		{"IssueKey", func() error { _, err := viaIAM.IssueKey(ctx, iamReader); return err }},
		{"Principal", func() error { _, err := viaIAM.Principal(ctx, iamReader); return err }},
		{"DeleteAccount", func() error { return viaIAM.DeleteAccount(ctx, iamReader) }},
		{"ListAccounts", func() error { _, err := viaIAM.ListAccounts(ctx); return err }},
	}
	for _, tc := range calls {
		ops = nil
		_ = tc.call() // the store fails them all; each is counted all the same
		g.Expect(ops).To(Equal([]string{tc.op}), tc.op)
	}
}
