package s3

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	. "github.com/onsi/gomega"
)

const (
	testAccountA = "TRELLISTESTACCOUNTA1"
	testAccountB = "TRELLISTESTACCOUNTB1"
	secretOne    = "first-secret-key-0123456789abcdefghij"
	secretTwo    = "second-secret-key-0123456789abcdefghi"
)

// as is a minio-go client with the given keys.
func (gw gateway) as(t *testing.T, access, secret string) *minio.Client {
	t.Helper()
	mc, err := minio.New(gw.host, &minio.Options{
		Creds: credentials.NewStaticV4(access, secret, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

func put(ctx context.Context, mc *minio.Client, bucket, key string) error {
	_, err := mc.PutObject(ctx, bucket, key, bytes.NewReader([]byte("data")), 4, minio.PutObjectOptions{})
	return err
}

func get(ctx context.Context, mc *minio.Client, bucket, key string) error {
	_, err := mc.StatObject(ctx, bucket, key, minio.StatObjectOptions{})
	return err
}

// TestVersitygwAccounts: accounts made through the admin API can do exactly
// what the bucket policy grants them, on that bucket only, and nothing once
// deleted; a second IssueKey replaces the secret.
func TestVersitygwAccounts(t *testing.T) {
	gw := startGateway(t)
	ctx := context.Background()
	g := NewWithT(t)
	accounts, err := NewVersitygwAccounts(gw.config(), "")
	g.Expect(err).NotTo(HaveOccurred())
	c, err := New(gw.config())
	g.Expect(err).NotTo(HaveOccurred())
	root := gw.direct(t)
	for _, b := range []string{"granted", "elsewhere"} {
		g.Expect(c.CreateBucket(ctx, b)).To(Succeed())
		g.Expect(put(ctx, root, b, "seed.txt")).To(Succeed())
	}

	ids, err := accounts.ListAccounts(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ids).To(BeEmpty())

	keyA, err := accounts.IssueKey(ctx, testAccountA)
	g.Expect(err).NotTo(HaveOccurred())
	keyB, err := accounts.IssueKey(ctx, testAccountB)
	g.Expect(err).NotTo(HaveOccurred())
	ids, err = accounts.ListAccounts(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ids).To(ConsistOf(testAccountA, testAccountB))

	userA := gw.as(t, keyA.AccessKeyID, keyA.SecretKey)
	g.Expect(get(ctx, userA, "granted", "seed.txt")).NotTo(Succeed(), "an account can do nothing before a grant")

	doc, err := WithGrant("", "granted", Grant{ID: "a", Principals: []string{testAccountA}, Mode: ReadOnly})
	g.Expect(err).NotTo(HaveOccurred())
	doc, err = WithGrant(doc, "granted", Grant{ID: "b", Principals: []string{testAccountB}, Mode: ReadWrite})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.SetPolicy(ctx, "granted", doc)).To(Succeed())

	userB := gw.as(t, keyB.AccessKeyID, keyB.SecretKey)
	g.Expect(get(ctx, userA, "granted", "seed.txt")).To(Succeed(), "ReadOnly reads")
	g.Expect(put(ctx, userA, "granted", "a.txt")).To(HaveOccurred(), "ReadOnly does not write")
	g.Expect(put(ctx, userB, "granted", "b.txt")).To(Succeed(), "ReadWrite writes")
	g.Expect(get(ctx, userB, "granted", "b.txt")).To(Succeed(), "ReadWrite reads")
	for _, user := range []*minio.Client{userA, userB} {
		g.Expect(get(ctx, user, "elsewhere", "seed.txt")).To(HaveOccurred(), "no other bucket")
		g.Expect(put(ctx, user, "elsewhere", "x.txt")).To(HaveOccurred(), "no other bucket")
		g.Expect(user.SetBucketPolicy(ctx, "granted", "")).To(HaveOccurred(), "no policy changes")
		g.Expect(user.MakeBucket(ctx, "mine-now", minio.MakeBucketOptions{})).To(HaveOccurred(), "no new buckets")
	}

	// Not an admin: the account's keys are refused by the admin API.
	asUser, err := NewVersitygwAccounts(Config{Endpoint: gw.endpoint, Region: "us-east-1", AccessKey: keyB.AccessKeyID, SecretKey: keyB.SecretKey}, "")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = asUser.ListAccounts(ctx)
	reason, _ := Classify(err)
	g.Expect(reason).To(Equal(ReasonAccessDenied), "%v", err)
	_, err = asUser.IssueKey(ctx, "TRELLISSNEAKYACCOUNT")
	g.Expect(err).To(HaveOccurred())

	// IssueKey on an existing account replaces its secret: the old one stops.
	keyB2, err := accounts.IssueKey(ctx, testAccountB)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(put(ctx, userB, "granted", "b2.txt")).To(HaveOccurred(), "the old secret is refused")
	g.Expect(put(ctx, gw.as(t, keyB2.AccessKeyID, keyB2.SecretKey), "granted", "b2.txt")).To(Succeed())

	// Deleted: the key stops working at once; deleting again is no error.
	g.Expect(accounts.DeleteAccount(ctx, testAccountA)).To(Succeed())
	err = get(ctx, userA, "granted", "seed.txt")
	g.Expect(err).To(HaveOccurred())
	g.Expect(minio.ToErrorResponse(err).StatusCode).To(Equal(http.StatusForbidden))
	g.Expect(accounts.DeleteAccount(ctx, testAccountA)).To(Succeed())
	ids, err = accounts.ListAccounts(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ids).To(ConsistOf(testAccountB))
}

// TestVersitygwIssueKey: versitygw's account is its key:
// IssueKey makes it with a secret of Trellis', the bucket policy names it by
// its key id, and a second IssueKey replaces the secret.
func TestVersitygwIssueKey(t *testing.T) {
	gw := startGateway(t)
	ctx := context.Background()
	g := NewWithT(t)
	accounts, err := NewVersitygwAccounts(gw.config(), "")
	g.Expect(err).NotTo(HaveOccurred())
	c, err := New(gw.config())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.CreateBucket(ctx, "granted")).To(Succeed())

	key, err := accounts.IssueKey(ctx, testAccountA)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(key.AccessKeyID).To(Equal(testAccountA))
	g.Expect(key.SecretKey).To(MatchRegexp("^[A-Za-z0-9]{40}$"))
	principal, err := accounts.Principal(ctx, testAccountA)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(principal).To(Equal(testAccountA))
	doc, err := WithGrant("", "granted", Grant{ID: "a", Principals: []string{principal}, Mode: ReadWrite})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.SetPolicy(ctx, "granted", doc)).To(Succeed())
	g.Expect(put(ctx, gw.as(t, key.AccessKeyID, key.SecretKey), "granted", "a.txt")).To(Succeed())

	again, err := accounts.IssueKey(ctx, testAccountA)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.SecretKey).NotTo(Equal(key.SecretKey))
	g.Expect(put(ctx, gw.as(t, key.AccessKeyID, key.SecretKey), "granted", "b.txt")).NotTo(Succeed(), "the old secret is refused")
	g.Expect(put(ctx, gw.as(t, again.AccessKeyID, again.SecretKey), "granted", "b.txt")).To(Succeed())

	_, err = accounts.Principal(ctx, "WITH/SLASH0000000000")
	g.Expect(err).To(MatchError(ContainSubstring("access key id")))
}

// TestNewSecretKey: the secret keys Trellis makes (versitygw's) are 40
// letters and digits, and never the same twice.
func TestNewSecretKey(t *testing.T) {
	g := NewWithT(t)
	seen := map[string]bool{}
	for range 100 {
		k, err := newSecretKey()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(k).To(MatchRegexp(`^[A-Za-z0-9]{40}$`))
		g.Expect(seen[k]).To(BeFalse())
		seen[k] = true
	}
}

func TestVersitygwWithoutIAMSaysSo(t *testing.T) {
	gw := startGatewayWith(t, false)
	g := NewWithT(t)
	accounts, err := NewVersitygwAccounts(gw.config(), "")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = accounts.IssueKey(context.Background(), testAccountA)
	g.Expect(err).To(HaveOccurred())
	reason, msg := Classify(err)
	g.Expect(reason).To(Equal(ReasonNotSupported), "%v", err)
	g.Expect(msg).To(ContainSubstring("--iam-dir"))
}

// fakeAdmin records admin requests and answers with a canned status and body.
type fakeAdmin struct {
	mu       sync.Mutex
	requests []*http.Request
	bodies   []string
	answer   func(r *http.Request) (int, string)
}

func (f *fakeAdmin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.requests = append(f.requests, r)
	f.bodies = append(f.bodies, string(body))
	f.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body)) // for an answer that echoes it
	status, out := f.answer(r)
	if status >= 300 && status < 400 {
		w.Header().Set("Location", "/elsewhere")
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, out)
}

func TestVersitygwAdminRequests(t *testing.T) {
	cases := map[string]struct {
		call      func(Accounts) error
		answer    func(r *http.Request) (int, string)
		wantPaths []string
		wantErr   Reason
	}{
		"create": {
			call:      func(a Accounts) error { return a.(*versitygw).put(context.Background(), testAccountA, fakeSecretKey) },
			answer:    func(*http.Request) (int, string) { return http.StatusCreated, "" },
			wantPaths: []string{"/create-user"},
		},
		"exists: the secret is replaced": {
			call: func(a Accounts) error { return a.(*versitygw).put(context.Background(), testAccountA, fakeSecretKey) },
			answer: func(r *http.Request) (int, string) {
				if r.URL.Path == "/create-user" {
					return http.StatusConflict, `<Error><Code>XAdminUserExists</Code><Message>exists</Message></Error>`
				}
				return http.StatusOK, ""
			},
			wantPaths: []string{"/create-user", "/update-user?access=" + testAccountA},
		},
		"create refused": {
			call: func(a Accounts) error { return a.(*versitygw).put(context.Background(), testAccountA, fakeSecretKey) },
			answer: func(*http.Request) (int, string) {
				return http.StatusForbidden, `<Error><Code>XAdminAccessDenied</Code><Message>Only admin users have access to this resource.</Message></Error>`
			},
			wantPaths: []string{"/create-user"}, wantErr: ReasonAccessDenied,
		},
		"an answer echoing the request, secret key and all, as its code": {
			call: func(a Accounts) error { return a.(*versitygw).put(context.Background(), testAccountA, fakeSecretKey) },
			answer: func(r *http.Request) (int, string) {
				body, _ := io.ReadAll(r.Body)
				var code strings.Builder
				_ = xml.EscapeText(&code, body)
				return http.StatusBadRequest, "<Error><Code>" + code.String() + "</Code></Error>"
			},
			wantPaths: []string{"/create-user"}, wantErr: ReasonStoreError,
		},
		"an answer echoing the secret key alone as its code": {
			call: func(a Accounts) error { return a.(*versitygw).put(context.Background(), testAccountA, fakeSecretKey) },
			answer: func(*http.Request) (int, string) {
				return http.StatusBadRequest, "<Error><Code>" + fakeSecretKey + "</Code></Error>"
			},
			wantPaths: []string{"/create-user"}, wantErr: ReasonStoreError,
		},
		"an answer echoing the request as the message of a refused policy": {
			call: func(a Accounts) error { return a.(*versitygw).put(context.Background(), testAccountA, fakeSecretKey) },
			answer: func(r *http.Request) (int, string) {
				body, _ := io.ReadAll(r.Body)
				var msg strings.Builder
				_ = xml.EscapeText(&msg, body)
				return http.StatusBadRequest, "<Error><Code>MalformedPolicy</Code><Message>" + msg.String() + "</Message></Error>"
			},
			wantPaths: []string{"/create-user"}, wantErr: ReasonInvalidRequest,
		},
		"store failing": {
			call:      func(a Accounts) error { return a.DeleteAccount(context.Background(), testAccountA) },
			answer:    func(*http.Request) (int, string) { return http.StatusServiceUnavailable, "not xml" },
			wantPaths: []string{"/delete-user?access=" + testAccountA}, wantErr: ReasonStoreUnreachable,
		},
		"a redirect is not followed": {
			call: func(a Accounts) error { _, err := a.ListAccounts(context.Background()); return err },
			answer: func(*http.Request) (int, string) {
				return http.StatusTemporaryRedirect, ""
			},
			wantPaths: []string{"/list-users"}, wantErr: ReasonStoreError,
		},
		"list": {
			call: func(a Accounts) error {
				ids, err := a.ListAccounts(context.Background())
				if err == nil && (len(ids) != 2 || ids[0] != "ONE" || ids[1] != "TWO") {
					return errors.New("wrong ids")
				}
				return err
			},
			answer: func(*http.Request) (int, string) {
				return http.StatusOK, `<ListUserAccountsResult><Accounts><Access>ONE</Access><Secret>` + fakeSecretKey + `</Secret><Role>user</Role></Accounts><Accounts><Access>TWO</Access><Secret>x</Secret></Accounts></ListUserAccountsResult>`
			},
			wantPaths: []string{"/list-users"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			fake := &fakeAdmin{answer: tc.answer}
			srv := httptest.NewServer(fake)
			defer srv.Close()
			a, err := NewVersitygwAccounts(Config{Endpoint: "http://unused.invalid", AccessKey: fakeAccessKey, SecretKey: "admin-secret", Timeout: 2 * time.Second}, srv.URL)
			g.Expect(err).NotTo(HaveOccurred())
			err = tc.call(a)
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(HaveOccurred())
				reason, msg := Classify(err)
				g.Expect(reason).To(Equal(tc.wantErr), "%v", err)
				g.Expect(msg).NotTo(ContainSubstring(fakeSecretKey))
				g.Expect(err.Error()).NotTo(ContainSubstring(fakeSecretKey), "the request body holds the secret")
			}
			var paths []string
			for i, r := range fake.requests {
				paths = append(paths, r.URL.RequestURI())
				g.Expect(r.Method).To(Equal(http.MethodPatch))
				g.Expect(r.Header.Get("Authorization")).To(HavePrefix("AWS4-HMAC-SHA256 Credential=" + fakeAccessKey + "/"))
				g.Expect(r.Header.Get("Authorization")).To(ContainSubstring("/us-east-1/s3/aws4_request"))
				g.Expect(r.Header.Get("X-Amz-Content-Sha256")).To(HaveLen(64), "the body is signed")
				g.Expect(r.Header.Get("Authorization")).NotTo(ContainSubstring("admin-secret"))
				if r.URL.Path == "/create-user" {
					g.Expect(fake.bodies[i]).To(ContainSubstring("<Role>user</Role>"), "accounts get the least role")
				}
			}
			g.Expect(paths).To(Equal(tc.wantPaths))
		})
	}
}

func TestVersitygwAccountsRefuseBadInput(t *testing.T) {
	g := NewWithT(t)
	_, err := NewVersitygwAccounts(Config{Endpoint: "http://127.0.0.1:1", AccessKey: "a"}, "")
	g.Expect(errors.Is(err, ErrCredentialsIncomplete)).To(BeTrue())
	_, err = NewVersitygwAccounts(Config{Endpoint: "http://127.0.0.1:1", AccessKey: "a", SecretKey: "b"}, "ftp://x")
	g.Expect(err).To(MatchError(ContainSubstring("admin endpoint")))

	a, err := NewVersitygwAccounts(Config{Endpoint: "http://127.0.0.1:1", AccessKey: "a", SecretKey: "b"}, "")
	g.Expect(err).NotTo(HaveOccurred())
	for _, id := range []string{"short", "WITH/SLASH0000000000", "with space 000000000", strings.Repeat("A", 129), "UNICODEÄ000000000000"} {
		_, err := a.IssueKey(context.Background(), id)
		g.Expect(err).To(MatchError(ContainSubstring("access key id")), id)
		g.Expect(a.DeleteAccount(context.Background(), id)).To(MatchError(ContainSubstring("access key id")), id)
	}
}
