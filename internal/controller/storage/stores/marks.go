package stores

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
)

// Every store account of a BucketAccess has an access key id derived from
// the ObjectStore's UID, the BucketAccess's UID and the key's version:
// "TRELLIS", the store's mark (10 hex digits of its UID's hash), 20 hex
// digits of the access UID's hash, "V" and the version. Nothing needs
// remembering to find them again: an account created just before a crash,
// or a store that failed half-way, is recognised by its name, deleting a
// BucketAccess deletes every account with its prefix, and the sweep
// (the storage sweep) revokes those of this store's mark whose BucketAccess is gone.
// The mark is the store object's, not the endpoint's: two ObjectStores on
// one store (in one cluster or in two) never take each other's accounts
// for their own.

// keyIDPrefix starts every access key id Trellis makes.
const keyIDPrefix = "TRELLIS"

// storeMark is the mark of one ObjectStore in the access key ids it issues.
func storeMark(storeUID types.UID) string {
	sum := sha256.Sum256([]byte(storeUID))
	return strings.ToUpper(hex.EncodeToString(sum[:5]))
}

// StoreKeyPrefix is the start of every access key id issued through one ObjectStore.
func StoreKeyPrefix(storeUID types.UID) string { return keyIDPrefix + storeMark(storeUID) }

// AccessKeyIDPrefix is the start of the access key ids of one BucketAccess
// in one ObjectStore.
func AccessKeyIDPrefix(storeUID, uid types.UID) string {
	return StoreKeyPrefix(storeUID) + strings.ToUpper(GrantID(uid)) + "V"
}

// AccessKeyID is the access key id of version v of a BucketAccess's key.
func AccessKeyID(storeUID, uid types.UID, v int32) string {
	return AccessKeyIDPrefix(storeUID, uid) + strconv.Itoa(int(v))
}

// grantIDLength is the length of a grant id (and of its part of a key id).
const grantIDLength = 20

// KeyOwner returns the grant id of the BucketAccess an access key id was
// issued to through the store of the given prefix (StoreKeyPrefix), and
// false for any id not of exactly that form: someone else's account, or one
// of another ObjectStore.
func KeyOwner(storePrefix, id string) (string, bool) {
	rest, ok := strings.CutPrefix(id, storePrefix)
	if !ok || len(rest) < grantIDLength+2 || rest[grantIDLength] != 'V' {
		return "", false
	}
	owner, version := rest[:grantIDLength], rest[grantIDLength+1:]
	for _, r := range owner {
		if (r < '0' || r > '9') && (r < 'A' || r > 'F') {
			return "", false
		}
	}
	if v, err := strconv.Atoi(version); err != nil || v < 0 || strconv.Itoa(v) != version {
		return "", false
	}
	return strings.ToLower(owner), true
}

// GrantID names the bucket-policy statement of a BucketAccess.
func GrantID(uid types.UID) string {
	sum := sha256.Sum256([]byte(uid))
	return hex.EncodeToString(sum[:grantIDLength/2])
}

// SecretKeyLength is the length of generated secret keys (AWS uses 40).
const SecretKeyLength = 40

const secretKeyAlphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

// NewSecretKey returns a random secret key: 40 letters and digits, 238 bits.
func NewSecretKey() (string, error) {
	var b strings.Builder
	max := big.NewInt(int64(len(secretKeyAlphabet)))
	for range SecretKeyLength {
		n, err := rand.Int(rand.Reader, max)
		if err != nil {
			return "", fmt.Errorf("generating a secret key: %w", err)
		}
		b.WriteByte(secretKeyAlphabet[n.Int64()])
	}
	return b.String(), nil
}

// KeyIDs are the access key ids of keys on record.
func KeyIDs(keys []storagev1.RetiringKey) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k.AccessKeyID)
	}
	return out
}
