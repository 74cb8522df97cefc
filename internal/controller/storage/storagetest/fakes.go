package storagetest

import (
	"context"
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
// sets are returned instead. It records the calls made.
type FakeAccounts struct {
	Accounts             map[string]string // access key id -> secret
	PutErr, DeleteErr    error
	ListErr              error
	Calls                []string
	DeleteFailsAfterCall int // DeleteAccount fails from this call on (0: never)
	Deletes              int
	// OnList runs as ListAccounts begins: the world moving on while the
	// store answers.
	OnList func()
}

// PutAccount records the call and, unless the test set its error, does it.
func (f *FakeAccounts) PutAccount(_ context.Context, id, secret string) error {
	f.Calls = append(f.Calls, "PutAccount "+id)
	if f.PutErr != nil {
		return f.PutErr
	}
	if f.Accounts == nil {
		f.Accounts = map[string]string{}
	}
	f.Accounts[id] = secret
	return nil
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
