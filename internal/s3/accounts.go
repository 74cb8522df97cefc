package s3

import (
	"context"
	"errors"
	"fmt"
)

// Accounts manages a store's own accounts, which S3 itself has no API for:
// what a BucketAccess needs to hand a workload keys of its own. An account
// created here may do nothing until a bucket policy grants it something.
//
// Each store type with accounts has a driver of its own, in a file of its
// own (accounts_versitygw.go), that counts each of these calls once through
// Config.OnRequest; the storage controllers pick it by the ObjectStore's
// type (internal/controller/storage/stores: Backends, hasAccounts).
type Accounts interface {
	// PutAccount creates the account, or, when it exists already, gives it
	// the new secret key (the old one stops working).
	PutAccount(ctx context.Context, accessKeyID, secretKey string) error
	// DeleteAccount deletes the account; one that does not exist is no error.
	DeleteAccount(ctx context.Context, accessKeyID string) error
	// ListAccounts returns the access key ids of all accounts (never a secret).
	ListAccounts(ctx context.Context) ([]string, error)
}

// ErrAccessNotSupported is what a store without an account driver answers.
var ErrAccessNotSupported = errors.New("this store type does not support managed access")

// validAccessKeyID keeps access key ids to what needs no escaping anywhere
// (SigV4 credential scopes, URLs, policy documents): letters and digits.
func validAccessKeyID(id string) error {
	if len(id) < 16 || len(id) > 128 {
		return fmt.Errorf("access key id must be 16 to 128 characters, got %d", len(id))
	}
	for _, r := range id {
		if (r < 'A' || r > 'Z') && (r < 'a' || r > 'z') && (r < '0' || r > '9') {
			return fmt.Errorf("access key id %q must be letters and digits only", id)
		}
	}
	return nil
}
