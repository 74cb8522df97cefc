package s3

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	. "github.com/onsi/gomega"

	"github.com/trellis-dev/trellis/internal/testenv"
)

// Account names on MinIO: the same marks as on an IAM store (the
// ObjectStore's scope, the BucketAccess's, the key's version).
const (
	minioReader   = iamScope + "READER00000000000000V1"
	minioWriter   = iamScope + "WRITER00000000000000V1"
	minioWriterV2 = iamScope + "WRITER00000000000000V2"
	minioOther    = iamOtherScope + "READER00000000000000V1"
)

// minioServer is a MinIO for one test, with its root user's S3 client
// config.
type minioServer struct {
	*testenv.MinIO
	cfg Config
	ops []string
}

func startMinIO(t *testing.T) *minioServer {
	s := &minioServer{MinIO: testenv.StartMinIO(t)}
	s.cfg = Config{Endpoint: s.Endpoint, Region: "us-east-1", PathStyle: true, AccessKey: s.AccessKey, SecretKey: s.SecretKey,
		Timeout: 5 * time.Second, OnRequest: func(op string) { s.ops = append(s.ops, op) }}
	return s
}

// as is a minio-go client with a key.
func (s *minioServer) as(t *testing.T, key Key) *minio.Client {
	t.Helper()
	mc, err := minio.New(strings.TrimPrefix(s.Endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(key.AccessKeyID, key.SecretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

// admin calls MinIO's admin API as the root user, through the driver's own
// signed client: what a MinIO admin does beside Trellis.
func admin(t *testing.T, a AccountGrants, method, path string, query url.Values, body any) []byte {
	t.Helper()
	var raw []byte
	if body != nil {
		var err error
		if raw, err = json.Marshal(body); err != nil {
			t.Fatal(err)
		}
	}
	m := a.(*minioAccounts)
	answer, err := m.call(context.Background(), method, path, query, raw, path == "/add-user")
	if err != nil {
		t.Fatalf("admin %s %s: %v", method, path, err)
	}
	if path == "/list-users" {
		if answer, err = unseal(m.secret, answer); err != nil {
			t.Fatal(err)
		}
	}
	return answer
}

// TestMinIOAccounts: through MinIO's admin API, a key issued to an account
// does exactly what the account's grant says, on that bucket only, and
// nothing once its account is deleted; a bucket policy naming the account
// grants it nothing (so Principal refuses); a new key replaces the
// account's old one, while the account of the next key version works
// beside it (rotation's grace period); a policy an admin added is taken
// back at the next grant, one that holds already is only read, and a group
// the account was put in is reported;
// the driver lists and touches only accounts of its own scope, users and
// policies alike; each call is counted once; and a MinIO user holding only
// MinIOAdminActions can run it all.
func TestMinIOAccounts(t *testing.T) {
	srv := startMinIO(t)
	ctx := context.Background()
	g := NewWithT(t)
	accounts, err := NewMinIOAccounts(srv.cfg, "", iamScope)
	g.Expect(err).NotTo(HaveOccurred())
	c, err := New(srv.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	root := srv.as(t, Key{AccessKeyID: srv.AccessKey, SecretKey: srv.SecretKey})
	for _, b := range []string{"granted", "elsewhere"} {
		g.Expect(c.CreateBucket(ctx, b)).To(Succeed())
		g.Expect(put(ctx, root, b, "seed.txt")).To(Succeed())
	}

	// Users that are not this store's: someone's own, and another
	// ObjectStore's, made through a driver of the other scope.
	admin(t, accounts, http.MethodPut, "/add-user", url.Values{"accessKey": {"alice"}}, minioUserRequest{SecretKey: "alice-secret-key", Status: "enabled"})
	other, err := NewMinIOAccounts(srv.cfg, "", iamOtherScope)
	g.Expect(err).NotTo(HaveOccurred())
	otherKey, err := other.IssueKey(ctx, minioOther)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(other.GrantAccount(ctx, minioOther, "elsewhere", ReadOnly)).To(Succeed())

	srv.ops = nil
	names, err := accounts.ListAccounts(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names).To(BeEmpty())
	g.Expect(srv.ops).To(Equal([]string{"ListAccounts"}))

	srv.ops = nil
	reader, err := accounts.IssueKey(ctx, minioReader)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(srv.ops).To(Equal([]string{"IssueKey"}))
	writer, err := accounts.IssueKey(ctx, minioWriter)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reader.AccessKeyID).To(Equal(minioReader), "on MinIO the user is its access key id")
	g.Expect(reader.SecretKey).To(HaveLen(secretKeyLength))
	names, err = accounts.ListAccounts(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names).To(ConsistOf(minioReader, minioWriter), "this store's accounts only")

	asReader, asWriter := srv.as(t, reader), srv.as(t, writer)
	g.Expect(get(ctx, asReader, "granted", "seed.txt")).NotTo(Succeed(), "an account can do nothing before a grant")

	// A bucket policy naming the user grants it nothing on MinIO: that is
	// why Principal refuses, and the account's own policy is the grant.
	_, err = accounts.Principal(ctx, minioReader)
	g.Expect(err).To(MatchError(ErrNoPrincipal))
	g.Expect(errors.Is(err, ErrAccessNotSupported)).To(BeTrue())
	doc, err := WithGrant("", "granted", Grant{ID: "r", Principals: []string{minioReader}, Mode: ReadOnly})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.SetPolicy(ctx, "granted", doc)).To(Succeed(), "MinIO takes the policy")
	g.Consistently(func() error { return get(ctx, asReader, "granted", "seed.txt") }, time.Second).ShouldNot(Succeed(),
		"and reads it for anonymous requests only")
	g.Expect(c.SetPolicy(ctx, "granted", "")).To(Succeed())

	srv.ops = nil
	g.Expect(accounts.GrantAccount(ctx, minioReader, "granted", ReadOnly)).To(Succeed())
	g.Expect(srv.ops).To(Equal([]string{"GrantAccount"}), "three requests of the admin API, one operation")
	g.Expect(accounts.GrantAccount(ctx, minioWriter, "granted", ReadWrite)).To(Succeed())

	// A grant that holds already is read, not written again: MinIO renders
	// the policy its own way, and the driver still knows it for its own.
	m := accounts.(*minioAccounts)
	var sent []string
	inner := m.http.Transport
	m.http.Transport = roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent = append(sent, r.Method+" "+strings.TrimPrefix(r.URL.Path, minioAdminPrefix))
		return inner.RoundTrip(r)
	})
	g.Expect(accounts.GrantAccount(ctx, minioWriter, "granted", ReadWrite)).To(Succeed())
	g.Expect(sent).To(Equal([]string{"GET /user-info", "GET /info-canned-policy"}))
	m.http.Transport = inner

	g.Expect(get(ctx, asReader, "granted", "seed.txt")).To(Succeed(), "ReadOnly reads")
	g.Expect(put(ctx, asReader, "granted", "r.txt")).To(HaveOccurred(), "ReadOnly does not write")
	g.Expect(asReader.RemoveObject(ctx, "granted", "seed.txt", minio.RemoveObjectOptions{})).To(HaveOccurred(), "ReadOnly does not delete")
	g.Expect(put(ctx, asWriter, "granted", "w.txt")).To(Succeed(), "ReadWrite writes")
	g.Expect(get(ctx, asWriter, "granted", "w.txt")).To(Succeed(), "ReadWrite reads")
	g.Expect(asWriter.RemoveObject(ctx, "granted", "w.txt", minio.RemoveObjectOptions{})).To(Succeed(), "ReadWrite deletes")
	for _, user := range []*minio.Client{asReader, asWriter} {
		g.Expect(get(ctx, user, "elsewhere", "seed.txt")).To(HaveOccurred(), "no other bucket")
		g.Expect(put(ctx, user, "elsewhere", "x.txt")).To(HaveOccurred(), "no other bucket")
		g.Expect(user.SetBucketPolicy(ctx, "granted", "")).To(HaveOccurred(), "no policy changes")
		g.Expect(user.MakeBucket(ctx, "mine-now", minio.MakeBucketOptions{})).To(HaveOccurred(), "no new buckets")
	}
	g.Expect(get(ctx, srv.as(t, otherKey), "granted", "seed.txt")).NotTo(Succeed(), "no key but those granted")
	g.Expect(get(ctx, srv.as(t, otherKey), "elsewhere", "seed.txt")).To(Succeed(), "the other store's grant is its own")

	// Not an admin: a key of an account is refused by the admin API.
	asUser, err := NewMinIOAccounts(Config{Endpoint: srv.Endpoint, Region: "us-east-1", AccessKey: writer.AccessKeyID, SecretKey: writer.SecretKey}, "", iamScope)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = asUser.ListAccounts(ctx)
	reason, _ := Classify(err)
	g.Expect(reason).To(Equal(ReasonAccessDenied), "%v", err)
	_, err = asUser.IssueKey(ctx, iamScope+"SNEAKY00000000000000V1")
	reason, _ = Classify(err)
	g.Expect(reason).To(Equal(ReasonAccessDenied), "%v", err)
	err = asUser.GrantAccount(ctx, minioWriter, "elsewhere", ReadWrite)
	reason, _ = Classify(err)
	g.Expect(reason).To(Equal(ReasonAccessDenied), "%v", err)

	// A policy an admin added to the account is gone at the next grant.
	admin(t, accounts, http.MethodPut, "/set-user-or-group-policy",
		url.Values{"policyName": {minioReader + ",readwrite"}, "userOrGroup": {minioReader}, "isGroup": {"false"}}, nil)
	g.Expect(put(ctx, asReader, "elsewhere", "x.txt")).To(Succeed(), "widened by an admin")
	g.Expect(accounts.GrantAccount(ctx, minioReader, "granted", ReadOnly)).To(Succeed())
	g.Expect(put(ctx, asReader, "elsewhere", "y.txt")).To(HaveOccurred(), "only the grant again")
	g.Expect(get(ctx, asReader, "granted", "seed.txt")).To(Succeed())

	// So is a change an admin made to the account's own policy.
	widened, err := json.Marshal(minioPolicy{Version: policyVersion, Statement: []minioStatement{{Effect: "Allow", Action: []string{"s3:*"}, Resource: []string{"arn:aws:s3:::*"}}}})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = m.call(ctx, http.MethodPut, "/add-canned-policy", url.Values{"name": {minioReader}}, widened, false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(put(ctx, asReader, "elsewhere", "x.txt")).To(Succeed(), "widened by an admin")
	g.Expect(accounts.GrantAccount(ctx, minioReader, "granted", ReadOnly)).To(Succeed())
	g.Expect(put(ctx, asReader, "elsewhere", "y.txt")).To(HaveOccurred(), "only the grant again")

	// A group adds its policies to the account: reported, not served.
	admin(t, accounts, http.MethodPut, "/update-group-members", nil,
		map[string]any{"group": "admins", "members": []string{minioReader}, "isRemove": false})
	err = accounts.GrantAccount(ctx, minioReader, "granted", ReadOnly)
	g.Expect(err).To(MatchError(ErrGrantWidened))
	g.Expect(err).To(MatchError(ContainSubstring("admins")))
	admin(t, accounts, http.MethodPut, "/update-group-members", nil,
		map[string]any{"group": "admins", "members": []string{minioReader}, "isRemove": true})
	g.Expect(accounts.GrantAccount(ctx, minioReader, "granted", ReadOnly)).To(Succeed())

	// A new key of the same account replaces the old one, and keeps its grant.
	again, err := accounts.IssueKey(ctx, minioWriter)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.SecretKey).NotTo(Equal(writer.SecretKey))
	g.Expect(put(ctx, asWriter, "granted", "old.txt")).NotTo(Succeed(), "the old key is refused")
	g.Expect(put(ctx, srv.as(t, again), "granted", "new.txt")).To(Succeed())

	// Rotation: the next key version is another account; granted beside
	// the first, both work until the first is deleted.
	v2, err := accounts.IssueKey(ctx, minioWriterV2)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(accounts.GrantAccount(ctx, minioWriterV2, "granted", ReadWrite)).To(Succeed())
	g.Expect(put(ctx, srv.as(t, v2), "granted", "v2.txt")).To(Succeed())
	g.Expect(put(ctx, srv.as(t, again), "granted", "v1.txt")).To(Succeed(), "the replaced version works in its grace period")

	// Revoked: the key stops working at once, its policy goes with it;
	// deleting again is no error.
	srv.ops = nil
	g.Expect(accounts.DeleteAccount(ctx, minioWriter)).To(Succeed())
	g.Expect(srv.ops).To(Equal([]string{"DeleteAccount"}))
	g.Expect(accounts.DeleteAccount(ctx, minioReader)).To(Succeed())
	err = get(ctx, asReader, "granted", "seed.txt")
	g.Expect(err).To(HaveOccurred())
	g.Expect(minio.ToErrorResponse(err).StatusCode).To(Equal(http.StatusForbidden))
	g.Expect(put(ctx, srv.as(t, again), "granted", "v1.txt")).NotTo(Succeed())
	g.Expect(put(ctx, srv.as(t, v2), "granted", "v2.txt")).To(Succeed(), "the new version stays")
	g.Expect(accounts.DeleteAccount(ctx, minioReader)).To(Succeed())
	var policies map[string]json.RawMessage
	g.Expect(json.Unmarshal(admin(t, accounts, http.MethodGet, "/list-canned-policies", nil, nil), &policies)).To(Succeed())
	g.Expect(policies).NotTo(HaveKey(minioReader))
	g.Expect(policies).NotTo(HaveKey(minioWriter))
	g.Expect(policies).To(HaveKey(minioWriterV2))

	// A policy left without its user (a delete cut short) is listed for
	// the sweep, and deleted.
	orphan := iamScope + "ORPHAN00000000000000V1"
	policy, err := grantPolicy("granted", ReadOnly)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = accounts.(*minioAccounts).call(ctx, http.MethodPut, "/add-canned-policy", url.Values{"name": {orphan}}, policy, false)
	g.Expect(err).NotTo(HaveOccurred())
	names, err = accounts.ListAccounts(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names).To(Equal([]string{orphan, minioWriterV2}))
	g.Expect(accounts.DeleteAccount(ctx, orphan)).To(Succeed())
	names, err = accounts.ListAccounts(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names).To(Equal([]string{minioWriterV2}))

	// What is not the driver's scope, it neither deletes nor makes.
	srv.ops = nil
	g.Expect(accounts.DeleteAccount(ctx, "alice")).To(MatchError(ContainSubstring("access key id")))
	g.Expect(accounts.DeleteAccount(ctx, minioOther)).To(MatchError(ContainSubstring("not one of this ObjectStore's")))
	_, err = accounts.IssueKey(ctx, iamOtherScope+"READER00000000000000V2")
	g.Expect(err).To(MatchError(ContainSubstring("not one of this ObjectStore's")))
	g.Expect(accounts.GrantAccount(ctx, minioOther, "granted", ReadWrite)).To(MatchError(ContainSubstring("not one of this ObjectStore's")))
	var users map[string]json.RawMessage
	g.Expect(json.Unmarshal(admin(t, accounts, http.MethodGet, "/list-users", nil, nil), &users)).To(Succeed())
	g.Expect(users).To(HaveKey("alice"), "others' users are left alone")
	g.Expect(users).To(HaveKey(minioOther))
	g.Expect(get(ctx, srv.as(t, otherKey), "elsewhere", "seed.txt")).To(Succeed())

	// A MinIO user holding only MinIOAdminActions runs the driver.
	// (Admin actions take no Resource.)
	actions, err := json.Marshal(MinIOAdminActions)
	g.Expect(err).NotTo(HaveOccurred())
	least := []byte(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":` + string(actions) + `}]}`)
	_, err = m.call(ctx, http.MethodPut, "/add-canned-policy", url.Values{"name": {"trellis-driver"}}, least, false)
	g.Expect(err).NotTo(HaveOccurred())
	admin(t, accounts, http.MethodPut, "/add-user", url.Values{"accessKey": {"trellis-driver"}}, minioUserRequest{SecretKey: "driver-secret-key", Status: "enabled"})
	admin(t, accounts, http.MethodPut, "/set-user-or-group-policy",
		url.Values{"policyName": {"trellis-driver"}, "userOrGroup": {"trellis-driver"}, "isGroup": {"false"}}, nil)
	cfg := srv.cfg
	cfg.AccessKey, cfg.SecretKey = "trellis-driver", "driver-secret-key"
	byLeast, err := NewMinIOAccounts(cfg, "", iamScope)
	g.Expect(err).NotTo(HaveOccurred())
	key, err := byLeast.IssueKey(ctx, minioReader)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(byLeast.GrantAccount(ctx, minioReader, "granted", ReadOnly)).To(Succeed())
	g.Expect(byLeast.GrantAccount(ctx, minioReader, "granted", ReadOnly)).To(Succeed())
	g.Expect(get(ctx, srv.as(t, key), "granted", "seed.txt")).To(Succeed())
	names, err = byLeast.ListAccounts(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names).To(Equal([]string{minioReader, minioWriterV2}))
	g.Expect(byLeast.DeleteAccount(ctx, minioReader)).To(Succeed())
	g.Expect(get(ctx, srv.as(t, key), "granted", "seed.txt")).NotTo(Succeed())
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestMinIOAccountsRefuseBadInput: a name that is not an account of the
// driver's scope, a bucket name no bucket may have, or a mode that is
// neither ReadOnly nor ReadWrite is refused before any request.
func TestMinIOAccountsRefuseBadInput(t *testing.T) {
	g := NewWithT(t)
	cfg := Config{Endpoint: "http://127.0.0.1:1", AccessKey: "a", SecretKey: "b"}
	_, err := NewMinIOAccounts(Config{Endpoint: "http://127.0.0.1:1", AccessKey: "a"}, "", iamScope)
	g.Expect(err).To(MatchError(ErrCredentialsIncomplete))
	_, err = NewMinIOAccounts(cfg, "ftp://x", iamScope)
	g.Expect(err).To(MatchError(ContainSubstring("admin endpoint")))
	for _, scope := range []string{"", "TRELLIS/", strings.Repeat("A", 33)} {
		_, err = NewMinIOAccounts(cfg, "", scope)
		g.Expect(err).To(MatchError(ContainSubstring("scope")), scope)
	}

	fake := &fakeAdmin{answer: func(*http.Request) (int, string) { return http.StatusInternalServerError, "" }}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	a, err := NewMinIOAccounts(cfg, srv.URL, iamScope)
	g.Expect(err).NotTo(HaveOccurred())
	ctx := context.Background()
	for _, name := range []string{"short", iamScope, iamScope + "WITH/SLASH", iamScope + "WITH,COMMA", iamOtherScope + "READER0000V1"} {
		_, err := a.IssueKey(ctx, name)
		g.Expect(err).To(HaveOccurred(), name)
		g.Expect(a.DeleteAccount(ctx, name)).NotTo(Succeed(), name)
		_, err = a.Principal(ctx, name)
		g.Expect(err).NotTo(MatchError(ErrNoPrincipal), name)
		g.Expect(a.GrantAccount(ctx, name, "granted", ReadOnly)).NotTo(Succeed(), name)
	}
	for _, bucket := range []string{"", "a", `x"],"Resource":["*`, "UPPER"} {
		g.Expect(a.GrantAccount(ctx, minioReader, bucket, ReadOnly)).To(MatchError(ContainSubstring("bucket")), bucket)
	}
	for _, mode := range []string{"", "Admin", "readonly"} {
		g.Expect(a.GrantAccount(ctx, minioReader, "granted", mode)).To(MatchError(ContainSubstring("access mode")), mode)
	}
	g.Expect(fake.requests).To(BeEmpty(), "no request reached the store")
}

// minioAnswer is an error of MinIO's admin API as it writes them, in JSON.
func minioAnswer(code string) string {
	return `{"Code":"` + code + `","Message":"m","Resource":"/minio/admin/v3/x","RequestId":"r","HostId":"h"}`
}

// TestMinIOAccountsErrors: answers of the admin API reach Classify as store
// errors (code and status only), what is gone already is no error, a
// redirect is not followed, a list sealed with another secret is refused,
// and the new secret travels sealed, never in the clear.
func TestMinIOAccountsErrors(t *testing.T) {
	const secret = "admin-secret"
	sealedJSON := func(secret string, v any) string {
		raw, _ := json.Marshal(v)
		sealed, err := seal(secret, raw)
		if err != nil {
			t.Fatal(err)
		}
		return string(sealed)
	}
	type adminCase struct {
		call      func(AccountGrants) error
		answer    func(r *http.Request) (int, string)
		wantPaths []string
		wantErr   Reason
		wantIs    error
	}
	cases := map[string]adminCase{
		"refused": {
			call:      func(a AccountGrants) error { _, err := a.ListAccounts(context.Background()); return err },
			answer:    func(*http.Request) (int, string) { return http.StatusForbidden, minioAnswer("AccessDenied") },
			wantPaths: []string{"/list-users"}, wantErr: ReasonAccessDenied,
		},
		"a key the store does not know": {
			call:      func(a AccountGrants) error { _, err := a.IssueKey(context.Background(), minioReader); return err },
			answer:    func(*http.Request) (int, string) { return http.StatusForbidden, minioAnswer("InvalidAccessKeyId") },
			wantPaths: []string{"/add-user"}, wantErr: ReasonAccessDenied,
		},
		"store failing": {
			call:      func(a AccountGrants) error { return a.DeleteAccount(context.Background(), minioReader) },
			answer:    func(*http.Request) (int, string) { return http.StatusServiceUnavailable, "not json" },
			wantPaths: []string{"/remove-user"}, wantErr: ReasonStoreUnreachable,
		},
		"a redirect is not followed": {
			call: func(a AccountGrants) error {
				return a.GrantAccount(context.Background(), minioReader, "granted", ReadOnly)
			},
			answer:    func(*http.Request) (int, string) { return http.StatusTemporaryRedirect, "" },
			wantPaths: []string{"/user-info"}, wantErr: ReasonStoreError,
		},
		"deleting an account that is gone": {
			call: func(a AccountGrants) error { return a.DeleteAccount(context.Background(), minioReader) },
			answer: func(r *http.Request) (int, string) {
				if r.URL.Path == minioAdminPrefix+"/remove-user" {
					return http.StatusNotFound, minioAnswer(minioNoSuchUser)
				}
				return http.StatusNotFound, minioAnswer(minioNoSuchPolicy)
			},
			wantPaths: []string{"/remove-user", "/remove-canned-policy"},
		},
		"a policy in use by someone else's group stays": {
			call: func(a AccountGrants) error { return a.DeleteAccount(context.Background(), minioReader) },
			answer: func(r *http.Request) (int, string) {
				if r.URL.Path == minioAdminPrefix+"/remove-user" {
					return http.StatusOK, ""
				}
				return http.StatusBadRequest, minioAnswer("XMinioAdminPolicyInUse")
			},
			wantPaths: []string{"/remove-user", "/remove-canned-policy"}, wantErr: ReasonStoreError,
		},
		"a list sealed with another secret": {
			call: func(a AccountGrants) error { _, err := a.ListAccounts(context.Background()); return err },
			answer: func(*http.Request) (int, string) {
				return http.StatusOK, sealedJSON("not-the-admins", map[string]any{minioReader: map[string]any{}})
			},
			wantPaths: []string{"/list-users"}, wantIs: errSealed,
		},
		"users and policies listed, marked ones only": {
			call: func(a AccountGrants) error {
				names, err := a.ListAccounts(context.Background())
				if err == nil && strings.Join(names, " ") != minioReader+" "+minioWriter {
					return fmt.Errorf("listed %q", names)
				}
				return err
			},
			answer: func(r *http.Request) (int, string) {
				if r.URL.Path == minioAdminPrefix+"/list-users" {
					return http.StatusOK, sealedJSON(secret, map[string]any{minioWriter: map[string]any{}, "alice": map[string]any{}, minioOther: map[string]any{}})
				}
				return http.StatusOK, `{"readwrite":{},"` + minioReader + `":{},"` + minioWriter + `":{}}`
			},
			wantPaths: []string{"/list-users", "/list-canned-policies"},
		},
		"the new secret is sealed": {
			call: func(a AccountGrants) error {
				_, err := a.IssueKey(context.Background(), minioReader)
				return err
			},
			answer: func(r *http.Request) (int, string) {
				body, _ := io.ReadAll(r.Body)
				plain, err := unseal(secret, body)
				var req minioUserRequest
				if err != nil || json.Unmarshal(plain, &req) != nil || len(req.SecretKey) != secretKeyLength || req.Status != "enabled" ||
					r.URL.Query().Get("accessKey") != minioReader || bytes.Contains(body, []byte(req.SecretKey)) {
					return http.StatusBadRequest, minioAnswer("XMinioAdminConfigBadJSON")
				}
				return http.StatusOK, ""
			},
			wantPaths: []string{"/add-user"},
		},
		"a user in a group is reported, and nothing written": {
			call: func(a AccountGrants) error {
				return a.GrantAccount(context.Background(), minioReader, "granted", ReadWrite)
			},
			answer: func(r *http.Request) (int, string) {
				if r.URL.Path == minioAdminPrefix+"/user-info" {
					return http.StatusOK, `{"policyName":"` + minioReader + `","status":"enabled","memberOf":["admins"]}`
				}
				return http.StatusOK, ""
			},
			wantPaths: []string{"/user-info"}, wantIs: ErrGrantWidened,
		},
		"a user that keeps another policy is reported": {
			call: func(a AccountGrants) error {
				return a.GrantAccount(context.Background(), minioReader, "granted", ReadWrite)
			},
			answer: func(r *http.Request) (int, string) {
				if r.URL.Path == minioAdminPrefix+"/user-info" {
					return http.StatusOK, `{"policyName":"` + minioReader + `,consoleAdmin","status":"enabled"}`
				}
				return http.StatusOK, ""
			},
			wantPaths: []string{"/user-info", "/add-canned-policy", "/set-user-or-group-policy", "/user-info"}, wantIs: ErrGrantWidened,
		},
		"a grant that holds already: two reads, no write": {
			call: func(a AccountGrants) error {
				return a.GrantAccount(context.Background(), minioReader, "granted", ReadOnly)
			},
			answer: func(r *http.Request) (int, string) {
				if r.URL.Path == minioAdminPrefix+"/user-info" {
					return http.StatusOK, `{"policyName":"` + minioReader + `","status":"enabled"}`
				}
				// As MinIO renders it: indented, its own order.
				return http.StatusOK, `{
 "Version": "2012-10-17",
 "Statement": [{"Effect": "Allow", "Action": ["s3:ListBucketVersions", "s3:GetObject", "s3:GetObjectAttributes", "s3:GetObjectTagging",
   "s3:GetObjectVersion", "s3:ListBucket", "s3:GetBucketLocation"], "Resource": ["arn:aws:s3:::granted/*", "arn:aws:s3:::granted"]}]}`
			},
			wantPaths: []string{"/user-info", "/info-canned-policy"},
		},
	}
	// A policy that says anything else is written again.
	for name, held := range map[string]string{
		"more actions":   `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:*"],"Resource":["arn:aws:s3:::granted","arn:aws:s3:::granted/*"]}]}`,
		"more resources": `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:GetBucketLocation","s3:ListBucket","s3:ListBucketVersions","s3:GetObject","s3:GetObjectVersion","s3:GetObjectTagging","s3:GetObjectAttributes"],"Resource":["arn:aws:s3:::*"]}]}`,
		"a condition":    `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:GetBucketLocation","s3:ListBucket","s3:ListBucketVersions","s3:GetObject","s3:GetObjectVersion","s3:GetObjectTagging","s3:GetObjectAttributes"],"Resource":["arn:aws:s3:::granted","arn:aws:s3:::granted/*"],"Condition":{"IpAddress":{"aws:SourceIp":["0.0.0.0/0"]}}}]}`,
		"two statements": `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":["s3:GetBucketLocation","s3:ListBucket","s3:ListBucketVersions","s3:GetObject","s3:GetObjectVersion","s3:GetObjectTagging","s3:GetObjectAttributes"],"Resource":["arn:aws:s3:::granted","arn:aws:s3:::granted/*"]},{"Effect":"Allow","Action":["s3:PutObject"],"Resource":["arn:aws:s3:::granted/*"]}]}`,
		"gone":           "",
	} {
		cases["a policy with "+name+" is written again"] = adminCase{
			call: func(a AccountGrants) error {
				return a.GrantAccount(context.Background(), minioReader, "granted", ReadOnly)
			},
			answer: func(r *http.Request) (int, string) {
				switch r.URL.Path {
				case minioAdminPrefix + "/user-info":
					return http.StatusOK, `{"policyName":"` + minioReader + `","status":"enabled"}`
				case minioAdminPrefix + "/info-canned-policy":
					if held == "" {
						return http.StatusNotFound, minioAnswer(minioNoSuchPolicy)
					}
					return http.StatusOK, held
				}
				return http.StatusOK, ""
			},
			wantPaths: []string{"/user-info", "/info-canned-policy", "/add-canned-policy", "/set-user-or-group-policy", "/user-info"},
		}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			fake := &fakeAdmin{answer: tc.answer}
			srv := httptest.NewServer(fake)
			defer srv.Close()
			a, err := NewMinIOAccounts(Config{Endpoint: "http://unused.invalid", AccessKey: fakeAccessKey, SecretKey: secret, Timeout: 2 * time.Second}, srv.URL, iamScope)
			g.Expect(err).NotTo(HaveOccurred())
			err = tc.call(a)
			switch {
			case tc.wantIs != nil:
				g.Expect(err).To(MatchError(tc.wantIs))
			case tc.wantErr == "":
				g.Expect(err).NotTo(HaveOccurred())
			default:
				reason, _ := Classify(err)
				g.Expect(reason).To(Equal(tc.wantErr), "%v", err)
			}
			var paths []string
			for _, r := range fake.requests {
				paths = append(paths, strings.TrimPrefix(r.URL.Path, minioAdminPrefix))
				g.Expect(r.Header.Get("Authorization")).To(HavePrefix("AWS4-HMAC-SHA256 Credential=" + fakeAccessKey + "/"))
				g.Expect(r.Header.Get("Authorization")).To(ContainSubstring("/us-east-1/s3/aws4_request"))
			}
			g.Expect(paths).To(Equal(tc.wantPaths))
		})
	}
}
