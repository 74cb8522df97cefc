package sweep

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/storage/storagetest"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/s3"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// fixture is a fake API server (the cache) and a fake store.
type fixture struct{ storagetest.Fixture }

func newFixture(objs ...client.Object) *fixture { return &fixture{storagetest.NewFixture(objs...)} }

// sweeper is a Sweeper over the fixture's fake API server and store.
func (f *fixture) sweeper() *Sweeper {
	return &Sweeper{Cache: f.C, Clients: f.Stores(), Recorder: f.Rec, StoreChecks: f.StoreChecks}
}

// sweepKeys are access key ids of the sweep's rows, issued through storagetest.ReadyStore.
func sweepKey(uid types.UID, v int32) string { return stores.AccountName(storagetest.StoreUID, uid, v) }

// grantOf is the statement the grant of an access would have in storagetest.BucketName.
func grantOf(uid types.UID, mode string, keys ...string) s3.Grant {
	return s3.Grant{ID: stores.GrantID(uid), Principals: keys, Mode: mode}
}

func policyWith(t *testing.T, grants ...s3.Grant) string {
	t.Helper()
	doc := `{"Statement":[{"Sid":"Mine","Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::` + storagetest.BucketName + `/pub/*"}]}`
	for _, g := range grants {
		var err error
		if doc, err = s3.WithGrant(doc, storagetest.BucketName, g); err != nil {
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
	foreign := []string{stores.AccountName("uid-other-store", gone, 1), "SOMEONEELSE000000", "TRELLISNOTAKEYATALL",
		stores.AccountPrefix(storagetest.StoreUID, gone) + "x1", stores.StoreKeyPrefix(storagetest.StoreUID) + "0123V1"}
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
		a := storagetest.GrantedAccess()
		a.Status.RetiringKeys = []storagev1.RetiringKey{storagetest.Retiring(sweepKey(live, 2), time.Now().Add(time.Hour))}
		a.Spec.KeyVersion = 3
		return a
	}
	closed := func() *storagev1.StorageBucket {
		b := storagetest.ClaimedBucket()
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
			store: storagetest.ReadyStore(true), world: []client.Object{storagetest.ClaimedBucket(), withRetiring()},
			setup:      func(f *fixture) { f.Accounts.Accounts = accountsOf(liveKeys, foreign) },
			wantResult: Clean,
		},
		"keys of a deleted access revoked; live, leaving and foreign ones kept": {
			reason: "by UID, not by name: the live access's current, retiring and new keys, and a leaving access's, stay",
			store:  storagetest.ReadyStore(true),
			world: []client.Object{storagetest.ClaimedBucket(), withRetiring(),
				storagetest.Deleting(storagetest.AccessWithUID("leaving", leaving)), storagetest.AccessWithUID("other", "uid-other")},
			setup: func(f *fixture) {
				f.Accounts.Accounts = accountsOf(liveKeys, goneKeys, foreign, []string{sweepKey(leaving, 1), sweepKey("uid-other", 1)})
			},
			wantResult: Revoked, wantRevoked: goneKeys,
			wantEvents: []string{"Warning OrphanKeysRevoked"},
		},
		"an access recreated under the same name: the old one's keys go": {
			store: storagetest.ReadyStore(true), world: []client.Object{storagetest.ClaimedBucket(), storagetest.AccessWithUID(storagetest.AccessName, "uid-new")},
			setup: func(f *fixture) {
				f.Accounts.Accounts = accountsOf([]string{sweepKey("uid-new", 1), sweepKey(live, 1)})
			},
			wantResult: Revoked, wantRevoked: []string{sweepKey(live, 1)},
			wantEvents: []string{"Warning OrphanKeysRevoked"},
		},
		"an account made while the store was listed: kept": {
			reason: "the store is listed first, the cache after: the access of an account listed is in the cache then",
			store:  storagetest.ReadyStore(true), world: []client.Object{storagetest.ClaimedBucket()},
			setup: func(f *fixture) {
				f.Accounts.OnList = func() {
					if err := f.API.Others().Create(context.Background(), storagetest.AccessWithUID("new", "uid-new")); err != nil {
						panic(err)
					}
					f.Accounts.Accounts = accountsOf([]string{sweepKey("uid-new", 1)})
				}
			},
			wantResult: Clean, wantAccounts: []string{sweepKey("uid-new", 1)},
		},
		"the store is not Ready: nothing sent": {
			store: storagetest.ReadyStore(false), world: []client.Object{storagetest.ClaimedBucket()},
			setup:      func(f *fixture) { f.Accounts.Accounts = accountsOf(goneKeys) },
			wantResult: stores.ReasonStoreNotReady, wantS3Calls: []string{},
		},
		"the store's accounts cannot be listed: nothing revoked": {
			store: storagetest.ReadyStore(true), world: []client.Object{storagetest.ClaimedBucket()},
			setup:      func(f *fixture) { f.Accounts.Accounts, f.Accounts.ListErr = accountsOf(goneKeys), storagetest.ErrDown },
			wantResult: string(s3.ReasonStoreUnreachable), wantDown: true, wantS3Calls: []string{},
		},
		"the store refuses the admin's keys: nothing revoked": {
			store: storagetest.ReadyStore(true), world: []client.Object{storagetest.ClaimedBucket()},
			setup: func(f *fixture) {
				f.Accounts.Accounts, f.Accounts.ListErr = accountsOf(goneKeys), storagetest.ErrDenied
			},
			wantResult: string(s3.ReasonAccessDenied), wantS3Calls: []string{},
		},
		"the cache cannot list BucketAccesses: nothing revoked": {
			reason: "an error is never an empty list",
			store:  storagetest.ReadyStore(true), world: []client.Object{storagetest.ClaimedBucket(), storagetest.GrantedAccess()},
			setup: func(f *fixture) {
				f.Accounts.Accounts = accountsOf(liveKeys, goneKeys)
				f.API.Fail(testenv.List, "BucketAccess", storagetest.ErrUnavailable)
			},
			wantResult: conditions.ReasonReconcileError, wantS3Calls: []string{},
		},
		"the store fails half-way: what was revoked is told, the rest waits": {
			store: storagetest.ReadyStore(true), world: []client.Object{storagetest.ClaimedBucket(), storagetest.GrantedAccess()},
			setup: func(f *fixture) {
				f.Accounts.Accounts = accountsOf(liveKeys[:1], goneKeys)
				f.Accounts.DeleteErr, f.Accounts.DeleteFailsAfterCall = storagetest.ErrDown, 2
			},
			wantResult: string(s3.ReasonStoreUnreachable), wantDown: true, wantRevoked: goneKeys[:1],
			wantAccounts: append(slices.Clone(liveKeys[:1]), goneKeys[1]), wantEvents: []string{"Warning OrphanKeysRevoked"},
		},
		"a forged grant in a claimed bucket: removed, said on the StorageBucket": {
			store: storagetest.ReadyStore(true), world: []client.Object{storagetest.ClaimedBucket(), storagetest.GrantedAccess()},
			setup: func(f *fixture) {
				f.Accounts.Accounts = accountsOf(liveKeys[:1])
				f.S3.PolicyDoc = policyWith(t, grantOf(live, s3.ReadWrite, liveKeys[0]), forgedGrant)
			},
			wantResult: Revoked, wantGrants: 1, wantEvents: []string{"Warning GrantRemoved"},
			wantS3Calls: []string{"Policy", "SetPolicy"},
		},
		"a live grant widened by hand: put back": {
			store: storagetest.ReadyStore(true), world: []client.Object{storagetest.ClaimedBucket(), storagetest.GrantedAccess()},
			setup: func(f *fixture) {
				f.Accounts.Accounts = accountsOf(liveKeys[:1])
				f.S3.PolicyDoc = policyWith(t, grantOf(live, s3.ReadWrite, liveKeys[0], "FORGEDKEY0000001"))
			},
			wantResult: Revoked, wantGrants: 1, wantEvents: []string{"Warning GrantRewritten"},
		},
		"the grant of a deleted access goes with its keys": {
			store: storagetest.ReadyStore(true), world: []client.Object{storagetest.ClaimedBucket(), storagetest.GrantedAccess()},
			setup: func(f *fixture) {
				f.Accounts.Accounts = accountsOf(liveKeys[:1], goneKeys)
				f.S3.PolicyDoc = policyWith(t, grantOf(live, s3.ReadWrite, liveKeys[0]), grantOf(gone, s3.ReadOnly, goneKeys...))
			},
			wantResult: Revoked, wantRevoked: goneKeys, wantGrants: 1,
			wantEvents: []string{"Warning OrphanKeysRevoked", "Warning GrantRemoved"},
		},
		"grants as recorded: read, nothing written": {
			store: storagetest.ReadyStore(true), world: []client.Object{storagetest.ClaimedBucket(), withRetiring()},
			setup: func(f *fixture) {
				f.Accounts.Accounts = accountsOf(liveKeys)
				f.S3.PolicyDoc = policyWith(t, grantOf(live, s3.ReadWrite, liveKeys[:2]...))
			},
			wantResult: Clean, wantS3Calls: []string{"Policy"},
		},
		"a bucket of a namespace the store is closed to: not touched": {
			store: storagetest.ReadyStore(true), world: []client.Object{closed()},
			setup:      func(f *fixture) { f.S3.PolicyDoc = policyWith(t, forgedGrant) },
			wantResult: Clean, wantS3Calls: []string{}, forgedLeft: true,
		},
		"the bucket's policy cannot be read: stops, nothing written": {
			store: storagetest.ReadyStore(true), world: []client.Object{storagetest.ClaimedBucket()},
			setup:      func(f *fixture) { f.S3.PolicyErr = storagetest.ErrDown },
			wantResult: string(s3.ReasonStoreUnreachable), wantDown: true, wantS3Calls: []string{"Policy"},
		},
		"the bucket is gone: its own check says so": {
			store: storagetest.ReadyStore(true), world: []client.Object{storagetest.ClaimedBucket()},
			setup:      func(f *fixture) { f.S3.PolicyErr = storagetest.ErrNoBucket },
			wantResult: Clean,
		},
		"the store refuses the policy: told, the accounts still swept": {
			store: storagetest.ReadyStore(true), world: []client.Object{storagetest.ClaimedBucket()},
			setup: func(f *fixture) {
				f.Accounts.Accounts = accountsOf(goneKeys)
				f.S3.PolicyDoc, f.S3.SetPolicyErr = policyWith(t, forgedGrant), storagetest.ErrBadPolicy
			},
			wantResult: string(s3.ReasonInvalidRequest), wantRevoked: goneKeys, wantEvents: []string{"Warning OrphanKeysRevoked"},
			forgedLeft: true,
		},
		"a policy Trellis cannot read: left as it is": {
			store: storagetest.ReadyStore(true), world: []client.Object{storagetest.ClaimedBucket()},
			setup:      func(f *fixture) { f.S3.PolicyDoc = "garbage" },
			wantResult: stores.ReasonInvalidPolicy, wantS3Calls: []string{"Policy"},
		},
		"a store without IAM: its grants are still swept": {
			store: storagetest.ReadyStore(true), world: []client.Object{storagetest.ClaimedBucket()},
			setup: func(f *fixture) {
				f.Accounts.ListErr = storagetest.ErrVgwNoIAM
				f.S3.PolicyDoc = policyWith(t, forgedGrant)
			},
			wantResult: Revoked, wantGrants: 1, wantEvents: []string{"Warning GrantRemoved"},
		},
		"a store of type S3: no account calls, grants swept": {
			store: s3Store(), world: []client.Object{storagetest.ClaimedBucket()},
			setup: func(f *fixture) {
				f.Accounts.Accounts = accountsOf(goneKeys)
				f.S3.PolicyDoc = policyWith(t, forgedGrant)
			},
			wantResult: Revoked, wantGrants: 1, wantEvents: []string{"Warning GrantRemoved"},
			wantAccounts: goneKeys,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			store := tc.store.DeepCopy()
			store.Name = fmt.Sprintf("sweep-%d", nameIndex(name))
			world := append([]client.Object{storagetest.OpenNamespace(), storagetest.StoreCredentials(), store}, tc.world...)
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
			for id := range f.Accounts.Accounts {
				before[id] = "s"
			}
			accountsBefore := testutil.ToFloat64(RevokedTotal.WithLabelValues(store.Name, "account"))
			grantsBefore := testutil.ToFloat64(RevokedTotal.WithLabelValues(store.Name, "grant"))
			runsBefore := testutil.ToFloat64(Sweeps.WithLabelValues(store.Name, tc.wantResult))

			res := f.sweeper().SweepStore(context.Background(), store)

			g.Expect(res.Result).To(Equal(tc.wantResult), tc.reason)
			if len(tc.wantRevoked) == 0 {
				g.Expect(res.Accounts).To(BeEmpty(), tc.reason)
			} else {
				g.Expect(res.Accounts).To(Equal(tc.wantRevoked), tc.reason)
			}
			g.Expect(res.Grants).To(Equal(tc.wantGrants))
			g.Expect(f.Events()).To(Equal(tc.wantEvents))
			g.Expect(f.StoreChecked()).To(Equal(tc.wantDown), "the store's check asked for when it does not answer")
			left := tc.wantAccounts
			if left == nil {
				for id := range before {
					if !slices.Contains(tc.wantRevoked, id) {
						left = append(left, id)
					}
				}
			}
			ids, _ := (&storagetest.FakeAccounts{Accounts: f.Accounts.Accounts}).ListAccounts(context.Background())
			g.Expect(ids).To(ConsistOf(left), tc.reason)
			switch {
			case tc.wantS3Calls == nil:
			case len(tc.wantS3Calls) == 0:
				g.Expect(f.S3.Calls).To(BeEmpty(), "nothing sent")
			default:
				g.Expect(f.S3.Calls).To(Equal(tc.wantS3Calls))
			}
			if tc.wantResult == stores.ReasonStoreNotReady || tc.store.Spec.Type == storagev1.StoreTypeS3 {
				g.Expect(f.Accounts.Calls).To(BeEmpty(), "no account request")
			}
			if !tc.forgedLeft {
				g.Expect(f.S3.PolicyDoc).NotTo(ContainSubstring("FORGEDKEY"), "no forged key is left granted")
			}
			g.Expect(testutil.ToFloat64(Sweeps.WithLabelValues(store.Name, tc.wantResult)) - runsBefore).To(Equal(1.0))
			g.Expect(testutil.ToFloat64(RevokedTotal.WithLabelValues(store.Name, "account")) - accountsBefore).To(Equal(float64(len(tc.wantRevoked))))
			g.Expect(testutil.ToFloat64(RevokedTotal.WithLabelValues(store.Name, "grant")) - grantsBefore).To(Equal(float64(tc.wantGrants)))
			g.Expect(f.API.Writes()).To(BeEmpty(), "a sweep writes nothing to the API server")
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

// TestSweepIsBounded: a sweep revokes at most MaxRevocations; the
// next takes the rest.
func TestSweepIsBounded(t *testing.T) {
	g := NewWithT(t)
	store := storagetest.ReadyStore(true)
	store.Name = "sweep-bounded"
	b := storagetest.ClaimedBucket()
	b.Spec.StoreRef.Name = store.Name
	f := newFixture(storagetest.OpenNamespace(), storagetest.StoreCredentials(), store, b)
	f.Accounts.Accounts = map[string]string{}
	for i := range MaxRevocations + 5 {
		f.Accounts.Accounts[sweepKey(types.UID(fmt.Sprintf("uid-gone-%d", i)), 1)] = "s"
	}
	f.S3.PolicyDoc = policyWith(t, grantOf("uid-nobody", s3.ReadOnly, "FORGEDKEY0000001"))
	s := f.sweeper()

	capped := testutil.ToFloat64(Sweeps.WithLabelValues(store.Name, Capped))
	revoked := testutil.ToFloat64(RevokedTotal.WithLabelValues(store.Name, "account"))
	res := s.SweepStore(context.Background(), store)
	g.Expect(res.Result).To(Equal(Capped))
	g.Expect(res.Accounts).To(HaveLen(MaxRevocations))
	g.Expect(f.Accounts.Accounts).To(HaveLen(5))
	g.Expect(f.S3.Calls).To(BeEmpty(), "the grants wait for the next sweep")

	res = s.SweepStore(context.Background(), store)
	g.Expect(res.Result).To(Equal(Revoked))
	g.Expect(res.Accounts).To(HaveLen(5))
	g.Expect(res.Grants).To(Equal(1))
	g.Expect(f.Accounts.Accounts).To(BeEmpty())
	g.Expect(testutil.ToFloat64(Sweeps.WithLabelValues(store.Name, Capped)) - capped).To(Equal(1.0))
	g.Expect(testutil.ToFloat64(RevokedTotal.WithLabelValues(store.Name, "account")) - revoked).To(Equal(float64(MaxRevocations + 5)))
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
	f := newFixture(storagetest.OpenNamespace(), storagetest.StoreCredentials(), one, two, down)
	mine, theirs, downs := stores.AccountName(one.UID, "uid-gone", 1), stores.AccountName(two.UID, "uid-gone", 1), stores.AccountName(down.UID, "uid-gone", 1)
	f.Accounts.Accounts = map[string]string{mine: "s", theirs: "s", downs: "s"}
	f.sweeper().Sweep(context.Background())
	g.Expect(f.Accounts.Accounts).To(Equal(map[string]string{downs: "s"}), "each store its own; none in a store that is down")
	g.Expect(f.Events()).To(Equal([]string{"Warning OrphanKeysRevoked", "Warning OrphanKeysRevoked"}))
	g.Expect(f.Accounts.Calls).To(Equal([]string{"ListAccounts", "DeleteAccount " + mine, "ListAccounts", "DeleteAccount " + theirs}),
		"nothing sent to the store that is down")
}
