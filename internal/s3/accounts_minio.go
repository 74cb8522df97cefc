package s3

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/signer"
)

// AccountGrants is an account driver whose store grants an account through
// a policy of the account's own, not through a bucket policy naming it.
// MinIO is one: it reads bucket policies for anonymous requests only, so
// a bucket policy can grant its users nothing, and Principal fails with
// ErrNoPrincipal.
type AccountGrants interface {
	Accounts
	// GrantAccount makes the account's own policy exactly the grant: mode
	// (ReadOnly or ReadWrite) on bucket, the actions a bucket policy's Grant
	// gives, and nothing else of the account's. Where the store would still
	// give the account more (a group's policies), it fails with
	// ErrGrantWidened and the account keeps only what it had.
	GrantAccount(ctx context.Context, account, bucket, mode string) error
}

// ErrNoPrincipal is Principal's answer on a store whose bucket policies
// cannot name an account: a statement naming its keys would grant nothing.
// It is an ErrAccessNotSupported, so a controller that only knows bucket
// policies stops the access as NotSupported rather than hand out a key
// without its grant.
var ErrNoPrincipal = fmt.Errorf("%w through a bucket policy: MinIO applies bucket policies to anonymous requests only, so each account is granted by a policy of its own", ErrAccessNotSupported)

// ErrGrantWidened is GrantAccount's answer when the store gives an account
// more than Trellis' grant, by something Trellis did not make and does not
// undo.
var ErrGrantWidened = errors.New("the account has more access than its grant")

// NewMinIOAccounts manages accounts through MinIO's admin API: each
// account is a MinIO user named by Trellis, whose name is its access key id
// and whose secret key Trellis makes, and whose one policy, of the same
// name, is its grant (GrantAccount).
//
// The client is Trellis' own (madmin-go, MinIO's, is AGPL-3.0 and not
// linked): requests signed with SigV4 like any S3 request, by a user that
// holds MinIOAdminActions (the root user does), and the bodies that carry
// secrets sealed with that user's secret key (minio_sealed.go).
//
// adminEndpoint is where the admin API is served: the S3 endpoint itself
// unless told. scope is the start of every account name this driver
// manages, the ObjectStore's mark: it refuses any other name, and lists no
// other user or policy.
func NewMinIOAccounts(cfg Config, adminEndpoint, scope string) (AccountGrants, error) {
	if adminEndpoint == "" {
		adminEndpoint = cfg.Endpoint
	}
	u, err := url.Parse(adminEndpoint)
	if err != nil || (u.Scheme != schemeHTTP && u.Scheme != schemeHTTPS) || u.Host == "" {
		return nil, fmt.Errorf("MinIO admin endpoint %q is not an http(s) URL", adminEndpoint)
	}
	if cfg.AccessKey == "" || cfg.SecretKey == "" {
		return nil, ErrCredentialsIncomplete
	}
	if err := validMinIOScope(scope); err != nil {
		return nil, err
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	region := cfg.Region
	if region == "" {
		region = defaultAdminRegion
	}
	httpClient, err := adminHTTPClient(cfg, timeout)
	if err != nil {
		return nil, err
	}
	return &minioAccounts{
		base: strings.TrimRight(u.String(), "/") + minioAdminPrefix, region: region, timeout: timeout,
		access: cfg.AccessKey, secret: cfg.SecretKey, scope: scope, onRequest: cfg.OnRequest,
		http: httpClient,
	}, nil
}

// MinIOAdminActions are the admin actions the driver uses, all it needs of
// the ObjectStore's credentials.
var MinIOAdminActions = []string{
	"admin:CreateUser", "admin:DeleteUser", "admin:ListUsers", "admin:GetUser",
	"admin:CreatePolicy", "admin:DeletePolicy", "admin:GetPolicy", "admin:ListUserPolicies",
	"admin:AttachUserOrGroupPolicy",
}

// minioAdminPrefix is where MinIO serves its admin API, version 3.
const minioAdminPrefix = "/minio/admin/v3"

type minioAccounts struct {
	base, region   string
	access, secret string
	scope          string
	timeout        time.Duration
	http           *http.Client
	onRequest      func(op string)
}

var _ AccountGrants = (*minioAccounts)(nil)

// Codes of MinIO's admin errors that the driver handles itself.
const (
	minioNoSuchUser   = "XMinioAdminNoSuchUser"
	minioNoSuchPolicy = "XMinioAdminNoSuchPolicy"
)

// maxMinIOScope bounds the scope, as the IAM driver's: half of a name.
const maxMinIOScope = 32

func validMinIOScope(scope string) error {
	if scope == "" || len(scope) > maxMinIOScope {
		return fmt.Errorf("the MinIO driver's scope must be 1 to %d characters, got %d", maxMinIOScope, len(scope))
	}
	for _, r := range scope {
		if (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return fmt.Errorf("the MinIO driver's scope %q must be letters and digits only", scope)
		}
	}
	return nil
}

// validAccount refuses a name this driver may not manage.
func (m *minioAccounts) validAccount(account string) error {
	if err := validAccessKeyID(account); err != nil {
		return err
	}
	if !strings.HasPrefix(account, m.scope) || account == m.scope {
		return fmt.Errorf("account %q is not one of this ObjectStore's (they start with %s)", account, m.scope)
	}
	return nil
}

// count counts one operation of the driver (Config.OnRequest), however
// many requests of the admin API it takes.
func (m *minioAccounts) count(op string) {
	if m.onRequest != nil {
		m.onRequest(op)
	}
}

// minioUserRequest is the body of add-user, sealed.
type minioUserRequest struct {
	SecretKey string `json:"secretKey"`
	Status    string `json:"status"`
}

// minioUserInfo is what user-info says of a user that the driver reads.
type minioUserInfo struct {
	// PolicyName lists the user's own policies, comma-separated.
	PolicyName string   `json:"policyName"`
	MemberOf   []string `json:"memberOf"`
}

// IssueKey creates the user with a new secret key of Trellis', or gives an
// existing one the new secret (the old one stops working); its access key
// id is the account name. A new user holds no policy, so its key can do
// nothing until GrantAccount; a user made before keeps its grant.
func (m *minioAccounts) IssueKey(ctx context.Context, account string) (Key, error) {
	m.count("IssueKey")
	if err := m.validAccount(account); err != nil {
		return Key{}, err
	}
	secret, err := newSecretKey()
	if err != nil {
		return Key{}, err
	}
	body, err := json.Marshal(minioUserRequest{SecretKey: secret, Status: "enabled"})
	if err != nil {
		return Key{}, err
	}
	if _, err := m.call(ctx, http.MethodPut, "/add-user", url.Values{"accessKey": {account}}, body, true); err != nil {
		return Key{}, err
	}
	return Key{AccessKeyID: account, SecretKey: secret}, nil
}

// Principal fails: a MinIO bucket policy cannot grant a user anything.
func (m *minioAccounts) Principal(_ context.Context, account string) (string, error) {
	if err := m.validAccount(account); err != nil {
		return "", err
	}
	return "", ErrNoPrincipal
}

// KnownPrincipal knows none: no bucket policy can name a MinIO user, so
// the policy's other writers hold no statement to any of its accounts.
func (*minioAccounts) KnownPrincipal(string) (string, bool) { return "", false }

// minioPolicy is the user's own policy: a bucket Grant's actions on one
// bucket, and no Principal (it is the user's).
type minioPolicy struct {
	Version   string
	Statement []minioStatement
}

type minioStatement struct {
	Effect   string
	Action   []string
	Resource []string
}

func grantPolicy(bucket, mode string) ([]byte, error) {
	if err := ValidateBucketName(bucket); err != nil {
		return nil, err
	}
	actions := slices.Clone(readActions)
	switch mode {
	case ReadOnly:
	case ReadWrite:
		actions = append(actions, writeActions...)
	default:
		return nil, fmt.Errorf("access mode %q is neither %s nor %s", mode, ReadOnly, ReadWrite)
	}
	return json.Marshal(minioPolicy{Version: policyVersion, Statement: []minioStatement{{
		Effect: "Allow", Action: actions,
		Resource: []string{"arn:aws:s3:::" + bucket, "arn:aws:s3:::" + bucket + "/*"},
	}}})
}

// GrantAccount reads the user and its policy first, and writes nothing
// when both are the grant already (two reads at each check). Otherwise it
// writes the account's policy (named as the account), makes it the user's
// only one, and reads the user back. MinIO adds to a user the policies of
// its groups, which Trellis neither made nor changes: a user in a group is
// reported (ErrGrantWidened), not served.
func (m *minioAccounts) GrantAccount(ctx context.Context, account, bucket, mode string) error {
	m.count("GrantAccount")
	if err := m.validAccount(account); err != nil {
		return err
	}
	doc, err := grantPolicy(bucket, mode)
	if err != nil {
		return err
	}
	info, err := m.userInfo(ctx, account)
	if err != nil {
		return err
	}
	if err := onlyInGroups(account, info); err != nil {
		return err
	}
	if info.PolicyName == account {
		current, err := m.call(ctx, http.MethodGet, "/info-canned-policy", url.Values{"name": {account}}, nil, false)
		if err != nil && !isMinIOCode(err, minioNoSuchPolicy) {
			return err
		}
		if err == nil && samePolicy(current, doc) {
			return nil
		}
	}
	if _, err := m.call(ctx, http.MethodPut, "/add-canned-policy", url.Values{"name": {account}}, doc, false); err != nil {
		return err
	}
	// set-user-or-group-policy replaces the user's policies with this one.
	set := url.Values{"policyName": {account}, "userOrGroup": {account}, "isGroup": {"false"}}
	if _, err := m.call(ctx, http.MethodPut, "/set-user-or-group-policy", set, nil, false); err != nil {
		return err
	}
	if info, err = m.userInfo(ctx, account); err != nil {
		return err
	}
	if info.PolicyName != account {
		return fmt.Errorf("%w: MinIO reports user %s with the policies %q, not only its own", ErrGrantWidened, account, info.PolicyName)
	}
	return onlyInGroups(account, info)
}

func (m *minioAccounts) userInfo(ctx context.Context, account string) (minioUserInfo, error) {
	answer, err := m.call(ctx, http.MethodGet, "/user-info", url.Values{"accessKey": {account}}, nil, false)
	if err != nil {
		return minioUserInfo{}, err
	}
	var info minioUserInfo
	if err := json.Unmarshal(answer, &info); err != nil {
		return minioUserInfo{}, fmt.Errorf("reading MinIO's answer about user %s: %w", account, err)
	}
	return info, nil
}

// onlyInGroups reports a user that is a member of any group.
func onlyInGroups(account string, info minioUserInfo) error {
	if len(info.MemberOf) == 0 {
		return nil
	}
	return fmt.Errorf("%w: MinIO user %s is a member of the groups %s, whose policies MinIO adds to its own; a MinIO admin must take it out of them",
		ErrGrantWidened, account, strings.Join(info.MemberOf, ", "))
}

// samePolicy reports whether the policy MinIO holds (as info-canned-policy
// renders it: its own order, maybe indented) says exactly what want says:
// one statement allowing the same actions on the same resources, and
// nothing else. Anything it cannot read is not the same.
func samePolicy(current, want []byte) bool {
	parse := func(doc []byte) (minioPolicy, bool) {
		d := json.NewDecoder(bytes.NewReader(doc))
		d.DisallowUnknownFields() // a Condition, a NotAction, a Principal…
		var p minioPolicy
		if d.Decode(&p) != nil || len(p.Statement) != 1 {
			return minioPolicy{}, false
		}
		slices.Sort(p.Statement[0].Action)
		slices.Sort(p.Statement[0].Resource)
		return p, true
	}
	got, ok := parse(current)
	expected, _ := parse(want)
	return ok && got.Version == expected.Version && got.Statement[0].Effect == expected.Statement[0].Effect &&
		slices.Equal(got.Statement[0].Action, expected.Statement[0].Action) &&
		slices.Equal(got.Statement[0].Resource, expected.Statement[0].Resource)
}

// DeleteAccount deletes the user, whose key stops working at once, then its
// policy. Either already gone is no error. A policy someone else attached
// to a group of theirs stays, and the error says so.
func (m *minioAccounts) DeleteAccount(ctx context.Context, account string) error {
	m.count("DeleteAccount")
	if err := m.validAccount(account); err != nil {
		return err
	}
	_, err := m.call(ctx, http.MethodDelete, "/remove-user", url.Values{"accessKey": {account}}, nil, false)
	if err != nil && !isMinIOCode(err, minioNoSuchUser) {
		return err
	}
	_, err = m.call(ctx, http.MethodDelete, "/remove-canned-policy", url.Values{"name": {account}}, nil, false)
	if err != nil && !isMinIOCode(err, minioNoSuchPolicy) {
		return err
	}
	return nil
}

// ListAccounts lists the users and the policies whose names are accounts
// of the driver's scope: a policy left by a DeleteAccount cut short is an
// account too, for the sweep to delete.
func (m *minioAccounts) ListAccounts(ctx context.Context) ([]string, error) {
	m.count("ListAccounts")
	sealed, err := m.call(ctx, http.MethodGet, "/list-users", nil, nil, false)
	if err != nil {
		return nil, err
	}
	answer, err := unseal(m.secret, sealed)
	if err != nil {
		return nil, err
	}
	var users map[string]json.RawMessage
	if err := json.Unmarshal(answer, &users); err != nil {
		return nil, fmt.Errorf("reading MinIO's list of users: %w", err)
	}
	answer, err = m.call(ctx, http.MethodGet, "/list-canned-policies", nil, nil, false)
	if err != nil {
		return nil, err
	}
	var policies map[string]json.RawMessage
	if err := json.Unmarshal(answer, &policies); err != nil {
		return nil, fmt.Errorf("reading MinIO's list of policies: %w", err)
	}
	var names []string
	for _, set := range []map[string]json.RawMessage{users, policies} {
		for name := range set {
			if m.validAccount(name) == nil && !slices.Contains(names, name) {
				names = append(names, name)
			}
		}
	}
	slices.Sort(names)
	return names, nil
}

// call sends one signed request to the admin API and returns the answer's
// body; sealed seals the body first. Errors of the store come back as
// minio.ErrorResponse, so Classify sorts them like any other store error;
// neither the request body (it may hold a secret key) nor the signed URL
// ever goes into an error.
func (m *minioAccounts) call(ctx context.Context, method, path string, query url.Values, body []byte, sealed bool) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, m.timeout)
	defer cancel()
	sent := body
	if sealed {
		var err error
		if sent, err = seal(m.secret, body); err != nil {
			return nil, err
		}
	}
	target := m.base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(sent))
	if err != nil {
		return nil, fmt.Errorf("MinIO admin request %s: %w", path, err)
	}
	sum := sha256.Sum256(sent)
	req.Header.Set("X-Amz-Content-Sha256", hex.EncodeToString(sum[:]))
	req = signer.SignV4(*req, m.access, m.secret, "", m.region)
	resp, err := m.http.Do(req)
	if err != nil {
		var urlErr *url.Error
		if errors.As(err, &urlErr) {
			return nil, &url.Error{Op: urlErr.Op, URL: m.base + path, Err: urlErr.Err}
		}
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAdminAnswer))
	if err != nil {
		return nil, fmt.Errorf("reading the MinIO admin API's answer to %s: %w", path, err)
	}
	if resp.StatusCode >= 300 {
		return nil, minioError(resp.StatusCode, answer, body)
	}
	return answer, nil
}

// minioError is the error an answer of the admin API stands for, as
// adminError for versitygw's: its status and the store's code (MinIO's
// admin API writes its errors in JSON), the code only when it is a plain
// identifier that is not part of what was sent.
func minioError(status int, answer, sent []byte) minio.ErrorResponse {
	var answered struct{ Code string }
	_ = json.Unmarshal(answer, &answered)
	e := minio.ErrorResponse{StatusCode: status, Code: http.StatusText(status)}
	if plainCode(answered.Code) && !bytes.Contains(sent, []byte(answered.Code)) {
		e.Code = answered.Code
	}
	return e
}

func isMinIOCode(err error, code string) bool {
	var resp minio.ErrorResponse
	return errors.As(err, &resp) && resp.Code == code
}
