// Package sweep revokes, in every ObjectStore, the keys and grants that
// belong to no live BucketAccess: a Runnable on the leader.
package sweep

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/operate"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/jitter"
	"github.com/trellis-dev/trellis/internal/s3"
)

// A BucketAccess's finalizer revokes its key; but a finalizer is a
// courtesy: whoever may edit the BucketAccess may remove it and delete the
// object, and nothing then revokes anything. The sweep does not depend on
// it. Every interval, in each store, it revokes what carries Trellis' marks
// and belongs to no live BucketAccess:
//
//   - accounts whose name has the store's mark (stores.StoreKeyPrefix)
//     and the hash of the UID of no BucketAccess in the cache;
//   - in the policy of every bucket a StorageBucket claims there,
//     statements with Trellis' Sid prefix that are no recorded grant
//     (stores.LiveGrants, s3.KeepGrants), as every rewrite of a policy does.
//
// Order of events: the store's accounts are listed first, then the cache's
// BucketAccesses. An account exists only once a reconcile read its
// BucketAccess from this same cache, so an account listed is either of a
// BucketAccess the cache then holds, or of one deleted since. The cache is
// synced before the first sweep. A store that is not Ready is not asked;
// one that fails a request ends the sweep of that store with nothing more
// revoked, and nothing is ever revoked that was not listed.

// Sweep results besides a store reason and ReconcileError.
const (
	// Clean: nothing to revoke.
	Clean = "Clean"
	// Revoked: something was revoked, and nothing is left.
	Revoked = "Revoked"
	// Capped: MaxRevocations reached; the rest waits for the next sweep.
	Capped = "Capped"
)

// MaxRevocations bounds what one sweep of a store revokes (accounts
// deleted and grant statements taken out or put back): a sweep that goes
// wrong goes wrong by at most this much before a person can look.
const MaxRevocations = 100

// Sweeper sweeps every store, every Interval (±10%), on the leader only.
type Sweeper struct {
	Interval time.Duration

	Cache    client.Reader // the manager's cache
	Synced   interface{ WaitForCacheSync(context.Context) bool }
	Clients  *stores.Clients
	Recorder recorder.EventRecorder
	// StoreChecks asks the ObjectStore controller to check a store a sweep
	// found not answering.
	StoreChecks stores.StoreChecks

	// mu: one sweep at a time (and Hold holds sweeps off).
	mu sync.Mutex
}

// Hold keeps sweeps from starting until release is called (one under way
// ends first): what happens meanwhile is another writer's doing.
func (s *Sweeper) Hold() (release func()) {
	s.mu.Lock()
	var once sync.Once
	return func() { once.Do(s.mu.Unlock) }
}

// NeedLeaderElection is true: only the leader writes to stores.
func (s *Sweeper) NeedLeaderElection() bool { return true }

// Start sweeps every Interval until ctx ends, the first time one interval
// after the cache has synced.
func (s *Sweeper) Start(ctx context.Context) error {
	if s.Synced != nil && !s.Synced.WaitForCacheSync(ctx) {
		if ctx.Err() != nil {
			return nil
		}
		return errors.New("storage sweep: the cache did not sync")
	}
	for {
		t := time.NewTimer(jitter.Duration(s.Interval, 0.1))
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		s.Sweep(ctx)
	}
}

// Sweep sweeps every store in the cache, one after the other.
func (s *Sweeper) Sweep(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	list := &storagev1.ObjectStoreList{}
	if err := s.Cache.List(ctx, list); err != nil {
		log.FromContext(ctx).Error(err, "storage sweep: listing ObjectStores")
		return
	}
	for i := range list.Items {
		s.SweepStore(ctx, &list.Items[i])
	}
}

// Result is what one sweep of one store did.
type Result struct {
	// Result is Clean, Revoked, Capped, StoreNotReady, or why the sweep
	// stopped (a store reason, ReconcileError).
	Result string
	// Accounts are the accounts revoked (on versitygw, access key ids).
	Accounts []string
	// Grants counts grant statements taken out or put back.
	Grants int
}

// SweepStore sweeps one store, counts it and says what it revoked.
func (s *Sweeper) SweepStore(ctx context.Context, store *storagev1.ObjectStore) Result {
	res := s.sweepOf(ctx, store)
	Sweeps.WithLabelValues(store.Name, res.Result).Inc()
	if err := s.Cache.Get(ctx, client.ObjectKeyFromObject(store), &storagev1.ObjectStore{}); apierrors.IsNotFound(err) {
		// Gone while it was swept: its series go with it, as the store
		// controller dropped them once the cache showed it gone.
		stores.ForgetMetrics(store.Name)
		ForgetMetrics(store.Name)
	}
	if len(res.Accounts) > 0 || res.Grants > 0 || res.Result != Clean && res.Result != stores.ReasonStoreNotReady {
		log.FromContext(ctx).Info("storage sweep", "store", store.Name, "result", res.Result, "accounts", len(res.Accounts), "grants", res.Grants)
	}
	return res
}

// revokedAccounts counts the accounts a sweep deleted and says so on the store.
func (s *Sweeper) revokedAccounts(store *storagev1.ObjectStore, ids []string) {
	n := len(ids)
	if n == 0 {
		return
	}
	RevokedTotal.WithLabelValues(store.Name, "account").Add(float64(n))
	shown, more := ids, ""
	if n > 10 {
		shown, more = ids[:10], fmt.Sprintf(" and %d more", n-10)
	}
	s.Recorder.Eventf(store, nil, corev1.EventTypeWarning, "OrphanKeysRevoked", "Sweep",
		"revoked %d key(s) of no BucketAccess that still exists (one deleted without its finalizer): %s%s", n, strings.Join(shown, ", "), more)
}

func (s *Sweeper) sweepOf(ctx context.Context, store *storagev1.ObjectStore) Result {
	usable, _, err := stores.UsableStore(ctx, s.Cache, store.Name)
	if err != nil {
		return Result{Result: conditions.ReasonReconcileError}
	}
	if usable == nil {
		// Down, not checked yet or gone: nothing is sent to it.
		return Result{Result: stores.ReasonStoreNotReady}
	}
	store = usable
	res := Result{}
	budget := MaxRevocations
	stop := func(err error) Result {
		reason, _ := stores.ClassifyError(err)
		res.Result = string(reason)
		if invalid := (*stores.InvalidPolicyError)(nil); errors.As(err, &invalid) {
			res.Result = stores.ReasonInvalidPolicy // a policy Trellis cannot read is left as it is
		}
		if reason == s3.ReasonStoreUnreachable && s.StoreChecks != nil {
			s.StoreChecks.Request(ctx, store)
		}
		return res
	}

	if stores.HasAccounts(store) {
		revoked, err := s.sweepAccounts(ctx, store, budget)
		res.Accounts = revoked
		budget -= len(revoked)
		s.revokedAccounts(store, revoked)
		if err != nil {
			return stop(err)
		}
	}
	if budget <= 0 {
		// The grants wait for the next sweep.
		res.Result = Capped
		return res
	}

	c, err := s.Clients.Client(ctx, store)
	if err != nil {
		return stop(err)
	}
	buckets, err := s.claimedBuckets(ctx, store)
	if err != nil {
		return stop(&stores.CacheError{Err: err})
	}
	var failed error
	for _, sb := range buckets {
		if budget <= 0 {
			res.Result = Capped
			return res
		}
		bucket := sb.Status.BucketName
		edit, err := stores.BucketPolicy{S3: c, Bucket: bucket, Grants: s.Clients.GrantsOf(s.Cache, store, bucket),
			Lock: func() func() { return s.Clients.LockPolicy(store.Name, bucket) }}.Edit(ctx, nil)
		reason, _ := stores.ClassifyError(err)
		switch {
		case err == nil:
			stores.Raise(s.Recorder, sb, stores.GrantFixActions(bucket, edit.Fixes))
			if n := len(edit.Fixes); n > 0 {
				RevokedTotal.WithLabelValues(store.Name, "grant").Add(float64(n))
				res.Grants += n
				budget -= n
			}
		case reason == s3.ReasonBucketMissing:
			// Its own check says so.
		case reason == s3.ReasonStoreUnreachable || reason == conditions.ReasonReconcileError:
			return stop(err)
		default:
			// This bucket's policy cannot be read or written (refused, or
			// not a policy): the others may still be.
			failed = err
		}
	}
	switch {
	case failed != nil:
		return stop(failed)
	case len(res.Accounts) > 0 || res.Grants > 0:
		res.Result = Revoked
	default:
		res.Result = Clean
	}
	return res
}

// sweepAccounts deletes, up to budget, the accounts of the store's mark
// whose BucketAccess is gone, and returns those it deleted. It ends with an
// error where the store or the cache failed, and with the budget spent
// when more are left.
func (s *Sweeper) sweepAccounts(ctx context.Context, store *storagev1.ObjectStore, budget int) ([]string, error) {
	accounts, err := s.Clients.Accounts(ctx, store)
	if err != nil {
		return nil, err
	}
	// First the store's accounts, then the cache: see above.
	ids, err := accounts.ListAccounts(ctx)
	if reason, _ := stores.ClassifyError(err); reason == s3.ReasonNotSupported {
		return nil, nil // no IAM, no accounts; grants may still be forged
	}
	if err != nil {
		return nil, err
	}
	orphans, err := s.orphans(ctx, store, ids)
	if err != nil {
		return nil, &stores.CacheError{Err: err}
	}
	due := orphans[:min(len(orphans), budget)]
	revoked := make([]string, 0, len(due))
	for _, id := range due {
		if err := accounts.DeleteAccount(ctx, id); err != nil {
			return revoked, err
		}
		revoked = append(revoked, id)
	}
	return revoked, nil
}

// orphans returns the account names among ids that carry the store's mark
// and the hash of no BucketAccess in the cache. ids must have been listed
// before this is called.
func (s *Sweeper) orphans(ctx context.Context, store *storagev1.ObjectStore, ids []string) ([]string, error) {
	prefix := stores.StoreKeyPrefix(store.UID)
	owners := map[string]string{}
	for _, id := range ids {
		if owner, ok := stores.KeyOwner(prefix, id); ok {
			owners[id] = owner
		}
	}
	if len(owners) == 0 {
		return nil, nil
	}
	list := &storagev1.BucketAccessList{}
	if err := s.Cache.List(ctx, list, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing BucketAccesses: %w", err)
	}
	live := make(map[string]bool, len(list.Items))
	for i := range list.Items {
		live[stores.GrantID(list.Items[i].UID)] = true
	}
	var out []string
	for id, owner := range owners {
		if !live[owner] {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out, nil
}

// claimedBuckets returns the StorageBuckets that claim a bucket in the
// store, but those of namespaces the store is no longer open to (Trellis
// no longer acts for them there) and suspended ones (their bucket is left
// as it is, its policy unread, until they resume; accounts are still swept).
func (s *Sweeper) claimedBuckets(ctx context.Context, store *storagev1.ObjectStore) ([]*storagev1.StorageBucket, error) {
	list := &storagev1.StorageBucketList{}
	if err := s.Cache.List(ctx, list, client.MatchingFields{stores.BucketStoreIndex: store.Name}); err != nil {
		return nil, fmt.Errorf("listing the StorageBuckets of ObjectStore %s: %w", store.Name, err)
	}
	out := make([]*storagev1.StorageBucket, 0, len(list.Items))
	for i := range list.Items {
		sb := &list.Items[i]
		ready := conditions.Get(sb.Status.Conditions, conditions.Ready)
		if sb.Status.Claim != storagev1.BucketClaimed || sb.Status.BucketName == "" || ready != nil && ready.Reason == stores.ReasonNamespaceNotAllowed ||
			operate.IsSuspended(sb.Spec.Suspend) {
			continue
		}
		out = append(out, sb)
	}
	slices.SortFunc(out, func(a, b *storagev1.StorageBucket) int {
		return strings.Compare(a.Status.BucketName, b.Status.BucketName)
	})
	return out, nil
}
