package storage

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/s3"
)

// Trellis' grants in a bucket policy are exactly the ones it recorded: of
// the statements whose Sid has the reserved prefix, every rewrite of a
// policy by Trellis (a StorageBucket's spec.policy, a BucketAccess's grant,
// the sweep) keeps only the grants of the bucket's live BucketAccesses, as
// their status and spec say, and each no wider than that (s3.KeepGrants).
// A prefixed statement someone wrote into the policy directly is taken out
// or put back, and a Warning on the StorageBucket names its Sid.

// liveGrant is a grant that may stand in a bucket's policy, and whose it is.
type liveGrant struct {
	s3.Grant
	access types.NamespacedName
}

// liveGrants returns the grants that may stand in the policy of bucket in
// store: one per BucketAccess in the cache that is the bucket's, by what
// its status records (store and bucket, put on record before its first
// account) or by its StorageBucket's claim of the bucket (which the cache
// shows before an access's first status write). Each names every key its
// access may have granted: the key of spec.keyVersion (granted before it
// goes on record), the current one and the retiring ones on record.
// A BucketAccess being deleted still counts: its own deletion takes its
// grant out.
//
// Call it with the bucket's policy lock held, before reading the policy:
// an access that granted something before the lock was taken had been read
// from this cache before, so the cache has it too, or it is gone.
func liveGrants(ctx context.Context, c client.Reader, store *storagev1.ObjectStore, bucket string) ([]liveGrant, error) {
	key := stores.StoreBucketKey(store.Name, bucket)
	found := map[types.UID]*storagev1.BucketAccess{}
	recorded := &storagev1.BucketAccessList{}
	if err := c.List(ctx, recorded, client.MatchingFields{stores.AccessTargetIndex: key}); err != nil {
		return nil, fmt.Errorf("listing the BucketAccesses of bucket %s: %w", bucket, err)
	}
	for i := range recorded.Items {
		found[recorded.Items[i].UID] = &recorded.Items[i]
	}
	claims := &storagev1.StorageBucketList{}
	if err := c.List(ctx, claims, client.MatchingFields{stores.BucketClaimIndex: key}); err != nil {
		return nil, fmt.Errorf("listing the StorageBuckets of bucket %s: %w", bucket, err)
	}
	for _, sb := range claims.Items {
		list := &storagev1.BucketAccessList{}
		if err := c.List(ctx, list, client.InNamespace(sb.Namespace), client.MatchingFields{stores.AccessBucketIndex: sb.Name}); err != nil {
			return nil, fmt.Errorf("listing the BucketAccesses of StorageBucket %s/%s: %w", sb.Namespace, sb.Name, err)
		}
		for i := range list.Items {
			found[list.Items[i].UID] = &list.Items[i]
		}
	}
	out := make([]liveGrant, 0, len(found))
	for _, a := range found {
		keys := []string{stores.AccessKeyID(store.UID, a.UID, a.Spec.KeyVersion)}
		if a.Status.AccessKeyID != "" {
			keys = append(keys, a.Status.AccessKeyID)
		}
		keys = append(keys, keyIDs(a.Status.RetiringKeys)...)
		out = append(out, liveGrant{
			Grant:  s3.Grant{ID: stores.GrantID(a.UID), Principals: keys, Mode: string(a.Spec.Mode)},
			access: types.NamespacedName{Namespace: a.Namespace, Name: a.Name},
		})
	}
	slices.SortFunc(out, func(a, b liveGrant) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// grantsOf returns the function that reads the live grants of a bucket.
func grantsOf(c client.Reader, store *storagev1.ObjectStore, bucket string) func(context.Context) ([]liveGrant, error) {
	return func(ctx context.Context) ([]liveGrant, error) { return liveGrants(ctx, c, store, bucket) }
}

// bucketPolicy is the means to edit one bucket's policy.
type bucketPolicy struct {
	s3 s3.Client
	// lock serialises the edits of the bucket's policy in this manager.
	lock   func() (unlock func())
	bucket string
	// grants lists the grants that may stand in the policy; nil: none.
	grants func(context.Context) ([]liveGrant, error)
	// unreadable, when set, gives the policy to write in place of one
	// that cannot be read (why); otherwise such a policy is an error.
	unreadable func(grants []s3.Grant, why error) (string, error)
}

// policyEdit is what one edit of a bucket's policy did.
type policyEdit struct {
	// written: the policy was rewritten (or that was tried, and failed).
	written bool
	// fixes are the grant statements the rewrite took out or put back to
	// what was recorded.
	fixes []grantFix
	// restricted names the statements a restrict took out (public_access.go).
	restricted []string
}

// grantFix is a grant statement taken out of a policy, or put back to the
// grant of a BucketAccess.
type grantFix struct {
	s3.GrantFix
	// access is the BucketAccess the statement was put back to (when Rewritten).
	access types.NamespacedName
}

// edit reads the bucket's policy, holds its grants to the live ones, applies
// fn (nil: nothing more), and writes the result only when it says something
// else. The lock makes the read-modify-write whole against the other
// writers of the same policy in this manager.
func (p bucketPolicy) edit(ctx context.Context, fn func(current string) (string, error)) (policyEdit, error) {
	unlock := p.lock()
	defer unlock()
	var live []liveGrant
	if p.grants != nil {
		var err error
		if live, err = p.grants(ctx); err != nil {
			return policyEdit{}, &stores.CacheError{Err: err}
		}
	}
	current, err := p.s3.Policy(ctx, p.bucket)
	if err != nil {
		return policyEdit{}, err
	}
	grants := make([]s3.Grant, 0, len(live))
	for _, g := range live {
		grants = append(grants, g.Grant)
	}
	next, fixed, err := s3.KeepGrants(current, p.bucket, grants)
	if err != nil && p.unreadable != nil {
		next, err = p.unreadable(grants, err)
		fixed, fn = nil, nil
	}
	if err != nil {
		return policyEdit{}, &invalidPolicyError{err: err}
	}
	if fn != nil {
		if next, err = fn(next); err != nil {
			return policyEdit{}, &invalidPolicyError{err: err}
		}
	}
	if s3.SamePolicy(current, next) {
		return policyEdit{}, nil
	}
	if err := p.s3.SetPolicy(ctx, p.bucket, next); err != nil {
		// Tried: its accesses look at their grants all the same.
		return policyEdit{written: true}, err
	}
	res := policyEdit{written: true}
	for _, f := range fixed {
		fix := grantFix{GrantFix: f}
		if i := slices.IndexFunc(live, func(g liveGrant) bool { return g.Sid() == f.Sid }); i >= 0 && f.Rewritten {
			fix.access = live[i].access
		}
		res.fixes = append(res.fixes, fix)
	}
	return res, nil
}

// withoutSid drops the fixes of one Sid: an access's own grant, which its
// own edit sets anyway.
func withoutSid(fixes []grantFix, sid string) []grantFix {
	return slices.DeleteFunc(fixes, func(f grantFix) bool { return f.Sid == sid })
}

// grantFixActions are the Warnings about grant statements a rewrite of
// bucket's policy took out or put back; they name the Sid, never a key.
func grantFixActions(bucket string, fixes []grantFix) []storeAction {
	out := make([]storeAction, 0, len(fixes))
	for _, f := range fixes {
		if f.Rewritten {
			out = append(out, storeAction{typ: corev1.EventTypeWarning, reason: "GrantRewritten", action: "Revoke",
				message: fmt.Sprintf("put statement %s in the policy of bucket %s back to the grant BucketAccess %s records: it said more than that", f.Sid, bucket, f.access)})
			continue
		}
		out = append(out, storeAction{typ: corev1.EventTypeWarning, reason: "GrantRemoved", action: "Revoke",
			message: fmt.Sprintf("removed statement %s from the policy of bucket %s: it is no grant of a BucketAccess of this bucket (the Sid prefix %s is Trellis' own)", f.Sid, bucket, s3.GrantSidPrefix)})
	}
	return out
}

// raise records Events about obj.
func raise(rec recorder.EventRecorder, obj client.Object, actions []storeAction) {
	for _, a := range actions {
		rec.Eventf(obj, nil, a.typ, a.reason, a.action, "%s", a.message)
	}
}
