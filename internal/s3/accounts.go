package s3

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"math/big"
	"strings"
)

// Accounts manages a store's own accounts, which S3 itself has no API for:
// what a BucketAccess needs to hand a workload keys of its own. Trellis
// names each account (one per key version of a BucketAccess, carrying the
// marks the sweep reads), and the store may make the key itself. On
// versitygw the account is the access key id; on an IAM store it is a
// user, whose key the server generates and whose name is not the key id.
// An account created here may do nothing until a bucket policy grants it
// something.
//
// Each store type with accounts has a driver of its own, in a file of its
// own (accounts_versitygw.go, accounts_iam.go, accounts_minio.go), that counts each of these
// calls once through Config.OnRequest; the storage controllers pick it by
// the ObjectStore's type (internal/controller/storage/stores:
// accountDrivers).
type Accounts interface {
	// IssueKey creates the account when it does not exist and gives it a
	// new key, returned once and never again: the account's other keys
	// stop working. The account itself may do nothing until a bucket
	// policy names its Principal.
	IssueKey(ctx context.Context, account string) (Key, error)
	// Principal is how a bucket policy names the account's keys: the access
	// key id on versitygw, the user's ARN on an IAM store.
	Principal(ctx context.Context, account string) (string, error)
	// KnownPrincipal is Principal as far as the driver knows it without
	// asking the store (an ARN learnt when it made the user); ok is false
	// when it does not. The policy's other writers read it for a key that
	// is granted but not yet on record.
	KnownPrincipal(account string) (principal string, ok bool)
	// DeleteAccount deletes the account and its keys, which stop working at
	// once; one that does not exist is no error.
	DeleteAccount(ctx context.Context, account string) error
	// ListAccounts returns the names of the accounts the driver may manage
	// (never a secret). Which of them are Trellis' is read from the marks in
	// the names, never from their being listed.
	ListAccounts(ctx context.Context) ([]string, error)
}

// Key is an access key as the store issued it.
type Key struct {
	AccessKeyID string
	SecretKey   string
}

// ErrAccessNotSupported is what a store without an account driver answers.
var ErrAccessNotSupported = errors.New("this store type does not support managed access")

// CannotScopeError says which promise of a BucketAccess key the store
// cannot keep: the key is not issued, or not granted, rather than one that
// does more than the access says.
type CannotScopeError struct{ What string }

func (e *CannotScopeError) Error() string {
	return "the store cannot keep a key to what its BucketAccess says: " + e.What
}

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

// secretKeyLength is the length of the secret keys Trellis makes (AWS's too).
const secretKeyLength = 40

const secretKeyAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// newSecretKey returns a random secret key: 40 letters and digits, 238 bits.
func newSecretKey() (string, error) {
	var b strings.Builder
	limit := big.NewInt(int64(len(secretKeyAlphabet)))
	for range secretKeyLength {
		n, err := rand.Int(rand.Reader, limit)
		if err != nil {
			return "", fmt.Errorf("generating a secret key: %w", err)
		}
		b.WriteByte(secretKeyAlphabet[n.Int64()])
	}
	return b.String(), nil
}
