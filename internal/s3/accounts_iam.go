package s3

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/minio/minio-go/v7"
)

// NewIAMAccounts manages accounts through the AWS IAM API (AWS, Ceph RGW,
// SeaweedFS's S3 gateway): each account is an IAM user named by Trellis,
// holding one access key the server generates. The user is given no policy
// of its own: the bucket policy grants it, naming its ARN (Principal), as it
// names an access key id on versitygw.
//
// iamEndpoint is where the IAM API is served (SeaweedFS: the S3 endpoint
// itself, the default). scope is the start of every account name this
// driver manages, the ObjectStore's mark: it refuses any other name, lists
// no other user, and puts its users under the path /trellis/<scope>/, so
// that a store which keeps paths (AWS) lists only them.
func NewIAMAccounts(cfg Config, iamEndpoint, scope string) (Accounts, error) {
	if iamEndpoint == "" {
		iamEndpoint = cfg.Endpoint
	}
	u, err := url.Parse(iamEndpoint)
	if err != nil || (u.Scheme != schemeHTTP && u.Scheme != schemeHTTPS) || u.Host == "" {
		return nil, fmt.Errorf("IAM endpoint %q is not an http(s) URL", iamEndpoint)
	}
	if cfg.AccessKey == "" || cfg.SecretKey == "" {
		return nil, ErrCredentialsIncomplete
	}
	if err := validScope(scope); err != nil {
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
	access, secret := cfg.AccessKey, cfg.SecretKey
	client := iam.New(iam.Options{
		Region:       region,
		BaseEndpoint: aws.String(strings.TrimRight(u.String(), "/")),
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: access, SecretAccessKey: secret}, nil
		}),
		HTTPClient: httpClient,
		// One request per call: the controllers retry, with back-off, and
		// count every request (Config.OnRequest).
		Retryer: aws.NopRetryer{},
	})
	return &iamAccounts{iam: client, scope: scope, path: "/trellis/" + scope + "/",
		onRequest: cfg.OnRequest, arns: map[string]string{}}, nil
}

type iamAccounts struct {
	iam       *iam.Client
	scope     string
	path      string
	onRequest func(op string)

	mu sync.Mutex
	// arns are the ARNs of users seen, by name: a user's ARN never changes,
	// and a bucket policy is written at every check of every access.
	arns map[string]string
}

var (
	_ Accounts = (*iamAccounts)(nil)
	_ Accounts = (*versitygw)(nil)
)

// Codes of the IAM API's errors that the driver handles itself.
const (
	iamNoSuchEntity  = "NoSuchEntity"
	iamAlreadyExists = "EntityAlreadyExists"
)

// maxIAMUserName is the IAM API's bound on user names.
const maxIAMUserName = 64

// validScope keeps the scope to what the account names may start with.
func validScope(scope string) error {
	if scope == "" || len(scope) > maxIAMUserName/2 {
		return fmt.Errorf("the IAM driver's scope must be 1 to %d characters, got %d", maxIAMUserName/2, len(scope))
	}
	for _, r := range scope {
		if (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return fmt.Errorf("the IAM driver's scope %q must be letters and digits only", scope)
		}
	}
	return nil
}

// validAccount refuses a name this driver may not manage.
func (a *iamAccounts) validAccount(account string) error {
	if err := validAccessKeyID(account); err != nil {
		return err
	}
	if len(account) > maxIAMUserName {
		return fmt.Errorf("account %q is longer than an IAM user name may be (%d)", account, maxIAMUserName)
	}
	if !strings.HasPrefix(account, a.scope) || account == a.scope {
		return fmt.Errorf("account %q is not one of this ObjectStore's (they start with %s)", account, a.scope)
	}
	return nil
}

// count counts one operation of the driver (Config.OnRequest), however
// many requests of the IAM API it takes.
func (a *iamAccounts) count(op string) {
	if a.onRequest != nil {
		a.onRequest(op)
	}
}

// IssueKey creates the user (or finds it made before a crash), deletes the
// keys it holds, and has the server generate a new one. The old keys go
// first: AWS holds at most two per user, and a key whose secret was lost
// is of no use to anyone.
func (a *iamAccounts) IssueKey(ctx context.Context, account string) (Key, error) {
	a.count("IssueKey")
	if err := a.validAccount(account); err != nil {
		return Key{}, err
	}
	created, err := a.iam.CreateUser(ctx, &iam.CreateUserInput{UserName: aws.String(account), Path: aws.String(a.path)})
	switch {
	case err == nil:
		a.remember(account, aws.ToString(created.User.Arn))
	case iamCode(err) != iamAlreadyExists:
		return Key{}, iamError(err)
	}
	if err := a.deleteKeys(ctx, account); err != nil {
		return Key{}, err
	}
	made, err := a.iam.CreateAccessKey(ctx, &iam.CreateAccessKeyInput{UserName: aws.String(account)})
	if err != nil {
		return Key{}, iamError(err)
	}
	key := Key{AccessKeyID: aws.ToString(made.AccessKey.AccessKeyId), SecretKey: aws.ToString(made.AccessKey.SecretAccessKey)}
	if key.AccessKeyID == "" || key.SecretKey == "" {
		return Key{}, fmt.Errorf("the IAM API made a key for %s but did not return it", account)
	}
	return key, nil
}

// Principal is the user's ARN, as the server reports it: its form (account
// id, path) is the server's to say.
func (a *iamAccounts) Principal(ctx context.Context, account string) (string, error) {
	if err := a.validAccount(account); err != nil {
		return "", err
	}
	a.mu.Lock()
	arn, ok := a.arns[account]
	a.mu.Unlock()
	if ok {
		return arn, nil
	}
	a.count("Principal")
	user, err := a.iam.GetUser(ctx, &iam.GetUserInput{UserName: aws.String(account)})
	if err != nil {
		return "", iamError(err)
	}
	arn = aws.ToString(user.User.Arn)
	if !strings.HasPrefix(arn, "arn:") || !strings.HasSuffix(arn, "/"+account) {
		// Without a principal for the user alone, no grant names only it.
		return "", &CannotScopeError{What: fmt.Sprintf("the IAM API reports user %s with ARN %s, which a bucket policy cannot name it by alone", account, quoteShort(arn))}
	}
	a.remember(account, arn)
	return arn, nil
}

// KnownPrincipal is the ARN of a user this driver made or asked about.
func (a *iamAccounts) KnownPrincipal(account string) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	arn, ok := a.arns[account]
	return arn, ok
}

func (a *iamAccounts) remember(account, arn string) {
	if !strings.HasPrefix(arn, "arn:") || !strings.HasSuffix(arn, "/"+account) {
		return // Principal asks again, and says what is wrong.
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.arns[account] = arn
}

// DeleteAccount deletes the user's keys, which stops them at once, then the
// user. A user that Trellis' keys are gone from but that someone else gave
// more (a policy, a group) is not deleted: the IAM API refuses, and the
// error says so.
func (a *iamAccounts) DeleteAccount(ctx context.Context, account string) error {
	a.count("DeleteAccount")
	if err := a.validAccount(account); err != nil {
		return err
	}
	if err := a.deleteKeys(ctx, account); err != nil {
		if iamCode(err) == iamNoSuchEntity {
			a.forget(account)
			return nil
		}
		return err
	}
	if _, err := a.iam.DeleteUser(ctx, &iam.DeleteUserInput{UserName: aws.String(account)}); err != nil && iamCode(err) != iamNoSuchEntity {
		return iamError(err)
	}
	a.forget(account)
	return nil
}

func (a *iamAccounts) forget(account string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.arns, account)
}

// deleteKeys deletes every access key of the user.
func (a *iamAccounts) deleteKeys(ctx context.Context, account string) error {
	pages := iam.NewListAccessKeysPaginator(a.iam, &iam.ListAccessKeysInput{UserName: aws.String(account)})
	var ids []string
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return iamError(err)
		}
		for _, k := range page.AccessKeyMetadata {
			ids = append(ids, aws.ToString(k.AccessKeyId))
		}
	}
	for _, id := range ids {
		_, err := a.iam.DeleteAccessKey(ctx, &iam.DeleteAccessKeyInput{UserName: aws.String(account), AccessKeyId: aws.String(id)})
		if err != nil && iamCode(err) != iamNoSuchEntity {
			return iamError(err)
		}
	}
	return nil
}

// ListAccounts lists the users under the driver's path whose names start
// with its scope. A store that ignores paths (SeaweedFS) answers with all
// its users; the names still have to carry the scope.
func (a *iamAccounts) ListAccounts(ctx context.Context) ([]string, error) {
	a.count("ListAccounts")
	pages := iam.NewListUsersPaginator(a.iam, &iam.ListUsersInput{PathPrefix: aws.String(a.path)})
	var names []string
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, iamError(err)
		}
		for _, u := range page.Users {
			if name := aws.ToString(u.UserName); a.validAccount(name) == nil {
				names = append(names, name)
			}
		}
	}
	return names, nil
}

// iamCode is the IAM API's error code of err ("" for no answer of it).
func iamCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	var resp minio.ErrorResponse
	if errors.As(err, &resp) {
		return resp.Code
	}
	return ""
}

// iamError turns an answer of the IAM API into the minio.ErrorResponse that
// Classify sorts like any other store error: its status and code only, as
// for versitygw's admin API (adminError). Errors with no answer (the store
// did not answer) are returned as they are.
func iamError(err error) error {
	var resp *smithyhttp.ResponseError
	if !errors.As(err, &resp) || resp.HTTPStatusCode() == 0 {
		return err
	}
	status := resp.HTTPStatusCode()
	e := minio.ErrorResponse{StatusCode: status, Code: http.StatusText(status)}
	var api smithy.APIError
	if errors.As(err, &api) && plainCode(api.ErrorCode()) {
		e.Code = api.ErrorCode()
	}
	return e
}
