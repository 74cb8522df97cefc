package s3

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
	. "github.com/onsi/gomega"

	"github.com/trellis-dev/trellis/internal/testenv"
)

// Account names as the storage controllers make them: the ObjectStore's
// mark (the driver's scope), the BucketAccess's, and the key's version.
const (
	iamScope      = "TRELLIS0A1B2C3D4E"
	iamOtherScope = "TRELLIS9F8E7D6C5B"
	iamReader     = iamScope + "READER00000000000000V1"
	iamWriter     = iamScope + "WRITER00000000000000V1"
	iamWriterV2   = iamScope + "WRITER00000000000000V2"
)

// seaweedfs is a SeaweedFS for one test, with its admin's S3 client and
// IAM driver.
type seaweedfs struct {
	*testenv.SeaweedFS
	cfg Config
	ops []string
}

func startSeaweedFS(t *testing.T) *seaweedfs {
	s := &seaweedfs{SeaweedFS: testenv.StartSeaweedFS(t)}
	s.cfg = Config{Endpoint: s.Endpoint, Region: "us-east-1", PathStyle: true, AccessKey: s.AccessKey, SecretKey: s.SecretKey,
		Timeout: 5 * time.Second, OnRequest: func(op string) { s.ops = append(s.ops, op) }}
	return s
}

// as is a minio-go client with a key.
func (s *seaweedfs) as(t *testing.T, key Key) *minio.Client {
	t.Helper()
	mc, err := minio.New(strings.TrimPrefix(s.Endpoint, "http://"), &minio.Options{
		Creds: credentials.NewStaticV4(key.AccessKeyID, key.SecretKey, ""), Region: "us-east-1", BucketLookup: minio.BucketLookupPath,
	})
	if err != nil {
		t.Fatal(err)
	}
	return mc
}

// TestIAMAccountsOnSeaweedFS: through SeaweedFS's IAM API, a key issued to
// an account does exactly what the bucket policy grants its Principal, on
// that bucket only, and nothing once its account is deleted; a new key
// replaces the account's old one, while the account of the next key
// version works beside it (rotation's grace period); the driver lists and
// touches only accounts of its own scope; and each call is counted once.
func TestIAMAccountsOnSeaweedFS(t *testing.T) {
	sw := startSeaweedFS(t)
	ctx := context.Background()
	g := NewWithT(t)
	accounts, err := NewIAMAccounts(sw.cfg, "", iamScope)
	g.Expect(err).NotTo(HaveOccurred())
	c, err := New(sw.cfg)
	g.Expect(err).NotTo(HaveOccurred())
	root := sw.as(t, Key{AccessKeyID: sw.AccessKey, SecretKey: sw.SecretKey})
	for _, b := range []string{"granted", "elsewhere"} {
		g.Expect(c.CreateBucket(ctx, b)).To(Succeed())
		g.Expect(put(ctx, root, b, "seed.txt")).To(Succeed())
	}

	// Users that are not this store's: someone's own, and another
	// ObjectStore's, made through a driver of the other scope.
	admin := accounts.(*iamAccounts).iam
	_, err = admin.CreateUser(ctx, &iam.CreateUserInput{UserName: aws.String("alice")})
	g.Expect(err).NotTo(HaveOccurred())
	other, err := NewIAMAccounts(sw.cfg, "", iamOtherScope)
	g.Expect(err).NotTo(HaveOccurred())
	otherKey, err := other.IssueKey(ctx, iamOtherScope+"READER00000000000000V1")
	g.Expect(err).NotTo(HaveOccurred())

	sw.ops = nil
	names, err := accounts.ListAccounts(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names).To(BeEmpty())
	g.Expect(sw.ops).To(Equal([]string{"ListAccounts"}))

	sw.ops = nil
	reader, err := accounts.IssueKey(ctx, iamReader)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sw.ops).To(Equal([]string{"IssueKey"}), "three requests of the IAM API, one operation")
	writer, err := accounts.IssueKey(ctx, iamWriter)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(reader.AccessKeyID).NotTo(Equal(iamReader), "the server makes the key id")
	g.Expect(reader.SecretKey).NotTo(BeEmpty())
	names, err = accounts.ListAccounts(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names).To(ConsistOf(iamReader, iamWriter), "this store's accounts only")

	asReader, asWriter := sw.as(t, reader), sw.as(t, writer)
	g.Expect(get(ctx, asReader, "granted", "seed.txt")).NotTo(Succeed(), "an account can do nothing before a grant")
	g.Expect(get(ctx, sw.as(t, otherKey), "granted", "seed.txt")).NotTo(Succeed())

	sw.ops = nil
	readerARN, err := accounts.Principal(ctx, iamReader)
	g.Expect(err).NotTo(HaveOccurred())
	writerARN, err := accounts.Principal(ctx, iamWriter)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sw.ops).To(BeEmpty(), "the ARNs were learnt when the users were made")
	g.Expect(readerARN).To(HavePrefix("arn:aws:iam::"))
	g.Expect(readerARN).To(HaveSuffix(":user/" + iamReader))
	doc, err := WithGrant("", "granted", Grant{ID: "r", Principals: []string{readerARN}, Mode: ReadOnly})
	g.Expect(err).NotTo(HaveOccurred())
	doc, err = WithGrant(doc, "granted", Grant{ID: "w", Principals: []string{writerARN}, Mode: ReadWrite})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.SetPolicy(ctx, "granted", doc)).To(Succeed())

	g.Eventually(func() error { return get(ctx, asReader, "granted", "seed.txt") }).Should(Succeed(), "ReadOnly reads")
	g.Expect(put(ctx, asReader, "granted", "r.txt")).To(HaveOccurred(), "ReadOnly does not write")
	g.Expect(asReader.RemoveObject(ctx, "granted", "seed.txt", minio.RemoveObjectOptions{})).To(HaveOccurred(), "ReadOnly does not delete")
	g.Expect(put(ctx, asWriter, "granted", "w.txt")).To(Succeed(), "ReadWrite writes")
	g.Expect(get(ctx, asWriter, "granted", "w.txt")).To(Succeed(), "ReadWrite reads")
	for _, user := range []*minio.Client{asReader, asWriter} {
		g.Expect(get(ctx, user, "elsewhere", "seed.txt")).To(HaveOccurred(), "no other bucket")
		g.Expect(put(ctx, user, "elsewhere", "x.txt")).To(HaveOccurred(), "no other bucket")
		g.Expect(user.SetBucketPolicy(ctx, "granted", "")).To(HaveOccurred(), "no policy changes")
		g.Expect(user.MakeBucket(ctx, "mine-now", minio.MakeBucketOptions{})).To(HaveOccurred(), "no new buckets")
	}
	g.Expect(get(ctx, sw.as(t, otherKey), "granted", "seed.txt")).NotTo(Succeed(), "no key but those granted")

	// Not an admin: a key of an account is refused by the IAM API.
	asUser, err := NewIAMAccounts(Config{Endpoint: sw.Endpoint, Region: "us-east-1", AccessKey: writer.AccessKeyID, SecretKey: writer.SecretKey}, "", iamScope)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = asUser.ListAccounts(ctx)
	reason, _ := Classify(err)
	g.Expect(reason).To(Equal(ReasonAccessDenied), "%v", err)
	_, err = asUser.IssueKey(ctx, iamScope+"SNEAKY00000000000000V1")
	g.Expect(err).To(HaveOccurred())

	// A new key of the same account replaces the old one.
	again, err := accounts.IssueKey(ctx, iamWriter)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again.AccessKeyID).NotTo(Equal(writer.AccessKeyID))
	g.Eventually(func() error { return put(ctx, asWriter, "granted", "old.txt") }).ShouldNot(Succeed(), "the old key is refused")
	g.Expect(put(ctx, sw.as(t, again), "granted", "new.txt")).To(Succeed())

	// Rotation: the next key version is another account; granted beside
	// the first, both work until the first is deleted.
	v2, err := accounts.IssueKey(ctx, iamWriterV2)
	g.Expect(err).NotTo(HaveOccurred())
	v2ARN, err := accounts.Principal(ctx, iamWriterV2)
	g.Expect(err).NotTo(HaveOccurred())
	doc, err = WithGrant(doc, "granted", Grant{ID: "w", Principals: []string{writerARN, v2ARN}, Mode: ReadWrite})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.SetPolicy(ctx, "granted", doc)).To(Succeed())
	g.Eventually(func() error { return put(ctx, sw.as(t, v2), "granted", "v2.txt") }).Should(Succeed())
	g.Expect(put(ctx, sw.as(t, again), "granted", "v1.txt")).To(Succeed(), "the replaced version works in its grace period")

	// Revoked: the key stops working at once; deleting again is no error.
	sw.ops = nil
	g.Expect(accounts.DeleteAccount(ctx, iamWriter)).To(Succeed())
	g.Expect(sw.ops).To(Equal([]string{"DeleteAccount"}))
	g.Expect(accounts.DeleteAccount(ctx, iamReader)).To(Succeed())
	err = get(ctx, asReader, "granted", "seed.txt")
	g.Expect(err).To(HaveOccurred())
	g.Expect(minio.ToErrorResponse(err).StatusCode).To(Equal(http.StatusForbidden))
	g.Expect(put(ctx, sw.as(t, again), "granted", "v1.txt")).NotTo(Succeed())
	g.Expect(put(ctx, sw.as(t, v2), "granted", "v2.txt")).To(Succeed(), "the new version stays")
	g.Expect(accounts.DeleteAccount(ctx, iamReader)).To(Succeed())
	names, err = accounts.ListAccounts(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names).To(ConsistOf(iamWriterV2))

	// What is not the driver's scope, it neither deletes nor makes.
	sw.ops = nil
	g.Expect(accounts.DeleteAccount(ctx, "alice")).To(MatchError(ContainSubstring("access key id")))
	g.Expect(accounts.DeleteAccount(ctx, iamOtherScope+"READER00000000000000V1")).To(MatchError(ContainSubstring("not one of this ObjectStore's")))
	_, err = accounts.IssueKey(ctx, iamOtherScope+"READER00000000000000V2")
	g.Expect(err).To(MatchError(ContainSubstring("not one of this ObjectStore's")))
	g.Expect(get(ctx, sw.as(t, otherKey), "elsewhere", "seed.txt")).To(HaveOccurred())
	users, err := admin.ListUsers(ctx, &iam.ListUsersInput{})
	g.Expect(err).NotTo(HaveOccurred())
	all := make([]string, 0, len(users.Users))
	for _, u := range users.Users {
		all = append(all, aws.ToString(u.UserName))
	}
	g.Expect(all).To(ContainElements("alice", iamOtherScope+"READER00000000000000V1"), "others' users are left alone")
}

// TestIAMAccountsRefuseBadInput: a name that is not an account of the
// driver's scope is refused before any request.
func TestIAMAccountsRefuseBadInput(t *testing.T) {
	g := NewWithT(t)
	cfg := Config{Endpoint: "http://127.0.0.1:1", AccessKey: "a", SecretKey: "b"}
	_, err := NewIAMAccounts(Config{Endpoint: "http://127.0.0.1:1", AccessKey: "a"}, "", iamScope)
	g.Expect(err).To(MatchError(ErrCredentialsIncomplete))
	_, err = NewIAMAccounts(cfg, "ftp://x", iamScope)
	g.Expect(err).To(MatchError(ContainSubstring("IAM endpoint")))
	for _, scope := range []string{"", "TRELLIS/", strings.Repeat("A", 33)} {
		_, err = NewIAMAccounts(cfg, "", scope)
		g.Expect(err).To(MatchError(ContainSubstring("scope")), scope)
	}

	fake := &fakeAdmin{answer: func(*http.Request) (int, string) { return http.StatusInternalServerError, "" }}
	srv := httptest.NewServer(fake)
	defer srv.Close()
	a, err := NewIAMAccounts(cfg, srv.URL, iamScope)
	g.Expect(err).NotTo(HaveOccurred())
	ctx := context.Background()
	for _, name := range []string{"short", iamScope, iamScope + "WITH/SLASH", iamScope + strings.Repeat("A", 64-len(iamScope)+1), iamOtherScope + "READER0000V1"} {
		_, err := a.IssueKey(ctx, name)
		g.Expect(err).To(HaveOccurred(), name)
		g.Expect(a.DeleteAccount(ctx, name)).NotTo(Succeed(), name)
		_, err = a.Principal(ctx, name)
		g.Expect(err).To(HaveOccurred(), name)
	}
	g.Expect(fake.requests).To(BeEmpty(), "no request reached the store")
}

// iamAnswer is an error of the IAM API as its query protocol writes it.
func iamAnswer(code string) string {
	return `<ErrorResponse xmlns="https://iam.amazonaws.com/doc/2010-05-08/"><Error><Type>Sender</Type><Code>` + code +
		`</Code><Message>m</Message></Error><RequestId>r</RequestId></ErrorResponse>`
}

// TestIAMAccountsErrors: answers of the IAM API reach Classify as store
// errors (code and status only), what is gone already is no error, and a
// redirect is not followed.
func TestIAMAccountsErrors(t *testing.T) {
	cases := map[string]struct {
		call        func(Accounts) error
		answer      func(action string) (int, string)
		wantActions []string
		wantErr     Reason
	}{
		"refused": {
			call:        func(a Accounts) error { _, err := a.ListAccounts(context.Background()); return err },
			answer:      func(string) (int, string) { return http.StatusForbidden, iamAnswer("AccessDenied") },
			wantActions: []string{"ListUsers"}, wantErr: ReasonAccessDenied,
		},
		"a key the store does not know": {
			call:        func(a Accounts) error { _, err := a.IssueKey(context.Background(), iamReader); return err },
			answer:      func(string) (int, string) { return http.StatusForbidden, iamAnswer("InvalidClientTokenId") },
			wantActions: []string{"CreateUser"}, wantErr: ReasonAccessDenied,
		},
		"store failing": {
			call:        func(a Accounts) error { return a.DeleteAccount(context.Background(), iamReader) },
			answer:      func(string) (int, string) { return http.StatusServiceUnavailable, "not xml" },
			wantActions: []string{"ListAccessKeys"}, wantErr: ReasonStoreUnreachable,
		},
		"a redirect is not followed": {
			call:        func(a Accounts) error { _, err := a.Principal(context.Background(), iamReader); return err },
			answer:      func(string) (int, string) { return http.StatusTemporaryRedirect, "" },
			wantActions: []string{"GetUser"}, wantErr: ReasonStoreError,
		},
		"a user whose ARN names more than it: no principal, the access Stalled": {
			call: func(a Accounts) error { _, err := a.Principal(context.Background(), iamReader); return err },
			answer: func(string) (int, string) {
				return http.StatusOK, `<GetUserResponse><GetUserResult><User><UserName>` + iamReader + `</UserName><Arn>*</Arn></User></GetUserResult></GetUserResponse>`
			},
			wantActions: []string{"GetUser"}, wantErr: ReasonNotSupported,
		},
		"deleting a user that is gone": {
			call:        func(a Accounts) error { return a.DeleteAccount(context.Background(), iamReader) },
			answer:      func(string) (int, string) { return http.StatusNotFound, iamAnswer("NoSuchEntity") },
			wantActions: []string{"ListAccessKeys"},
		},
		"a user made before: its old keys go, then a new one": {
			call: func(a Accounts) error {
				key, err := a.IssueKey(context.Background(), iamReader)
				if err == nil && (key.AccessKeyID != "AKIANEW" || key.SecretKey != "new-secret") {
					return fmt.Errorf("got key %+v", key)
				}
				return err
			},
			answer: func(action string) (int, string) {
				switch action {
				case "CreateUser":
					return http.StatusConflict, iamAnswer("EntityAlreadyExists")
				case "ListAccessKeys":
					return http.StatusOK, `<ListAccessKeysResponse><ListAccessKeysResult><AccessKeyMetadata><member><AccessKeyId>AKIAOLD</AccessKeyId></member></AccessKeyMetadata><IsTruncated>false</IsTruncated></ListAccessKeysResult></ListAccessKeysResponse>`
				case "DeleteAccessKey":
					return http.StatusOK, `<DeleteAccessKeyResponse></DeleteAccessKeyResponse>`
				}
				return http.StatusOK, `<CreateAccessKeyResponse><CreateAccessKeyResult><AccessKey><AccessKeyId>AKIANEW</AccessKeyId><SecretAccessKey>new-secret</SecretAccessKey></AccessKey></CreateAccessKeyResult></CreateAccessKeyResponse>`
			},
			wantActions: []string{"CreateUser", "ListAccessKeys", "DeleteAccessKey", "CreateAccessKey"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			fake := &fakeAdmin{answer: func(r *http.Request) (int, string) { return tc.answer(r.FormValue("Action")) }}
			srv := httptest.NewServer(fake)
			defer srv.Close()
			a, err := NewIAMAccounts(Config{Endpoint: "http://unused.invalid", AccessKey: fakeAccessKey, SecretKey: "admin-secret", Timeout: 2 * time.Second}, srv.URL, iamScope)
			g.Expect(err).NotTo(HaveOccurred())
			err = tc.call(a)
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				reason, _ := Classify(err)
				g.Expect(reason).To(Equal(tc.wantErr), "%v", err)
			}
			var actions []string
			for i, r := range fake.requests {
				form, _ := url.ParseQuery(fake.bodies[i])
				actions = append(actions, form.Get("Action"))
				g.Expect(r.Method).To(Equal(http.MethodPost))
				g.Expect(r.Header.Get("Authorization")).To(HavePrefix("AWS4-HMAC-SHA256 Credential=" + fakeAccessKey + "/"))
				g.Expect(r.Header.Get("Authorization")).To(ContainSubstring("/us-east-1/iam/aws4_request"))
			}
			g.Expect(actions).To(Equal(tc.wantActions))
		})
	}
}
