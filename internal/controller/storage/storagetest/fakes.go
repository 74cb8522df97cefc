package storagetest

import (
	"context"
	"fmt"
	"slices"

	"github.com/trellis-dev/trellis/internal/s3"
)

// FakeS3 is an s3.Client whose answers the test sets; unset ones succeed
// (a missing bucket, no owner, no objects, no settings). It records the
// calls made, and the settings written.
type FakeS3 struct {
	PingErr                       error
	Exists                        bool
	ExistsErr                     error
	OwnerTag                      s3.Owner
	OwnerErr                      error
	CreateErr, SetOwnerErr        error
	Objects                       int
	CountErr, DeleteErr, ProbeErr error

	VersioningStatus                string
	VersioningErr, SetVersioningErr error
	PolicyDoc                       string
	PolicyErr, SetPolicyErr         error
	CORSRules                       []s3.CORSRule
	CORSErr, SetCORSErr             error
	LifecycleRules                  []s3.ExpirationRule
	LifecycleErr, SetLifecycleErr   error
	Calls                           []string
	SetOwnerTo                      s3.Owner
	// OnSetPolicy runs as SetPolicy is called: the world moving on.
	OnSetPolicy func()
}

// Ping records the call and answers what the test set.
func (f *FakeS3) Ping(context.Context) error { f.Calls = append(f.Calls, "Ping"); return f.PingErr }

// BucketExists records the call and answers what the test set.
func (f *FakeS3) BucketExists(context.Context, string) (bool, error) {
	f.Calls = append(f.Calls, "BucketExists")
	return f.Exists, f.ExistsErr
}

// CreateBucket records the call and answers what the test set.
func (f *FakeS3) CreateBucket(context.Context, string) error {
	f.Calls = append(f.Calls, "CreateBucket")
	return f.CreateErr
}

// DeleteBucket records the call and answers what the test set.
func (f *FakeS3) DeleteBucket(context.Context, string) error {
	f.Calls = append(f.Calls, "DeleteBucket")
	return f.DeleteErr
}

// Owner records the call and answers what the test set.
func (f *FakeS3) Owner(context.Context, string) (s3.Owner, error) {
	f.Calls = append(f.Calls, "Owner")
	return f.OwnerTag, f.OwnerErr
}

// SetOwner records the call and, unless the test set its error, does it.
func (f *FakeS3) SetOwner(_ context.Context, _ string, o s3.Owner) error {
	f.Calls = append(f.Calls, "SetOwner")
	f.SetOwnerTo = o
	return f.SetOwnerErr
}

// CountObjects records the call and answers what the test set.
func (f *FakeS3) CountObjects(context.Context, string, int) (int, error) {
	f.Calls = append(f.Calls, "CountObjects")
	return f.Objects, f.CountErr
}

// Probe records the call and answers what the test set.
func (f *FakeS3) Probe(context.Context, string) error {
	f.Calls = append(f.Calls, "Probe")
	return f.ProbeErr
}

// Versioning records the call and answers what the test set.
func (f *FakeS3) Versioning(context.Context, string) (string, error) {
	f.Calls = append(f.Calls, "Versioning")
	return f.VersioningStatus, f.VersioningErr
}

// SetVersioning records the call and, unless the test set its error, does it.
func (f *FakeS3) SetVersioning(_ context.Context, _ string, v string) error {
	f.Calls = append(f.Calls, "SetVersioning")
	if f.SetVersioningErr == nil {
		f.VersioningStatus = v
	}
	return f.SetVersioningErr
}

// Policy records the call and answers what the test set.
func (f *FakeS3) Policy(context.Context, string) (string, error) {
	f.Calls = append(f.Calls, "Policy")
	return f.PolicyDoc, f.PolicyErr
}

// SetPolicy records the call and, unless the test set its error, does it.
func (f *FakeS3) SetPolicy(_ context.Context, _ string, p string) error {
	f.Calls = append(f.Calls, "SetPolicy")
	if f.OnSetPolicy != nil {
		f.OnSetPolicy()
	}
	if f.SetPolicyErr == nil {
		f.PolicyDoc = p
	}
	return f.SetPolicyErr
}

// CORS records the call and answers what the test set.
func (f *FakeS3) CORS(context.Context, string) ([]s3.CORSRule, error) {
	f.Calls = append(f.Calls, "CORS")
	return f.CORSRules, f.CORSErr
}

// SetCORS records the call and, unless the test set its error, does it.
func (f *FakeS3) SetCORS(_ context.Context, _ string, rules []s3.CORSRule) error {
	f.Calls = append(f.Calls, "SetCORS")
	if f.SetCORSErr == nil {
		f.CORSRules = rules
	}
	return f.SetCORSErr
}

// Lifecycle records the call and answers what the test set.
func (f *FakeS3) Lifecycle(context.Context, string) ([]s3.ExpirationRule, error) {
	f.Calls = append(f.Calls, "Lifecycle")
	return f.LifecycleRules, f.LifecycleErr
}

// SetLifecycle records the call and, unless the test set its error, does it.
func (f *FakeS3) SetLifecycle(_ context.Context, _ string, rules []s3.ExpirationRule) error {
	f.Calls = append(f.Calls, "SetLifecycle")
	if f.SetLifecycleErr == nil {
		f.LifecycleRules = rules
	}
	return f.SetLifecycleErr
}

// FakeAccounts is an s3.Accounts holding accounts in a map; errors the test
// sets are returned instead. It records the calls made. By default it is
// versitygw's kind of store (the account is the key id, and a policy names
// it so); with IAM set, an IAM store's (the store makes the key id, and a
// policy names the account by ARN).
type FakeAccounts struct {
	Accounts map[string]string // account -> secret key
	// IAM: keys and principals as an IAM store makes them (IAMKeyID, IAMARN).
	IAM                  bool
	IssueErr, DeleteErr  error
	PrincipalErr         error
	ListErr              error
	Calls                []string
	DeleteFailsAfterCall int // DeleteAccount fails from this call on (0: never)
	Deletes              int
	Issued               int
	// OnList runs as ListAccounts begins: the world moving on while the
	// store answers.
	OnList func()
}

// IAMKeyID is the key id FakeAccounts in IAM mode makes the n-th time.
func IAMKeyID(n int) string { return fmt.Sprintf("AKIAFAKE%012d", n) }

// IAMARN is how FakeAccounts in IAM mode names an account in a policy.
func IAMARN(account string) string { return "arn:aws:iam::000000000000:user/" + account }

// KnownPrincipal answers what Principal would, for an account it holds.
func (f *FakeAccounts) KnownPrincipal(account string) (string, bool) {
	if _, ok := f.Accounts[account]; !ok {
		return "", false
	}
	if f.IAM {
		return IAMARN(account), true
	}
	return account, true
}

// IssueKey records the call and, unless the test set its error, makes the
// account a new key.
func (f *FakeAccounts) IssueKey(_ context.Context, account string) (s3.Key, error) {
	f.Calls = append(f.Calls, "IssueKey "+account)
	if f.IssueErr != nil {
		return s3.Key{}, f.IssueErr
	}
	if f.Accounts == nil {
		f.Accounts = map[string]string{}
	}
	f.Issued++
	key := s3.Key{AccessKeyID: account, SecretKey: fmt.Sprintf("secret%034d", f.Issued)}
	if f.IAM {
		key.AccessKeyID = IAMKeyID(f.Issued)
	}
	f.Accounts[account] = key.SecretKey
	return key, nil
}

// Principal records the call and answers the account, or its ARN.
func (f *FakeAccounts) Principal(_ context.Context, account string) (string, error) {
	f.Calls = append(f.Calls, "Principal "+account)
	if f.PrincipalErr != nil {
		return "", f.PrincipalErr
	}
	if f.IAM {
		return IAMARN(account), nil
	}
	return account, nil
}

// DeleteAccount records the call and, unless the test set its error, does it.
func (f *FakeAccounts) DeleteAccount(_ context.Context, id string) error {
	f.Calls = append(f.Calls, "DeleteAccount "+id)
	f.Deletes++
	if f.DeleteErr != nil && (f.DeleteFailsAfterCall == 0 || f.Deletes >= f.DeleteFailsAfterCall) {
		return f.DeleteErr
	}
	delete(f.Accounts, id)
	return nil
}

// ListAccounts records the call and answers what the test set.
func (f *FakeAccounts) ListAccounts(context.Context) ([]string, error) {
	f.Calls = append(f.Calls, "ListAccounts")
	if f.OnList != nil {
		f.OnList()
	}
	if f.ListErr != nil {
		return nil, f.ListErr
	}
	ids := make([]string, 0, len(f.Accounts))
	for id := range f.Accounts {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

// FakeAccountGrants is FakeAccounts as a store that grants each account by
// a policy of its own (s3.AccountGrants, MinIO's kind): no principal, and
// Grants holds each account's grant as "bucket mode".
type FakeAccountGrants struct {
	FakeAccounts
	Grants   map[string]string
	GrantErr error
}

var _ s3.AccountGrants = (*FakeAccountGrants)(nil)

// Principal records the call and answers that there is none.
func (f *FakeAccountGrants) Principal(_ context.Context, account string) (string, error) {
	f.Calls = append(f.Calls, "Principal "+account)
	return "", s3.ErrNoPrincipal
}

// KnownPrincipal knows none.
func (*FakeAccountGrants) KnownPrincipal(string) (string, bool) { return "", false }

// GrantAccount records the call and, unless the test set its error, makes
// the grant the account's.
func (f *FakeAccountGrants) GrantAccount(_ context.Context, account, bucket, mode string) error {
	f.Calls = append(f.Calls, "GrantAccount "+account)
	if f.GrantErr != nil {
		return f.GrantErr
	}
	if f.Grants == nil {
		f.Grants = map[string]string{}
	}
	f.Grants[account] = bucket + " " + mode
	return nil
}

// DeleteAccount deletes the account and its grant.
func (f *FakeAccountGrants) DeleteAccount(ctx context.Context, id string) error {
	err := f.FakeAccounts.DeleteAccount(ctx, id)
	if err == nil {
		delete(f.Grants, id)
	}
	return err
}
