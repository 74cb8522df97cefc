package stores

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
)

// Every store account of a BucketAccess (on versitygw also its access key
// id; on an IAM store the user's name) has a name derived from the
// ObjectStore's UID, the BucketAccess's UID and the key's version:
// "TRELLIS", the store's mark (10 hex digits of its UID's hash), 20 hex
// digits of the access UID's hash, "V" and the version. Nothing needs
// remembering to find them again: an account created just before a crash,
// or a store that failed half-way, is recognised by its name, deleting a
// BucketAccess deletes every account with its prefix, and the sweep
// (the storage sweep) revokes those of this store's mark whose BucketAccess is gone.
// The mark is the store object's, not the endpoint's: two ObjectStores on
// one store (in one cluster or in two) never take each other's accounts
// for their own.

// keyIDPrefix starts every account name Trellis makes.
const keyIDPrefix = "TRELLIS"

// storeMark is the mark of one ObjectStore in the account names it makes.
func storeMark(storeUID types.UID) string {
	sum := sha256.Sum256([]byte(storeUID))
	return strings.ToUpper(hex.EncodeToString(sum[:5]))
}

// StoreKeyPrefix is the start of every account name made through one
// ObjectStore: the part of the sweep's mark that is the store's.
func StoreKeyPrefix(storeUID types.UID) string { return keyIDPrefix + storeMark(storeUID) }

// AccountPrefix is the start of the account names of one BucketAccess
// in one ObjectStore.
func AccountPrefix(storeUID, uid types.UID) string {
	return StoreKeyPrefix(storeUID) + strings.ToUpper(GrantID(uid)) + "V"
}

// AccountName is the store account of version v of a BucketAccess's key:
// on versitygw its access key id too, on an IAM store the user's name.
func AccountName(storeUID, uid types.UID, v int32) string {
	return AccountPrefix(storeUID, uid) + strconv.Itoa(int(v))
}

// grantIDLength is the length of a grant id (and of its part of a key id).
const grantIDLength = 20

// KeyOwner returns the grant id of the BucketAccess an account was made
// for through the store of the given prefix (StoreKeyPrefix), and false for
// any name not of exactly that form: someone else's account, or one of
// another ObjectStore.
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

// Key is a key of a BucketAccess as its status records it: the access key
// id, the store account that revoking it deletes, and the principal its
// grant names. The last two are unset where they are the access key id
// (versitygw, and statuses written before IAM stores).
type Key struct {
	AccessKeyID, Account, Principal string
}

// CurrentKey is the key the status records as the Secret's (ok false: none).
func CurrentKey(st *storagev1.BucketAccessStatus) (Key, bool) {
	return Key{AccessKeyID: st.AccessKeyID, Account: st.Account, Principal: st.Principal}, st.AccessKeyID != ""
}

// RetiringKeyOf is the key of a retiring one.
func RetiringKeyOf(k storagev1.RetiringKey) Key {
	return Key{AccessKeyID: k.AccessKeyID, Account: k.Account, Principal: k.Principal}
}

// AccountName is the store account of the key.
func (k Key) AccountName() string {
	if k.Account == "" {
		return k.AccessKeyID
	}
	return k.Account
}

// PrincipalName is how a bucket policy names the key.
func (k Key) PrincipalName() string {
	if k.Principal == "" {
		return k.AccessKeyID
	}
	return k.Principal
}

// Recorded is the key as a status records it: account and principal only
// where they are not the access key id.
func (k Key) Recorded() Key {
	if k.Account == k.AccessKeyID {
		k.Account = ""
	}
	if k.Principal == k.AccessKeyID {
		k.Principal = ""
	}
	return k
}

// KeyIDs are the access key ids of keys on record.
func KeyIDs(keys []storagev1.RetiringKey) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k.AccessKeyID)
	}
	return out
}

// AccountNames are the store accounts of keys on record.
func AccountNames(keys []storagev1.RetiringKey) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, RetiringKeyOf(k).AccountName())
	}
	return out
}

// PrincipalNames are the principals of keys on record.
func PrincipalNames(keys []storagev1.RetiringKey) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, RetiringKeyOf(k).PrincipalName())
	}
	return out
}
