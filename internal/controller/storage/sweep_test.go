package storage

import (
	"context"
	"fmt"
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/storage/storagetest"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/controller/storage/sweep"
	"github.com/trellis-dev/trellis/internal/s3"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// sweeper is a sweep.Sweeper over the fixture's fake API server and store.
func (f *fixture) sweeper() *sweep.Sweeper {
	return &sweep.Sweeper{Cache: f.c, Clients: f.stores(), Recorder: f.rec, StoreChecks: f.storeChecks}
}

// sweepKeys are access key ids of the sweep's rows, issued through rtStoreObj.
func sweepKey(uid types.UID, v int32) string { return stores.AccessKeyID(rtStoreUID, uid, v) }

// grantOf is the statement the grant of an access would have in testBucket.
func grantOf(uid types.UID, mode string, keys ...string) s3.Grant {
	return s3.Grant{ID: stores.GrantID(uid), Principals: keys, Mode: mode}
}

func policyWith(t *testing.T, grants ...s3.Grant) string {
	t.Helper()
	doc := `{"Statement":[{"Sid":"Mine","Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::` + testBucket + `/pub/*"}]}`
	for _, g := range grants {
		var err error
		if doc, err = s3.WithGrant(doc, testBucket, g); err != nil {
			t.Fatal(err)
		}
	}
	return doc
}

// TestSweepStore drives every exit of one sweep of one store, with a fake
// API server (the cache) and a fake store.
func TestSweepStore(t *testing.T) {
	const (
		live    = types.UID("uid-access") // grantedAccess
		gone    = types.UID("uid-gone")   // deleted without its finalizer
		leaving = types.UID("uid-leaving")
	)
	// Keys of the live access: current, retiring, and the one being issued.
	liveKeys := []string{sweepKey(live, 1), sweepKey(live, 2), sweepKey(live, 3)}
	goneKeys := []string{sweepKey(gone, 1), sweepKey(gone, 2)}
	// Accounts that are not this store's to sweep: another ObjectStore's
	// (of this cluster or another, on the same store) for an access that
	// does not exist here, someone else's, and ones that only look alike.
	foreign := []string{stores.AccessKeyID("uid-other-store", gone, 1), "SOMEONEELSE000000", "TRELLISNOTAKEYATALL",
		stores.AccessKeyIDPrefix(rtStoreUID, gone) + "x1", stores.StoreKeyPrefix(rtStoreUID) + "0123V1"}
	accountsOf := func(ids ...[]string) map[string]string {
		out := map[string]string{}
		for _, list := range ids {
			for _, id := range list {
				out[id] = "s"
			}
		}
		return out
	}
	withRetiring := func() *storagev1.BucketAccess {
		a := grantedAccess()
		a.Status.RetiringKeys = []storagev1.RetiringKey{retiringAt(sweepKey(live, 2), syncNow)}
		a.Spec.KeyVersion = 3
		return a
	}
	closed := func() *storagev1.StorageBucket {
		b := claimedBucket()
		conditions.Summarize(&b.Status.Conditions, 1, conditions.Summary{Progress: conditions.Blocked, Reason: stores.ReasonNamespaceNotAllowed, Message: "closed"})
		return b
	}
	s3Store := func() *storagev1.ObjectStore {
		s := storagetest.ReadyStore(true)
		s.Spec.Type = storagev1.StoreTypeS3
		return s
	}
	forgedGrant := grantOf("uid-nobody", s3.ReadWrite, "FORGEDKEY0000001")

	cases := map[string]struct {
		reason string
		store  *storagev1.ObjectStore
		world  []client.Object
		setup  func(*fixture)

		wantResult   string
		wantRevoked  []string // accounts, in order
		wantAccounts []string // left in the store (nil: as before, less wantRevoked)
		wantGrants   int
		wantEvents   []string
		wantS3Calls  []string // nil: not checked
		wantDown     bool
		// forgedLeft: a forged grant is left in the policy (not swept there).
		forgedLeft bool
	}{
		"nothing of Trellis' to sweep": {
			store: storagetest.ReadyStore(true), world: []client.Object{claimedBucket(), withRetiring()},
			setup:      func(f *fixture) { f.accounts.Accounts = accountsOf(liveKeys, foreign) },
			wantResult: sweep.Clean,
		},
		"keys of a deleted access revoked; live, leaving and foreign ones kept": {
			reason: "by UID, not by name: the live access's current, retiring and new keys, and a leaving access's, stay",
			store:  storagetest.ReadyStore(true),
			world: []client.Object{claimedBucket(), withRetiring(),
				storagetest.Deleting(accessWithUID("leaving", leaving)), accessWithUID("other", "uid-other")},
			setup: func(f *fixture) {
				f.accounts.Accounts = accountsOf(liveKeys, goneKeys, foreign, []string{sweepKey(leaving, 1), sweepKey("uid-other", 1)})
			},
			wantResult: sweep.Revoked, wantRevoked: goneKeys,
			wantEvents: []string{"Warning OrphanKeysRevoked"},
		},
		"an access recreated under the same name: the old one's keys go": {
			store: storagetest.ReadyStore(true), world: []client.Object{claimedBucket(), accessWithUID(rtAccess, "uid-new")},
			setup: func(f *fixture) {
				f.accounts.Accounts = accountsOf([]string{sweepKey("uid-new", 1), sweepKey(live, 1)})
			},
			wantResult: sweep.Revoked, wantRevoked: []string{sweepKey(live, 1)},
			wantEvents: []string{"Warning OrphanKeysRevoked"},
		},
		"an account made while the store was listed: kept": {
			reason: "the store is listed first, the cache after: the access of an account listed is in the cache then",
			store:  storagetest.ReadyStore(true), world: []client.Object{claimedBucket()},
			setup: func(f *fixture) {
				f.accounts.OnList = func() {
					if err := f.api.Others().Create(context.Background(), accessWithUID("new", "uid-new")); err != nil {
						panic(err)
					}
					f.accounts.Accounts = accountsOf([]string{sweepKey("uid-new", 1)})
				}
			},
			wantResult: sweep.Clean, wantAccounts: []string{sweepKey("uid-new", 1)},
		},
		"the store is not Ready: nothing sent": {
			store: storagetest.ReadyStore(false), world: []client.Object{claimedBucket()},
			setup:      func(f *fixture) { f.accounts.Accounts = accountsOf(goneKeys) },
			wantResult: stores.ReasonStoreNotReady, wantS3Calls: []string{},
		},
		"the store's accounts cannot be listed: nothing revoked": {
			store: storagetest.ReadyStore(true), world: []client.Object{claimedBucket()},
			setup:      func(f *fixture) { f.accounts.Accounts, f.accounts.ListErr = accountsOf(goneKeys), storagetest.ErrDown },
			wantResult: string(s3.ReasonStoreUnreachable), wantDown: true, wantS3Calls: []string{},
		},
		"the store refuses the admin's keys: nothing revoked": {
			store: storagetest.ReadyStore(true), world: []client.Object{claimedBucket()},
			setup: func(f *fixture) {
				f.accounts.Accounts, f.accounts.ListErr = accountsOf(goneKeys), storagetest.ErrDenied
			},
			wantResult: string(s3.ReasonAccessDenied), wantS3Calls: []string{},
		},
		"the cache cannot list BucketAccesses: nothing revoked": {
			reason: "an error is never an empty list",
			store:  storagetest.ReadyStore(true), world: []client.Object{claimedBucket(), grantedAccess()},
			setup: func(f *fixture) {
				f.accounts.Accounts = accountsOf(liveKeys, goneKeys)
				f.api.Fail(testenv.List, "BucketAccess", storagetest.ErrUnavailable)
			},
			wantResult: conditions.ReasonReconcileError, wantS3Calls: []string{},
		},
		"the store fails half-way: what was revoked is told, the rest waits": {
			store: storagetest.ReadyStore(true), world: []client.Object{claimedBucket(), grantedAccess()},
			setup: func(f *fixture) {
				f.accounts.Accounts = accountsOf(liveKeys[:1], goneKeys)
				f.accounts.DeleteErr, f.accounts.DeleteFailsAfterCall = storagetest.ErrDown, 2
			},
			wantResult: string(s3.ReasonStoreUnreachable), wantDown: true, wantRevoked: goneKeys[:1],
			wantAccounts: append(slices.Clone(liveKeys[:1]), goneKeys[1]), wantEvents: []string{"Warning OrphanKeysRevoked"},
		},
		"a forged grant in a claimed bucket: removed, said on the StorageBucket": {
			store: storagetest.ReadyStore(true), world: []client.Object{claimedBucket(), grantedAccess()},
			setup: func(f *fixture) {
				f.accounts.Accounts = accountsOf(liveKeys[:1])
				f.s3.PolicyDoc = policyWith(t, grantOf(live, s3.ReadWrite, liveKeys[0]), forgedGrant)
			},
			wantResult: sweep.Revoked, wantGrants: 1, wantEvents: []string{"Warning GrantRemoved"},
			wantS3Calls: []string{"Policy", "SetPolicy"},
		},
		"a live grant widened by hand: put back": {
			store: storagetest.ReadyStore(true), world: []client.Object{claimedBucket(), grantedAccess()},
			setup: func(f *fixture) {
				f.accounts.Accounts = accountsOf(liveKeys[:1])
				f.s3.PolicyDoc = policyWith(t, grantOf(live, s3.ReadWrite, liveKeys[0], "FORGEDKEY0000001"))
			},
			wantResult: sweep.Revoked, wantGrants: 1, wantEvents: []string{"Warning GrantRewritten"},
		},
		"the grant of a deleted access goes with its keys": {
			store: storagetest.ReadyStore(true), world: []client.Object{claimedBucket(), grantedAccess()},
			setup: func(f *fixture) {
				f.accounts.Accounts = accountsOf(liveKeys[:1], goneKeys)
				f.s3.PolicyDoc = policyWith(t, grantOf(live, s3.ReadWrite, liveKeys[0]), grantOf(gone, s3.ReadOnly, goneKeys...))
			},
			wantResult: sweep.Revoked, wantRevoked: goneKeys, wantGrants: 1,
			wantEvents: []string{"Warning OrphanKeysRevoked", "Warning GrantRemoved"},
		},
		"grants as recorded: read, nothing written": {
			store: storagetest.ReadyStore(true), world: []client.Object{claimedBucket(), withRetiring()},
			setup: func(f *fixture) {
				f.accounts.Accounts = accountsOf(liveKeys)
				f.s3.PolicyDoc = policyWith(t, grantOf(live, s3.ReadWrite, liveKeys[:2]...))
			},
			wantResult: sweep.Clean, wantS3Calls: []string{"Policy"},
		},
		"a bucket of a namespace the store is closed to: not touched": {
			store: storagetest.ReadyStore(true), world: []client.Object{closed()},
			setup:      func(f *fixture) { f.s3.PolicyDoc = policyWith(t, forgedGrant) },
			wantResult: sweep.Clean, wantS3Calls: []string{}, forgedLeft: true,
		},
		"the bucket's policy cannot be read: stops, nothing written": {
			store: storagetest.ReadyStore(true), world: []client.Object{claimedBucket()},
			setup:      func(f *fixture) { f.s3.PolicyErr = storagetest.ErrDown },
			wantResult: string(s3.ReasonStoreUnreachable), wantDown: true, wantS3Calls: []string{"Policy"},
		},
		"the bucket is gone: its own check says so": {
			store: storagetest.ReadyStore(true), world: []client.Object{claimedBucket()},
			setup:      func(f *fixture) { f.s3.PolicyErr = errNoBucket },
			wantResult: sweep.Clean,
		},
		"the store refuses the policy: told, the accounts still swept": {
			store: storagetest.ReadyStore(true), world: []client.Object{claimedBucket()},
			setup: func(f *fixture) {
				f.accounts.Accounts = accountsOf(goneKeys)
				f.s3.PolicyDoc, f.s3.SetPolicyErr = policyWith(t, forgedGrant), errBadPolicy
			},
			wantResult: string(s3.ReasonInvalidRequest), wantRevoked: goneKeys, wantEvents: []string{"Warning OrphanKeysRevoked"},
			forgedLeft: true,
		},
		"a policy Trellis cannot read: left as it is": {
			store: storagetest.ReadyStore(true), world: []client.Object{claimedBucket()},
			setup:      func(f *fixture) { f.s3.PolicyDoc = "garbage" },
			wantResult: stores.ReasonInvalidPolicy, wantS3Calls: []string{"Policy"},
		},
		"a store without IAM: its grants are still swept": {
			store: storagetest.ReadyStore(true), world: []client.Object{claimedBucket()},
			setup: func(f *fixture) {
				f.accounts.ListErr = errVgwNoIAM
				f.s3.PolicyDoc = policyWith(t, forgedGrant)
			},
			wantResult: sweep.Revoked, wantGrants: 1, wantEvents: []string{"Warning GrantRemoved"},
		},
		"a store of type S3: no account calls, grants swept": {
			store: s3Store(), world: []client.Object{claimedBucket()},
			setup: func(f *fixture) {
				f.accounts.Accounts = accountsOf(goneKeys)
				f.s3.PolicyDoc = policyWith(t, forgedGrant)
			},
			wantResult: sweep.Revoked, wantGrants: 1, wantEvents: []string{"Warning GrantRemoved"},
			wantAccounts: goneKeys,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			store := tc.store.DeepCopy()
			store.Name = fmt.Sprintf("sweep-%d", nameIndex(name))
			world := append([]client.Object{openNamespace(), storagetest.StoreCredentials(), store}, tc.world...)
			for _, o := range world {
				if b, ok := o.(*storagev1.StorageBucket); ok {
					b.Spec.StoreRef.Name = store.Name
				}
				if a, ok := o.(*storagev1.BucketAccess); ok {
					a.Status.StoreName = store.Name
				}
			}
			f := newFixture(world...)
			if tc.setup != nil {
				tc.setup(f)
			}
			before := map[string]string{}
			for id := range f.accounts.Accounts {
				before[id] = "s"
			}
			accountsBefore := testutil.ToFloat64(sweep.RevokedTotal.WithLabelValues(store.Name, "account"))
			grantsBefore := testutil.ToFloat64(sweep.RevokedTotal.WithLabelValues(store.Name, "grant"))
			runsBefore := testutil.ToFloat64(sweep.Sweeps.WithLabelValues(store.Name, tc.wantResult))

			res := f.sweeper().SweepStore(context.Background(), store)

			g.Expect(res.Result).To(Equal(tc.wantResult), tc.reason)
			if len(tc.wantRevoked) == 0 {
				g.Expect(res.Accounts).To(BeEmpty(), tc.reason)
			} else {
				g.Expect(res.Accounts).To(Equal(tc.wantRevoked), tc.reason)
			}
			g.Expect(res.Grants).To(Equal(tc.wantGrants))
			g.Expect(f.events()).To(Equal(tc.wantEvents))
			g.Expect(f.storeChecked()).To(Equal(tc.wantDown), "the store's check asked for when it does not answer")
			left := tc.wantAccounts
			if left == nil {
				for id := range before {
					if !slices.Contains(tc.wantRevoked, id) {
						left = append(left, id)
					}
				}
			}
			ids, _ := (&storagetest.FakeAccounts{Accounts: f.accounts.Accounts}).ListAccounts(context.Background())
			g.Expect(ids).To(ConsistOf(left), tc.reason)
			switch {
			case tc.wantS3Calls == nil:
			case len(tc.wantS3Calls) == 0:
				g.Expect(f.s3.Calls).To(BeEmpty(), "nothing sent")
			default:
				g.Expect(f.s3.Calls).To(Equal(tc.wantS3Calls))
			}
			if tc.wantResult == stores.ReasonStoreNotReady || tc.store.Spec.Type == storagev1.StoreTypeS3 {
				g.Expect(f.accounts.Calls).To(BeEmpty(), "no account request")
			}
			if !tc.forgedLeft {
				g.Expect(f.s3.PolicyDoc).NotTo(ContainSubstring("FORGEDKEY"), "no forged key is left granted")
			}
			g.Expect(testutil.ToFloat64(sweep.Sweeps.WithLabelValues(store.Name, tc.wantResult)) - runsBefore).To(Equal(1.0))
			g.Expect(testutil.ToFloat64(sweep.RevokedTotal.WithLabelValues(store.Name, "account")) - accountsBefore).To(Equal(float64(len(tc.wantRevoked))))
			g.Expect(testutil.ToFloat64(sweep.RevokedTotal.WithLabelValues(store.Name, "grant")) - grantsBefore).To(Equal(float64(tc.wantGrants)))
			g.Expect(f.api.Writes()).To(BeEmpty(), "a sweep writes nothing to the API server")
		})
	}
}

// nameIndex gives each row a store of its own, so the metrics are the row's.
var rowNames = map[string]int{}

func nameIndex(name string) int {
	if i, ok := rowNames[name]; ok {
		return i
	}
	rowNames[name] = len(rowNames)
	return rowNames[name]
}

// TestSweepIsBounded: a sweep revokes at most sweep.MaxRevocations; the
// next takes the rest.
func TestSweepIsBounded(t *testing.T) {
	g := NewWithT(t)
	store := storagetest.ReadyStore(true)
	store.Name = "sweep-bounded"
	b := claimedBucket()
	b.Spec.StoreRef.Name = store.Name
	f := newFixture(openNamespace(), storagetest.StoreCredentials(), store, b)
	f.accounts.Accounts = map[string]string{}
	for i := range sweep.MaxRevocations + 5 {
		f.accounts.Accounts[sweepKey(types.UID(fmt.Sprintf("uid-gone-%d", i)), 1)] = "s"
	}
	f.s3.PolicyDoc = policyWith(t, grantOf("uid-nobody", s3.ReadOnly, "FORGEDKEY0000001"))
	s := f.sweeper()

	capped := testutil.ToFloat64(sweep.Sweeps.WithLabelValues(store.Name, sweep.Capped))
	revoked := testutil.ToFloat64(sweep.RevokedTotal.WithLabelValues(store.Name, "account"))
	res := s.SweepStore(context.Background(), store)
	g.Expect(res.Result).To(Equal(sweep.Capped))
	g.Expect(res.Accounts).To(HaveLen(sweep.MaxRevocations))
	g.Expect(f.accounts.Accounts).To(HaveLen(5))
	g.Expect(f.s3.Calls).To(BeEmpty(), "the grants wait for the next sweep")

	res = s.SweepStore(context.Background(), store)
	g.Expect(res.Result).To(Equal(sweep.Revoked))
	g.Expect(res.Accounts).To(HaveLen(5))
	g.Expect(res.Grants).To(Equal(1))
	g.Expect(f.accounts.Accounts).To(BeEmpty())
	g.Expect(testutil.ToFloat64(sweep.Sweeps.WithLabelValues(store.Name, sweep.Capped)) - capped).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(sweep.RevokedTotal.WithLabelValues(store.Name, "account")) - revoked).To(Equal(float64(sweep.MaxRevocations + 5)))
}

// TestSweepAllStores: one sweep goes through every store; a store that
// fails does not keep the others from being swept, and each store is
// swept for its own keys only.
func TestSweepAllStores(t *testing.T) {
	g := NewWithT(t)
	one, two := storagetest.ReadyStore(true), storagetest.ReadyStore(true)
	one.Name, two.Name, two.UID = "sweep-one", "sweep-two", "uid-store-two"
	down := storagetest.ReadyStore(false)
	down.Name, down.UID = "sweep-down", "uid-store-down"
	f := newFixture(openNamespace(), storagetest.StoreCredentials(), one, two, down)
	mine, theirs, downs := stores.AccessKeyID(one.UID, "uid-gone", 1), stores.AccessKeyID(two.UID, "uid-gone", 1), stores.AccessKeyID(down.UID, "uid-gone", 1)
	f.accounts.Accounts = map[string]string{mine: "s", theirs: "s", downs: "s"}
	f.sweeper().Sweep(context.Background())
	g.Expect(f.accounts.Accounts).To(Equal(map[string]string{downs: "s"}), "each store its own; none in a store that is down")
	g.Expect(f.events()).To(Equal([]string{"Warning OrphanKeysRevoked", "Warning OrphanKeysRevoked"}))
	g.Expect(f.accounts.Calls).To(Equal([]string{"ListAccounts", "DeleteAccount " + mine, "ListAccounts", "DeleteAccount " + theirs}),
		"nothing sent to the store that is down")
}
