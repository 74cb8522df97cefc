package stores

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/s3"
)

// Trellis' grants in a bucket policy are exactly the ones it recorded: of
// the statements whose Sid has the reserved prefix, every rewrite of a
// policy by Trellis (a StorageBucket's spec.policy, a BucketAccess's grant,
// the sweep) keeps only the grants of the bucket's live BucketAccesses, as
// their status and spec say, and each no wider than that (s3.KeepGrants).
// A prefixed statement someone wrote into the policy directly is taken out
// or put back, and a Warning on the StorageBucket names its Sid.

// LiveGrant is a grant that may stand in a bucket's policy, and whose it is.
type LiveGrant struct {
	s3.Grant
	Access types.NamespacedName
}

// LiveGrants returns the grants that may stand in the policy of bucket in
// store: one per BucketAccess in the cache that is the bucket's, by what
// its status records (store and bucket, put on record before its first
// account) or by its StorageBucket's claim of the bucket (which the cache
// shows before an access's first status write). Each names every key its
// access may have granted: the key of spec.keyVersion (granted before it
// goes on record, so named by its account and by what known says of it),
// the current one and the retiring ones by the principals the status
// records. On a store that grants accounts by their own policies
// (GrantsByAccount) each grant names no one.
// A BucketAccess being deleted still counts: its own deletion takes its
// grant out.
//
// Call it with the bucket's policy lock held, before reading the policy:
// an access that granted something before the lock was taken had been read
// from this cache before, so the cache has it too, or it is gone.
func LiveGrants(ctx context.Context, c client.Reader, known KnownPrincipal, store *storagev1.ObjectStore, bucket string) ([]LiveGrant, error) {
	key := StoreBucketKey(store.Name, bucket)
	found := map[types.UID]*storagev1.BucketAccess{}
	recorded := &storagev1.BucketAccessList{}
	if err := c.List(ctx, recorded, client.MatchingFields{AccessTargetIndex: key}); err != nil {
		return nil, fmt.Errorf("listing the BucketAccesses of bucket %s: %w", bucket, err)
	}
	for i := range recorded.Items {
		found[recorded.Items[i].UID] = &recorded.Items[i]
	}
	claims := &storagev1.StorageBucketList{}
	if err := c.List(ctx, claims, client.MatchingFields{BucketClaimIndex: key}); err != nil {
		return nil, fmt.Errorf("listing the StorageBuckets of bucket %s: %w", bucket, err)
	}
	for _, sb := range claims.Items {
		list := &storagev1.BucketAccessList{}
		if err := c.List(ctx, list, client.InNamespace(sb.Namespace), client.MatchingFields{AccessBucketIndex: sb.Name}); err != nil {
			return nil, fmt.Errorf("listing the BucketAccesses of StorageBucket %s/%s: %w", sb.Namespace, sb.Name, err)
		}
		for i := range list.Items {
			found[list.Items[i].UID] = &list.Items[i]
		}
	}
	out := make([]LiveGrant, 0, len(found))
	byAccount := GrantsByAccount(store)
	for _, a := range found {
		if byAccount {
			// Granted by each account's own policy: no statement of the
			// bucket's policy stands for it, and any that says so goes.
			out = append(out, LiveGrant{
				Grant:  s3.Grant{ID: GrantID(a.UID), Mode: string(a.Spec.Mode)},
				Access: types.NamespacedName{Namespace: a.Namespace, Name: a.Name},
			})
			continue
		}
		// The key of spec.keyVersion, by its account (its principal on
		// versitygw) and by the principal the account driver learnt as it
		// issued it (an IAM user's ARN): granted before it goes on record.
		want := AccountName(store.UID, a.UID, a.Spec.KeyVersion)
		keys := []string{want}
		if p, ok := known(want); ok && p != want {
			keys = append(keys, p)
		}
		if current, ok := CurrentKey(&a.Status); ok {
			keys = append(keys, current.PrincipalName())
		}
		keys = append(keys, PrincipalNames(a.Status.RetiringKeys)...)
		out = append(out, LiveGrant{
			Grant:  s3.Grant{ID: GrantID(a.UID), Principals: keys, Mode: string(a.Spec.Mode)},
			Access: types.NamespacedName{Namespace: a.Namespace, Name: a.Name},
		})
	}
	slices.SortFunc(out, func(a, b LiveGrant) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// KnownPrincipal is how a bucket policy names an account, as far as known
// without asking the store (s3.Accounts.KnownPrincipal).
type KnownPrincipal func(account string) (string, bool)

// GrantsOf returns the function that reads the live grants of a bucket.
func (s *Clients) GrantsOf(c client.Reader, store *storagev1.ObjectStore, bucket string) func(context.Context) ([]LiveGrant, error) {
	return func(ctx context.Context) ([]LiveGrant, error) {
		return LiveGrants(ctx, c, s.knownPrincipal(store), store, bucket)
	}
}

// knownPrincipal asks the store's account driver, if one was built, for
// the principals it knows; the leader's, which made the keys, knows those
// it issued.
func (s *Clients) knownPrincipal(store *storagev1.ObjectStore) KnownPrincipal {
	return func(account string) (string, bool) {
		s.mu.Lock()
		c, ok := s.clients[store.Name]
		s.mu.Unlock()
		if !ok || c.accounts == nil {
			return "", false
		}
		return c.accounts.KnownPrincipal(account)
	}
}

// BucketPolicy is the means to edit one bucket's policy.
type BucketPolicy struct {
	S3 s3.Client
	// Lock serialises the edits of the bucket's policy in this manager.
	Lock   func() (unlock func())
	Bucket string
	// Grants lists the grants that may stand in the policy; nil: none.
	Grants func(context.Context) ([]LiveGrant, error)
	// Unreadable, when set, gives the policy to write in place of one
	// that cannot be read (why); otherwise such a policy is an error.
	Unreadable func(grants []s3.Grant, why error) (string, error)
}

// PolicyEdit is what one edit of a bucket's policy did.
type PolicyEdit struct {
	// Written: the policy was rewritten (or that was tried, and failed).
	Written bool
	// Fixes are the grant statements the rewrite took out or put back to
	// what was recorded.
	Fixes []GrantFix
	// Restricted names the statements a restrict took out (the StorageBucket's
	// public-access guard, storage/public_access.go).
	Restricted []string
}

// GrantFix is a grant statement taken out of a policy, or put back to the
// grant of a BucketAccess.
type GrantFix struct {
	s3.GrantFix
	// Access is the BucketAccess the statement was put back to (when Rewritten).
	Access types.NamespacedName
}

// Edit reads the bucket's policy, holds its grants to the live ones, applies
// fn (nil: nothing more), and writes the result only when it says something
// else. The lock makes the read-modify-write whole against the other
// writers of the same policy in this manager.
func (p BucketPolicy) Edit(ctx context.Context, fn func(current string) (string, error)) (PolicyEdit, error) {
	unlock := p.Lock()
	defer unlock()
	var live []LiveGrant
	if p.Grants != nil {
		var err error
		if live, err = p.Grants(ctx); err != nil {
			return PolicyEdit{}, &CacheError{Err: err}
		}
	}
	current, err := p.S3.Policy(ctx, p.Bucket)
	if err != nil {
		return PolicyEdit{}, err
	}
	grants := make([]s3.Grant, 0, len(live))
	for _, g := range live {
		grants = append(grants, g.Grant)
	}
	next, fixed, err := s3.KeepGrants(current, p.Bucket, grants)
	if err != nil && p.Unreadable != nil {
		next, err = p.Unreadable(grants, err)
		fixed, fn = nil, nil
	}
	if err != nil {
		return PolicyEdit{}, &InvalidPolicyError{Err: err}
	}
	if fn != nil {
		if next, err = fn(next); err != nil {
			return PolicyEdit{}, &InvalidPolicyError{Err: err}
		}
	}
	if s3.SamePolicy(current, next) {
		return PolicyEdit{}, nil
	}
	if err := p.S3.SetPolicy(ctx, p.Bucket, next); err != nil {
		// Tried: its accesses look at their grants all the same.
		return PolicyEdit{Written: true}, err
	}
	res := PolicyEdit{Written: true}
	for _, f := range fixed {
		fix := GrantFix{GrantFix: f}
		if i := slices.IndexFunc(live, func(g LiveGrant) bool { return g.Sid() == f.Sid }); i >= 0 && f.Rewritten {
			fix.Access = live[i].Access
		}
		res.Fixes = append(res.Fixes, fix)
	}
	return res, nil
}

// WithoutSid drops the fixes of one Sid: an access's own grant, which its
// own edit sets anyway.
func WithoutSid(fixes []GrantFix, sid string) []GrantFix {
	return slices.DeleteFunc(fixes, func(f GrantFix) bool { return f.Sid == sid })
}

// GrantFixActions are the Warnings about grant statements a rewrite of
// bucket's policy took out or put back; they name the Sid, never a key.
func GrantFixActions(bucket string, fixes []GrantFix) []Action {
	out := make([]Action, 0, len(fixes))
	for _, f := range fixes {
		if f.Rewritten {
			out = append(out, Action{Type: corev1.EventTypeWarning, Reason: "GrantRewritten", Action: "Revoke",
				Message: fmt.Sprintf("put statement %s in the policy of bucket %s back to the grant BucketAccess %s records: it said more than that", f.Sid, bucket, f.Access)})
			continue
		}
		out = append(out, Action{Type: corev1.EventTypeWarning, Reason: "GrantRemoved", Action: "Revoke",
			Message: fmt.Sprintf("removed statement %s from the policy of bucket %s: it is no grant of a BucketAccess of this bucket (the Sid prefix %s is Trellis' own)", f.Sid, bucket, s3.GrantSidPrefix)})
	}
	return out
}

// Raise records Events about obj.
func Raise(rec recorder.EventRecorder, obj client.Object, actions []Action) {
	for _, a := range actions {
		rec.Eventf(obj, nil, a.Type, a.Reason, a.Action, "%s", a.Message)
	}
}

// InvalidPolicyError is a spec.policy Trellis refuses before asking the store.
type InvalidPolicyError struct{ Err error }

func (e *InvalidPolicyError) Error() string { return e.Err.Error() }
func (e *InvalidPolicyError) Unwrap() error { return e.Err }

// Action is an Event about something done in the store: a bucket
// created, adopted, deleted or given its settings; a key issued or revoked.
// These are not status.EventRules, which fire when a condition changes:
// they are raised when no condition changes (a bucket created again, or a
// key rotated, while Ready stays True; settings put back after drift) or
// when no status is written any more (a bucket deleted or kept, and the
// finalizer gone).
type Action struct {
	Type, Reason, Action, Message string
}

// UsableStore reads an ObjectStore and its state from the cache. It returns
// no store, and the state to show, when the store is missing or not Ready:
// nothing is sent to a store that is down.
func UsableStore(ctx context.Context, c client.Reader, name string) (*storagev1.ObjectStore, conditions.Summary, error) {
	store := &storagev1.ObjectStore{}
	if err := c.Get(ctx, client.ObjectKey{Name: name}, store); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, conditions.Summary{Progress: conditions.Blocked, Reason: ReasonStoreNotFound, Message: fmt.Sprintf("ObjectStore %s does not exist", name)}, nil
		}
		return nil, conditions.Summary{}, fmt.Errorf("reading ObjectStore %s: %w", name, err)
	}
	ready := conditions.Get(store.Status.Conditions, conditions.Ready)
	switch {
	case ready != nil && ready.Reason == ReasonInUse && !store.DeletionTimestamp.IsZero():
		// Being deleted, and waiting for its users to let go: they must be
		// able to (delete their bucket, revoke their keys), or nothing ever
		// would. Its last check is not known; a failing request says so.
		return store, conditions.Summary{}, nil
	case ready == nil || store.Status.ObservedGeneration != store.Generation:
		return nil, conditions.Summary{Progress: conditions.Working, Reason: ReasonStoreNotReady,
			Message: fmt.Sprintf("ObjectStore %s has not been checked yet", name)}, nil
	case ready.Status != metav1.ConditionTrue:
		progress := conditions.Working
		if conditions.IsTrue(store.Status.Conditions, conditions.Stalled) {
			progress = conditions.Blocked
		}
		return nil, conditions.Summary{Progress: progress, Reason: ready.Reason,
			Message: fmt.Sprintf("ObjectStore %s: %s", name, ready.Message)}, nil
	}
	return store, conditions.Summary{}, nil
}
