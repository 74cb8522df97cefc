package access

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/s3"
)

// maxRetiringKeys bounds how many replaced keys wait for their grace period
// (the status field's bound): a rotation beyond it revokes the oldest early.
const maxRetiringKeys = 15

// accessSync is the store side of one BucketAccess reconcile: the account
// of the wanted key exists, the bucket policy grants exactly its keys, and
// replaced keys are revoked when their grace period ends. It is driven by
// what the status records, so a fake account driver and S3 client take it
// through every exit.
type accessSync struct {
	accounts s3.Accounts
	s3       s3.Client
	// lockPolicy serialises edits of the bucket's policy.
	lockPolicy func() (unlock func())
	// grants lists the grants of the bucket's live BucketAccesses, which
	// may stand in its policy beside this one's (nil: none).
	grants func(context.Context) ([]stores.LiveGrant, error)
	store  string
	bucket string
	grant  s3.Grant // ID and mode; principals are computed
	// current is the key the status records as issued (zero before the first).
	current stores.Key
	// want is the account of spec.keyVersion's key.
	want string
	// haveSecret: the Secret holds current with its secret key.
	haveSecret bool
	retiring   []storagev1.RetiringKey
	now        time.Time
	grace      time.Duration
}

// accessResult is what one reconcile of a BucketAccess found and did.
type accessResult struct {
	summary conditions.Summary
	// issued is set when a new secret key was made for want: the Secret must
	// get it before the status records it.
	issued *issuedKey
	// retiring is the list of replaced keys to record (when keysKnown).
	retiring  []storagev1.RetiringKey
	keysKnown bool
	// revoked lists the keys revoked now.
	revoked []string
	// next is when a replaced key is due to be revoked (zero: none waits).
	next time.Time
	// storeDown: the store stopped answering; its own check takes over.
	storeDown bool
	// grantFixes are other statements with Trellis' Sid prefix that
	// rewriting the policy took out or put back to what was recorded.
	grantFixes []stores.GrantFix
}

// issuedKey is a key just made: the Secret must get it before the status
// records it.
type issuedKey struct {
	stores.Key
	secretKey string
}

func (s accessSync) run(ctx context.Context) accessResult {
	if s.current.AccountName() != s.want || !s.haveSecret {
		return s.issue(ctx)
	}
	return s.keep(ctx)
}

// issue has the store make a key for the account of want (creating the
// account, or replacing its keys) and grants it, keeping the replaced key
// working until its grace period ends.
func (s accessSync) issue(ctx context.Context) accessResult {
	made, err := s.accounts.IssueKey(ctx, s.want)
	if err != nil {
		return s.storeFailed("creating the key's account", err)
	}
	principal := ""
	if _, byAccount := s.accounts.(s3.AccountGrants); !byAccount {
		if principal, err = s.accounts.Principal(ctx, s.want); err != nil {
			return s.storeFailed("naming the key's account in a bucket policy", err)
		}
	}
	key := stores.Key{AccessKeyID: made.AccessKeyID, Account: s.want, Principal: principal}.Recorded()
	// The account issued now is not retiring, whatever a status written by
	// another version of Trellis says (one that issued other names, and
	// retired this one): else it would be revoked with the old grace period.
	retiring := slices.DeleteFunc(slices.Clone(s.retiring), func(k storagev1.RetiringKey) bool {
		return stores.RetiringKeyOf(k).AccountName() == s.want || k.AccessKeyID == key.AccessKeyID
	})
	current := s.current.AccountName()
	if s.current.AccessKeyID != "" && current != s.want && !slices.Contains(stores.AccountNames(retiring), current) {
		revokeAt := metav1.NewTime(s.now.Add(s.grace).Truncate(time.Second))
		retiring = append(retiring, storagev1.RetiringKey{AccessKeyID: s.current.AccessKeyID, Account: s.current.Account, Principal: s.current.Principal, RevokeAt: &revokeAt})
	}
	for i := 0; len(retiring) > maxRetiringKeys && i < len(retiring); i++ {
		now := metav1.NewTime(s.now.Truncate(time.Second))
		retiring[i].RevokeAt = &now
	}
	// The replaced key stays granted: workloads switch to the new one
	// within the grace period.
	fixes, err := s.grantKeys(ctx, key, retiring)
	if err != nil {
		return s.storeFailed("granting the key on the bucket", err)
	}
	return accessResult{issued: &issuedKey{Key: key, secretKey: made.SecretKey}, retiring: retiring, keysKnown: true,
		next: nextRevocation(retiring), summary: s.granted(retiring), grantFixes: fixes}
}

// keep checks the grant of the issued key and revokes replaced keys whose
// grace period is over: first out of the policy, then the account.
func (s accessSync) keep(ctx context.Context) accessResult {
	var due, kept []storagev1.RetiringKey
	for _, k := range s.retiring {
		if k.RevokeAt == nil || !k.RevokeAt.After(s.now) {
			due = append(due, k)
		} else {
			kept = append(kept, k)
		}
	}
	fixes, err := s.grantKeys(ctx, s.current, kept)
	if err != nil {
		return s.storeFailed("granting the key on the bucket", err)
	}
	res := accessResult{retiring: kept, keysKnown: true, next: nextRevocation(kept), summary: s.granted(kept), grantFixes: fixes}
	for i, k := range due {
		if err := s.accounts.DeleteAccount(ctx, stores.RetiringKeyOf(k).AccountName()); err != nil {
			failed := s.storeFailed("revoking a replaced key", err)
			// The ones not yet revoked stay on record, out of the policy.
			failed.retiring, failed.keysKnown, failed.revoked = append(kept, due[i:]...), true, res.revoked
			failed.grantFixes = res.grantFixes
			return failed
		}
		res.revoked = append(res.revoked, k.AccessKeyID)
	}
	return res
}

// grantKeys grants the key and the retiring keys, and no other: by their
// principals in the bucket's policy, or, on a store that grants each
// account by a policy of its own (s3.AccountGrants), account by account,
// with the access's statement out of the bucket's policy. The keys beyond
// it are revoked after.
func (s accessSync) grantKeys(ctx context.Context, key stores.Key, retiring []storagev1.RetiringKey) ([]stores.GrantFix, error) {
	own, byAccount := s.accounts.(s3.AccountGrants)
	if !byAccount {
		return s.setGrant(ctx, append([]string{key.PrincipalName()}, stores.PrincipalNames(retiring)...))
	}
	fixes, err := s.setGrant(ctx, nil)
	if err != nil {
		return nil, err
	}
	for _, account := range append([]string{key.AccountName()}, stores.AccountNames(retiring)...) {
		if err := own.GrantAccount(ctx, account, s.bucket, s.grant.Mode); err != nil {
			return fixes, err
		}
	}
	return fixes, nil
}

// setGrant makes the access's grant name exactly principals; the other
// grants of the policy are held to what is recorded, as in every rewrite.
func (s accessSync) setGrant(ctx context.Context, principals []string) ([]stores.GrantFix, error) {
	g := s.grant
	g.Principals = principals
	edit, err := stores.BucketPolicy{S3: s.s3, Lock: s.lockPolicy, Bucket: s.bucket, Grants: s.grants}.Edit(ctx,
		func(current string) (string, error) { return s3.WithGrant(current, s.bucket, g) })
	return stores.WithoutSid(edit.Fixes, g.Sid()), err
}

func (s accessSync) granted(retiring []storagev1.RetiringKey) conditions.Summary {
	msg := fmt.Sprintf("the Secret holds a %s key to bucket %s in %s", s.grant.Mode, s.bucket, s.store)
	if n := len(retiring); n > 0 {
		msg += fmt.Sprintf("; %d replaced key(s) keep working until %s", n, nextRevocation(retiring).UTC().Format(time.RFC3339))
	}
	return conditions.Summary{Progress: conditions.Done, Reason: ReasonGranted, Message: msg}
}

// storeFailed turns a store error into the access's state: refused
// credentials, a store without accounts and a refused policy need a person;
// anything else heals.
func (s accessSync) storeFailed(what string, err error) accessResult {
	return accessResult{summary: storeProblem(s.store, what, err), storeDown: isUnreachable(err)}
}

func storeProblem(store, what string, err error) conditions.Summary {
	reason, msg := stores.ClassifyError(err)
	var invalid *stores.InvalidPolicyError
	progress := conditions.Working
	switch {
	case errors.Is(err, s3.ErrGrantWidened):
		reason, msg, progress = ReasonGrantWidened, err.Error(), conditions.Blocked
	case errors.As(err, &invalid):
		reason, msg, progress = stores.ReasonInvalidPolicy, invalid.Error(), conditions.Blocked
	case reason == s3.ReasonInvalidRequest:
		reason, progress = stores.ReasonInvalidPolicy, conditions.Blocked
	case stores.NeedsPerson(reason) || reason == s3.ReasonNotSupported:
		progress = conditions.Blocked
	}
	return conditions.Summary{Progress: progress, Reason: string(reason), Message: fmt.Sprintf("ObjectStore %s: %s: %s", store, what, msg)}
}

func isUnreachable(err error) bool {
	reason, _ := stores.ClassifyError(err)
	return reason == s3.ReasonStoreUnreachable
}

func nextRevocation(keys []storagev1.RetiringKey) time.Time {
	var next time.Time
	for _, k := range keys {
		if k.RevokeAt != nil && (next.IsZero() || k.RevokeAt.Before(&metav1.Time{Time: next})) {
			next = k.RevokeAt.Time
		}
	}
	return next
}

// accessRevocation is the store side of deleting a BucketAccess: its grant
// leaves the bucket's policy, then every account with its prefix goes, found
// by listing the store's accounts (so one created just before a crash goes
// too).
type accessRevocation struct {
	accounts   s3.Accounts
	s3         s3.Client
	lockPolicy func() (unlock func())
	grants     func(context.Context) ([]stores.LiveGrant, error)
	store      string
	bucket     string // "" when no bucket was ever granted
	grant      s3.Grant
	prefix     string
	// recorded are the accounts of the keys the status records (current
	// and retiring): deleted too, should they not carry the prefix (a store
	// object made anew under the same name has another mark).
	recorded []string
}

// revocationResult is what a revocation found: done, or why it waits.
type revocationResult struct {
	done      bool
	revoked   []string
	summary   conditions.Summary
	storeDown bool
	// store is the store revoked in, set by the reconciler.
	store *storagev1.ObjectStore
	// grantFixes are other statements with Trellis' Sid prefix that
	// taking the grant out took out or put back to what was recorded.
	grantFixes []stores.GrantFix
}

func (r accessRevocation) run(ctx context.Context) revocationResult {
	var fixes []stores.GrantFix
	if r.bucket != "" {
		g := r.grant
		g.Principals = nil
		edit, err := stores.BucketPolicy{S3: r.s3, Lock: r.lockPolicy, Bucket: r.bucket, Grants: r.grants}.Edit(ctx,
			func(current string) (string, error) { return s3.WithGrant(current, r.bucket, g) })
		if reason, _ := stores.ClassifyError(err); err != nil && reason != s3.ReasonBucketMissing {
			return r.wait("taking the grant out of the bucket policy", err)
		}
		fixes = stores.WithoutSid(edit.Fixes, g.Sid())
	}
	ids, err := r.accounts.ListAccounts(ctx)
	if err != nil {
		failed := r.wait("listing the store's accounts", err)
		failed.grantFixes = fixes
		return failed
	}
	res := revocationResult{done: true, grantFixes: fixes}
	for _, id := range ids {
		if !strings.HasPrefix(id, r.prefix) && !slices.Contains(r.recorded, id) {
			continue
		}
		if err := r.accounts.DeleteAccount(ctx, id); err != nil {
			failed := r.wait("deleting the key's account", err)
			failed.revoked, failed.grantFixes = res.revoked, fixes
			return failed
		}
		res.revoked = append(res.revoked, id)
	}
	return res
}

func (r accessRevocation) wait(what string, err error) revocationResult {
	s := storeProblem(r.store, what, err)
	s.Message += "; the key is revoked once this succeeds (removing the finalizer by hand leaves the account to the store sweep, once the store answers)"
	return revocationResult{summary: s, storeDown: isUnreachable(err)}
}
