package access

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/storage/storagetest"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/s3"
)

func noLock() func() { return func() {} }

// grantedKeys returns who the grant statement of id names in a policy, and its actions.
func grantedKeys(t *testing.T, policy, id string) (principals, actions []string) {
	t.Helper()
	if policy == "" {
		return nil, nil
	}
	var d struct {
		Statement []struct {
			Sid       string
			Principal json.RawMessage
			Action    json.RawMessage
		}
	}
	if err := json.Unmarshal([]byte(policy), &d); err != nil {
		t.Fatalf("policy %q: %v", policy, err)
	}
	for _, st := range d.Statement {
		if st.Sid != s3.GrantSidPrefix+id {
			continue
		}
		var p struct{ AWS []string }
		if err := json.Unmarshal(st.Principal, &p); err != nil {
			t.Fatalf("grant principal %s: %v", st.Principal, err)
		}
		if err := json.Unmarshal(st.Action, &actions); err != nil {
			t.Fatalf("grant actions %s: %v", st.Action, err)
		}
		return p.AWS, actions
	}
	return nil, nil
}

var (
	syncNow = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
)

const (
	testNS     = storagetest.NS
	testBucket = storagetest.BucketName
	rtStore    = storagetest.Store
	rtStoreUID = storagetest.StoreUID
	rtAccess   = storagetest.AccessName
	rtSecret   = storagetest.SecretName
)

const (
	keyV1 = "TRELLISAAAAV1"
	keyV2 = "TRELLISAAAAV2"
	keyV3 = "TRELLISAAAAV3"
)

// TestAccessSync drives every exit of the store side of a BucketAccess
// reconcile with a fake account driver and a fake S3 client.
func TestAccessSync(t *testing.T) {
	otherGrant := `{"Version":"2012-10-17","Statement":[{"Sid":"Mine","Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::team-assets/pub/*"}]}`
	cases := map[string]struct {
		reason   string
		accounts storagetest.FakeAccounts
		s3       storagetest.FakeS3
		mode     string
		current  string
		want     string
		have     bool
		retiring []storagev1.RetiringKey
		// live are the grants of the bucket's live accesses (beside its own).
		live []stores.LiveGrant

		wantProgress  conditions.Progress
		wantFixes     []s3.GrantFix
		wantReason    string
		wantIssued    bool
		wantGranted   []string // principals of the grant afterwards (nil: no grant)
		wantRetiring  []string
		wantRevoked   []string
		wantAccounts  []string
		wantDown      bool
		wantPolicyPut bool
	}{
		"first key": {
			reason: "account, then grant; the Secret is written by the caller",
			mode:   s3.ReadWrite, want: keyV1,
			wantProgress: conditions.Done, wantReason: ReasonGranted, wantIssued: true,
			wantGranted: []string{keyV1}, wantAccounts: []string{keyV1}, wantPolicyPut: true,
		},
		"first key, next to the user's statements": {
			s3:   storagetest.FakeS3{PolicyDoc: otherGrant},
			mode: s3.ReadOnly, want: keyV1,
			wantProgress: conditions.Done, wantReason: ReasonGranted, wantIssued: true,
			wantGranted: []string{keyV1}, wantAccounts: []string{keyV1}, wantPolicyPut: true,
		},
		"issued and granted: nothing to write": {
			reason:   "a settled access costs one policy read, no write",
			accounts: storagetest.FakeAccounts{Accounts: map[string]string{keyV1: "s"}},
			mode:     s3.ReadWrite, current: keyV1, want: keyV1, have: true,
			wantProgress: conditions.Done, wantReason: ReasonGranted, wantGranted: []string{keyV1}, wantAccounts: []string{keyV1},
		},
		"mode changed": {
			accounts: storagetest.FakeAccounts{Accounts: map[string]string{keyV1: "s"}},
			mode:     s3.ReadOnly, current: keyV1, want: keyV1, have: true,
			wantProgress: conditions.Done, wantReason: ReasonGranted, wantGranted: []string{keyV1}, wantAccounts: []string{keyV1}, wantPolicyPut: true,
		},
		"Secret lost: the key is reissued under the same id": {
			reason:   "the old secret stops working; nothing to retire",
			accounts: storagetest.FakeAccounts{Accounts: map[string]string{keyV1: "lost"}},
			mode:     s3.ReadWrite, current: keyV1, want: keyV1,
			wantProgress: conditions.Done, wantReason: ReasonGranted, wantIssued: true, wantGranted: []string{keyV1}, wantAccounts: []string{keyV1},
		},
		"rotation": {
			reason:   "the new key is granted next to the old, which retires after the grace period",
			accounts: storagetest.FakeAccounts{Accounts: map[string]string{keyV1: "s"}},
			mode:     s3.ReadWrite, current: keyV1, want: keyV2, have: true,
			wantProgress: conditions.Done, wantReason: ReasonGranted, wantIssued: true,
			wantGranted: []string{keyV1, keyV2}, wantRetiring: []string{keyV1}, wantAccounts: []string{keyV1, keyV2}, wantPolicyPut: true,
		},
		"rotation again within the grace period": {
			accounts: storagetest.FakeAccounts{Accounts: map[string]string{keyV1: "s", keyV2: "s"}},
			mode:     s3.ReadWrite, current: keyV2, want: keyV3, have: true,
			retiring:     []storagev1.RetiringKey{storagetest.Retiring(keyV1, syncNow.Add(time.Minute))},
			wantProgress: conditions.Done, wantReason: ReasonGranted, wantIssued: true,
			wantGranted: []string{keyV1, keyV2, keyV3}, wantRetiring: []string{keyV1, keyV2}, wantAccounts: []string{keyV1, keyV2, keyV3}, wantPolicyPut: true,
		},
		"issuing a key id still retiring (a downgrade and back): it leaves the retiring list": {
			reason:   "else the key issued now would be revoked when the old one's grace period ends",
			accounts: storagetest.FakeAccounts{Accounts: map[string]string{keyV1: "s", keyV2: "s"}},
			mode:     s3.ReadWrite, current: keyV2, want: keyV1, have: true,
			retiring:     []storagev1.RetiringKey{storagetest.Retiring(keyV1, syncNow.Add(time.Minute))},
			wantProgress: conditions.Done, wantReason: ReasonGranted, wantIssued: true,
			wantGranted: []string{keyV1, keyV2}, wantRetiring: []string{keyV2}, wantAccounts: []string{keyV1, keyV2},
		},
		"grace period not over": {
			accounts: storagetest.FakeAccounts{Accounts: map[string]string{keyV1: "s", keyV2: "s"}},
			mode:     s3.ReadWrite, current: keyV2, want: keyV2, have: true,
			retiring:     []storagev1.RetiringKey{storagetest.Retiring(keyV1, syncNow.Add(time.Second))},
			wantProgress: conditions.Done, wantReason: ReasonGranted,
			wantGranted: []string{keyV1, keyV2}, wantRetiring: []string{keyV1}, wantAccounts: []string{keyV1, keyV2},
		},
		"grace period over: out of the policy, then revoked": {
			accounts: storagetest.FakeAccounts{Accounts: map[string]string{keyV1: "s", keyV2: "s"}},
			mode:     s3.ReadWrite, current: keyV2, want: keyV2, have: true,
			retiring:     []storagev1.RetiringKey{storagetest.Retiring(keyV1, syncNow)},
			wantProgress: conditions.Done, wantReason: ReasonGranted,
			wantGranted: []string{keyV2}, wantRevoked: []string{keyV1}, wantAccounts: []string{keyV2}, wantPolicyPut: true,
		},
		"other grants: the recorded one stays, forged and widened ones do not": {
			reason:   "every rewrite holds the policy's grants to what is recorded, and says so",
			accounts: storagetest.FakeAccounts{Accounts: map[string]string{keyV1: "s"}},
			s3: storagetest.FakeS3{PolicyDoc: `{"Statement":[` +
				`{"Sid":"TrellisAccessother","Effect":"Allow","Principal":{"AWS":["OTHERKEY000000001"]},"Action":["s3:GetObject","s3:GetObjectAttributes","s3:GetObjectTagging","s3:GetObjectVersion","s3:ListBucket","s3:ListBucketVersions","s3:GetBucketLocation"],"Resource":["arn:aws:s3:::` + testBucket + `","arn:aws:s3:::` + testBucket + `/*"]},` +
				`{"Sid":"TrellisAccesswide","Effect":"Allow","Principal":{"AWS":["WIDEKEY0000000001","FORGEDKEY00000001"]},"Action":"s3:*","Resource":"*"},` +
				`{"Sid":"TrellisAccessforged","Effect":"Allow","Principal":{"AWS":["FORGEDKEY00000001"]},"Action":"s3:*","Resource":"*"}]}`},
			live: []stores.LiveGrant{
				{Grant: s3.Grant{ID: "other", Principals: []string{"OTHERKEY000000001"}, Mode: s3.ReadOnly}},
				{Grant: s3.Grant{ID: "wide", Principals: []string{"WIDEKEY0000000001"}, Mode: s3.ReadOnly}},
			},
			mode: s3.ReadWrite, want: keyV1,
			wantProgress: conditions.Done, wantReason: ReasonGranted, wantIssued: true,
			wantGranted: []string{keyV1}, wantAccounts: []string{keyV1}, wantPolicyPut: true,
			wantFixes: []s3.GrantFix{{Sid: "TrellisAccesswide", Rewritten: true}, {Sid: "TrellisAccessforged"}},
		},
		"store down while creating the account": {
			mode: s3.ReadWrite, want: keyV1, accounts: storagetest.FakeAccounts{IssueErr: storagetest.ErrDown},
			wantProgress: conditions.Working, wantReason: string(s3.ReasonStoreUnreachable), wantDown: true,
		},
		"store without IAM": {
			mode: s3.ReadWrite, want: keyV1, accounts: storagetest.FakeAccounts{IssueErr: storagetest.ErrVgwNoIAM},
			wantProgress: conditions.Blocked, wantReason: string(s3.ReasonNotSupported),
		},
		"admin API refuses the keys": {
			mode: s3.ReadWrite, want: keyV1, accounts: storagetest.FakeAccounts{IssueErr: storagetest.ErrDenied},
			wantProgress: conditions.Blocked, wantReason: string(s3.ReasonAccessDenied),
		},
		"a store that cannot name the account alone in a policy": {
			reason: "Stalled, saying why, and nothing granted: the key, made, is not handed out",
			mode:   s3.ReadWrite, want: keyV1,
			accounts:     storagetest.FakeAccounts{PrincipalErr: &s3.CannotScopeError{What: "the user's ARN names more than the user"}},
			wantProgress: conditions.Blocked, wantReason: string(s3.ReasonNotSupported), wantAccounts: []string{keyV1},
		},
		"store fails between account and grant": {
			reason: "the account exists, ungranted: the next reconcile finds it by name and sets a new secret",
			mode:   s3.ReadWrite, want: keyV1, s3: storagetest.FakeS3{SetPolicyErr: storagetest.ErrDown},
			wantProgress: conditions.Working, wantReason: string(s3.ReasonStoreUnreachable), wantDown: true, wantAccounts: []string{keyV1}, wantPolicyPut: true,
		},
		"store refuses the policy": {
			mode: s3.ReadWrite, want: keyV1, s3: storagetest.FakeS3{SetPolicyErr: storagetest.ErrBadPolicy},
			wantProgress: conditions.Blocked, wantReason: stores.ReasonInvalidPolicy, wantAccounts: []string{keyV1}, wantPolicyPut: true,
		},
		"current policy is not one": {
			reason: "a policy Trellis cannot read is reported, never overwritten",
			mode:   s3.ReadWrite, want: keyV1, s3: storagetest.FakeS3{PolicyDoc: "garbage"},
			wantProgress: conditions.Blocked, wantReason: stores.ReasonInvalidPolicy, wantAccounts: []string{keyV1},
		},
		"revocation fails": {
			reason:   "the due key is out of the policy, stays on record, and is tried again",
			accounts: storagetest.FakeAccounts{Accounts: map[string]string{keyV1: "s", keyV2: "s"}, DeleteErr: storagetest.ErrDown},
			mode:     s3.ReadWrite, current: keyV2, want: keyV2, have: true,
			retiring:     []storagev1.RetiringKey{storagetest.Retiring(keyV1, syncNow.Add(-time.Second))},
			wantProgress: conditions.Working, wantReason: string(s3.ReasonStoreUnreachable), wantDown: true,
			wantGranted: []string{keyV2}, wantRetiring: []string{keyV1}, wantAccounts: []string{keyV1, keyV2}, wantPolicyPut: true,
		},
	}
	// Each case runs against both kinds of driver: versitygw's, whose
	// account is its key id and named so in a policy, and an IAM store's,
	// which makes the key id and names the account by ARN. The cases name
	// accounts; keyOf and principalOf say what they are on each.
	for _, iam := range []bool{false, true} {
		backend := "versitygw"
		if iam {
			backend = "IAM"
		}
		keyOf := func(account string) string {
			if iam && account != "" {
				return "AKIA" + account
			}
			return account
		}
		principalOf := func(account string) string {
			if iam {
				return storagetest.IAMARN(account)
			}
			return account
		}
		principalsOf := func(accounts []string) []string {
			var out []string // nil stays nil: no grant
			for _, a := range accounts {
				out = append(out, principalOf(a))
			}
			return out
		}
		for name, tc := range cases {
			t.Run(backend+"/"+name, func(t *testing.T) {
				runAccessSyncCase(t, tc.reason, accessSyncCase{
					accounts: tc.accounts, s3: tc.s3, mode: tc.mode, want: tc.want, have: tc.have, live: tc.live, iam: iam,
					current: stores.Key{AccessKeyID: keyOf(tc.current), Account: tc.current, Principal: principalOf(tc.current)}.Recorded(),
					retiring: func() []storagev1.RetiringKey {
						var out []storagev1.RetiringKey
						for _, k := range tc.retiring {
							r := stores.Key{AccessKeyID: keyOf(k.AccessKeyID), Account: k.AccessKeyID, Principal: principalOf(k.AccessKeyID)}.Recorded()
							out = append(out, storagev1.RetiringKey{AccessKeyID: r.AccessKeyID, Account: r.Account, Principal: r.Principal, RevokeAt: k.RevokeAt})
						}
						return out
					}(),
					wantProgress: tc.wantProgress, wantFixes: tc.wantFixes, wantReason: tc.wantReason, wantIssued: tc.wantIssued,
					wantGranted: principalsOf(tc.wantGranted), wantRetiring: tc.wantRetiring, wantAccounts: tc.wantAccounts,
					wantDown: tc.wantDown, wantPolicyPut: tc.wantPolicyPut,
					wantRevoked: func() []string {
						var out []string
						for _, a := range tc.wantRevoked {
							out = append(out, keyOf(a))
						}
						return out
					}(),
				})
			})
		}
	}
}

// accessSyncCase is one case of TestAccessSync on one kind of driver:
// current and retiring as a status records them there, what is granted by
// principal, the rest by account.
type accessSyncCase struct {
	accounts storagetest.FakeAccounts
	s3       storagetest.FakeS3
	mode     string
	current  stores.Key
	want     string
	have     bool
	retiring []storagev1.RetiringKey
	live     []stores.LiveGrant
	iam      bool

	wantProgress                           conditions.Progress
	wantFixes                              []s3.GrantFix
	wantReason                             string
	wantIssued                             bool
	wantGranted, wantRetiring, wantRevoked []string
	wantAccounts                           []string
	wantDown, wantPolicyPut                bool
}

func runAccessSyncCase(t *testing.T, reason string, tc accessSyncCase) {
	g := NewWithT(t)
	accounts, fake := tc.accounts, tc.s3
	accounts.IAM = tc.iam
	// The grants already in place for the settled cases.
	if tc.current.AccessKeyID != "" && fake.PolicyDoc == "" {
		granted := append([]string{tc.current.PrincipalName()}, stores.PrincipalNames(tc.retiring)...)
		fake.PolicyDoc, _ = s3.WithGrant("", testBucket, s3.Grant{ID: "g", Principals: granted, Mode: s3.ReadWrite})
	}
	before := fake.PolicyDoc
	// Its own grant is live too, naming every key it may have granted (as
	// stores.LiveGrants has it: spec.keyVersion's by account).
	own := stores.LiveGrant{Grant: s3.Grant{ID: "g", Principals: append([]string{tc.want, tc.current.PrincipalName()}, stores.PrincipalNames(tc.retiring)...), Mode: tc.mode}}
	live := func(context.Context) ([]stores.LiveGrant, error) {
		return append([]stores.LiveGrant{own}, tc.live...), nil
	}
	sync := accessSync{accounts: &accounts, s3: &fake, lockPolicy: noLock, grants: live, store: "store-a", bucket: testBucket,
		grant: s3.Grant{ID: "g", Mode: tc.mode}, current: tc.current, want: tc.want, haveSecret: tc.have,
		retiring: tc.retiring, now: syncNow, grace: time.Hour}

	res := sync.run(context.Background())
	fixes := make([]s3.GrantFix, 0, len(res.grantFixes))
	for _, f := range res.grantFixes {
		fixes = append(fixes, f.GrantFix)
	}
	g.Expect(fixes).To(Equal(append([]s3.GrantFix{}, tc.wantFixes...)), "a change of its own grant is no fix")
	for _, f := range tc.live {
		if principals, _ := grantedKeys(t, fake.PolicyDoc, f.ID); principals != nil {
			g.Expect(principals).To(Equal(f.Principals), "another access's grant, as recorded")
		}
	}
	g.Expect(fake.PolicyDoc).NotTo(ContainSubstring("FORGEDKEY"))

	g.Expect(res.summary.Progress).To(Equal(tc.wantProgress), "%s: %s", reason, res.summary.Message)
	g.Expect(res.summary.Reason).To(Equal(tc.wantReason), res.summary.Message)
	g.Expect(res.summary.Message).NotTo(BeEmpty())
	g.Expect(res.storeDown).To(Equal(tc.wantDown))
	g.Expect(res.issued != nil).To(Equal(tc.wantIssued), reason)
	if res.issued != nil {
		want := stores.Key{AccessKeyID: tc.want}
		if tc.iam {
			want = stores.Key{AccessKeyID: storagetest.IAMKeyID(accounts.Issued), Account: tc.want, Principal: storagetest.IAMARN(tc.want)}
		}
		g.Expect(res.issued.Key).To(Equal(want), "the key as the store made it, its account and principal on record where they differ from it")
		g.Expect(res.issued.secretKey).NotTo(BeEmpty())
		g.Expect(accounts.Accounts[tc.want]).To(Equal(res.issued.secretKey), "the account has the secret the Secret gets")
		g.Expect(res.summary.Message).NotTo(ContainSubstring(res.issued.secretKey))
	}
	ids, _ := (&storagetest.FakeAccounts{Accounts: accounts.Accounts}).ListAccounts(context.Background())
	g.Expect(ids).To(ConsistOf(tc.wantAccounts), reason)
	if tc.wantProgress == conditions.Done || tc.wantGranted != nil {
		principals, actions := grantedKeys(t, fake.PolicyDoc, "g")
		g.Expect(principals).To(ConsistOf(tc.wantGranted), reason)
		g.Expect(actions).To(ContainElement("s3:GetObject"))
		if tc.mode == s3.ReadOnly {
			g.Expect(actions).NotTo(ContainElement("s3:PutObject"))
		} else {
			g.Expect(actions).To(ContainElement("s3:PutObject"))
		}
	}
	if strings.Contains(before, "Mine") {
		g.Expect(fake.PolicyDoc).To(ContainSubstring(`"Sid":"Mine"`), "the user's statements stay")
	}
	g.Expect(slices.Contains(fake.Calls, "SetPolicy")).To(Equal(tc.wantPolicyPut), "policy written only when it changes: %v", fake.Calls)
	g.Expect(stores.AccountNames(res.retiring)).To(ConsistOf(tc.wantRetiring))
	g.Expect(res.revoked).To(Equal(tc.wantRevoked))
	for _, k := range res.retiring {
		g.Expect(k.RevokeAt).NotTo(BeNil())
		if tc.iam {
			g.Expect(k.Principal).To(Equal(storagetest.IAMARN(k.Account)), "a retiring key keeps its account and principal on record")
		}
		if k.AccessKeyID == tc.current.AccessKeyID && tc.current.AccountName() != tc.want {
			g.Expect(k.RevokeAt.Time).To(Equal(syncNow.Add(time.Hour)), "the grace period starts at the rotation")
		}
	}
	if len(res.retiring) > 0 && tc.wantProgress == conditions.Done {
		g.Expect(res.next).To(Equal(nextRevocation(res.retiring)))
	}
}

func TestAccessSyncCapsRetiringKeys(t *testing.T) {
	g := NewWithT(t)
	retiring := make([]storagev1.RetiringKey, 0, maxRetiringKeys)
	accounts := storagetest.FakeAccounts{Accounts: map[string]string{}}
	for i := range maxRetiringKeys {
		id := stores.AccountName("store", "uid", int32(i+1))
		accounts.Accounts[id] = "s"
		retiring = append(retiring, storagetest.Retiring(id, syncNow.Add(time.Duration(i+1)*time.Minute)))
	}
	current, want := stores.AccountName("store", "uid", 100), stores.AccountName("store", "uid", 101)
	accounts.Accounts[current] = "s"
	fake := storagetest.FakeS3{}
	res := accessSync{accounts: &accounts, s3: &fake, lockPolicy: noLock, store: "store-a", bucket: testBucket,
		grant: s3.Grant{ID: "g", Mode: s3.ReadOnly}, current: stores.Key{AccessKeyID: current}, want: want, haveSecret: true,
		retiring: retiring, now: syncNow, grace: time.Hour}.run(context.Background())
	g.Expect(res.summary.Progress).To(Equal(conditions.Done))
	g.Expect(res.retiring).To(HaveLen(maxRetiringKeys + 1))
	g.Expect(res.retiring[0].RevokeAt.Time).To(Equal(syncNow), "the oldest is due now: the list stays bounded")
	g.Expect(res.next).To(Equal(syncNow))
}

// TestAccessRevocation drives every exit of deleting a BucketAccess's keys.
func TestAccessRevocation(t *testing.T) {
	const prefix = "TRELLISAAAAV"
	granted, _ := s3.WithGrant(`{"Statement":[{"Sid":"Mine","Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}`,
		testBucket, s3.Grant{ID: "g", Principals: []string{keyV1, keyV2}, Mode: s3.ReadWrite})
	cases := map[string]struct {
		reason   string
		accounts storagetest.FakeAccounts
		s3       storagetest.FakeS3
		bucket   string
		recorded []string

		wantDone     bool
		wantFixes    []s3.GrantFix
		wantReason   string
		wantProgress conditions.Progress
		wantAccounts []string
		wantRevoked  []string
	}{
		"grant out, every account of the prefix deleted, others kept": {
			accounts: storagetest.FakeAccounts{Accounts: map[string]string{keyV1: "s", keyV2: "s", "TRELLISBBBBV1": "s", "someone": "s"}},
			s3:       storagetest.FakeS3{PolicyDoc: granted}, bucket: testBucket,
			wantDone: true, wantAccounts: []string{"TRELLISBBBBV1", "someone"}, wantRevoked: []string{keyV1, keyV2},
		},
		"an account made just before a crash goes too": {
			reason:   "found by listing, not by what the status recorded",
			accounts: storagetest.FakeAccounts{Accounts: map[string]string{keyV3: "s"}},
			bucket:   testBucket,
			wantDone: true, wantRevoked: []string{keyV3},
		},
		"a recorded key of another mark goes too": {
			reason:   "the status names it: a store object made anew under the same name has another mark",
			accounts: storagetest.FakeAccounts{Accounts: map[string]string{keyV1: "s", "TRELLISOLDMARKKEYV1": "s", "TRELLISOTHERV1": "s"}},
			bucket:   testBucket, recorded: []string{"TRELLISOLDMARKKEYV1"},
			wantDone: true, wantAccounts: []string{"TRELLISOTHERV1"}, wantRevoked: []string{keyV1, "TRELLISOLDMARKKEYV1"},
		},
		"a forged grant beside its own: both out, the forged one told": {
			accounts: storagetest.FakeAccounts{Accounts: map[string]string{keyV1: "s"}},
			s3: storagetest.FakeS3{PolicyDoc: strings.Replace(granted, `"Statement":[`,
				`"Statement":[{"Sid":"TrellisAccessforged","Effect":"Allow","Principal":{"AWS":["X"]},"Action":"s3:*","Resource":"*"},`, 1)},
			bucket:   testBucket,
			wantDone: true, wantRevoked: []string{keyV1}, wantFixes: []s3.GrantFix{{Sid: "TrellisAccessforged"}},
		},
		"bucket gone already": {
			accounts: storagetest.FakeAccounts{Accounts: map[string]string{keyV1: "s"}},
			s3:       storagetest.FakeS3{PolicyErr: storagetest.ErrNoBucket}, bucket: testBucket,
			wantDone: true, wantRevoked: []string{keyV1},
		},
		"never granted anywhere": {
			accounts: storagetest.FakeAccounts{Accounts: map[string]string{keyV1: "s"}},
			wantDone: true, wantRevoked: []string{keyV1},
		},
		"store down": {
			accounts: storagetest.FakeAccounts{Accounts: map[string]string{keyV1: "s"}},
			s3:       storagetest.FakeS3{PolicyErr: storagetest.ErrDown}, bucket: testBucket,
			wantProgress: conditions.Working, wantReason: string(s3.ReasonStoreUnreachable), wantAccounts: []string{keyV1},
		},
		"accounts cannot be listed": {
			accounts:     storagetest.FakeAccounts{Accounts: map[string]string{keyV1: "s"}, ListErr: storagetest.ErrDenied},
			bucket:       testBucket,
			wantProgress: conditions.Blocked, wantReason: string(s3.ReasonAccessDenied), wantAccounts: []string{keyV1},
		},
		"store fails half-way": {
			reason:       "what was deleted is told; the rest is tried again",
			accounts:     storagetest.FakeAccounts{Accounts: map[string]string{keyV1: "s", keyV2: "s"}, DeleteErr: storagetest.ErrDown, DeleteFailsAfterCall: 2},
			bucket:       testBucket,
			wantProgress: conditions.Working, wantReason: string(s3.ReasonStoreUnreachable), wantAccounts: []string{keyV2}, wantRevoked: []string{keyV1},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			accounts, fake := tc.accounts, tc.s3
			// The access being deleted is still in the cache: its grant is live.
			live := func(context.Context) ([]stores.LiveGrant, error) {
				return []stores.LiveGrant{{Grant: s3.Grant{ID: "g", Principals: []string{keyV1, keyV2}, Mode: s3.ReadWrite}}}, nil
			}
			res := accessRevocation{accounts: &accounts, s3: &fake, lockPolicy: noLock, grants: live, store: "store-a", bucket: tc.bucket,
				grant: s3.Grant{ID: "g", Mode: s3.ReadWrite}, prefix: prefix, recorded: tc.recorded}.run(context.Background())
			g.Expect(res.done).To(Equal(tc.wantDone), "%s: %s", tc.reason, res.summary.Message)
			g.Expect(res.revoked).To(Equal(tc.wantRevoked))
			var fixes []s3.GrantFix
			for _, f := range res.grantFixes {
				fixes = append(fixes, f.GrantFix)
			}
			g.Expect(fixes).To(Equal(tc.wantFixes), "its own grant is no fix")
			ids, _ := (&storagetest.FakeAccounts{Accounts: accounts.Accounts}).ListAccounts(context.Background())
			g.Expect(ids).To(ConsistOf(tc.wantAccounts))
			if tc.wantDone {
				principals, _ := grantedKeys(t, fake.PolicyDoc, "g")
				g.Expect(principals).To(BeEmpty(), "the grant is out of the policy")
				if strings.Contains(tc.s3.PolicyDoc, "Mine") {
					g.Expect(fake.PolicyDoc).To(ContainSubstring(`"Sid":"Mine"`))
				}
				return
			}
			g.Expect(res.summary.Progress).To(Equal(tc.wantProgress))
			g.Expect(res.summary.Reason).To(Equal(tc.wantReason))
			g.Expect(res.summary.Message).To(ContainSubstring("removing the finalizer by hand leaves the account to the store sweep"), "the way out is named")
		})
	}
}

// TestAccessSyncGrantsByAccount: on a store that grants each account by a
// policy of its own (MinIO), every live key's account gets the access's
// grant, the replaced one only until its grace period ends, no statement of
// the bucket's policy stands for the access (a forged one goes), and a
// store that widens an account's grant stops the access rather than hand
// out or keep serving its key silently.
func TestAccessSyncGrantsByAccount(t *testing.T) {
	v1, v2 := stores.AccountName("store", "uid", 1), stores.AccountName("store", "uid", 2)
	widened := fmt.Errorf("%w: MinIO user is a member of the groups admins", s3.ErrGrantWidened)
	cases := map[string]struct {
		accounts   map[string]string
		current    stores.Key
		want       string
		retiring   []storagev1.RetiringKey
		grantErr   error
		wantIssued bool
		// wantGrants are the accounts granted after, wantRevoked the ones deleted.
		wantGrants, wantRevoked, wantRetiring []string
		wantReason                            string
	}{
		"the first key is granted by its account's policy": {
			want: v1, wantIssued: true, wantGrants: []string{v1}, wantReason: ReasonGranted,
		},
		"a rotation keeps the replaced key granted": {
			accounts: map[string]string{v1: "s"}, current: stores.Key{AccessKeyID: v1}, want: v2,
			wantIssued: true, wantGrants: []string{v1, v2}, wantRetiring: []string{v1}, wantReason: ReasonGranted,
		},
		"the replaced key goes when its grace period ends": {
			accounts: map[string]string{v1: "s", v2: "s"}, current: stores.Key{AccessKeyID: v2}, want: v2,
			retiring:   []storagev1.RetiringKey{storagetest.Retiring(v1, syncNow.Add(-time.Second))},
			wantGrants: []string{v2}, wantRevoked: []string{v1}, wantReason: ReasonGranted,
		},
		"a widened grant stops a new key": {
			want: v1, grantErr: widened, wantReason: ReasonGrantWidened,
		},
		"a widened grant stops a key in use": {
			accounts: map[string]string{v1: "s"}, current: stores.Key{AccessKeyID: v1}, want: v1,
			grantErr: widened, wantReason: ReasonGrantWidened,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			accounts := storagetest.FakeAccountGrants{FakeAccounts: storagetest.FakeAccounts{Accounts: tc.accounts}}
			for _, k := range append(stores.AccountNames(tc.retiring), tc.current.AccountName()) {
				if k != "" {
					g.Expect(accounts.GrantAccount(context.Background(), k, testBucket, s3.ReadOnly)).To(Succeed())
				}
			}
			accounts.Calls, accounts.GrantErr = nil, tc.grantErr
			forged, err := s3.WithGrant("", testBucket, s3.Grant{ID: "g", Principals: []string{"FORGEDKEY"}, Mode: s3.ReadWrite})
			g.Expect(err).NotTo(HaveOccurred())
			fake := storagetest.FakeS3{PolicyDoc: forged}
			// As stores.LiveGrants has it on such a store: its grant names no one.
			live := func(context.Context) ([]stores.LiveGrant, error) {
				return []stores.LiveGrant{{Grant: s3.Grant{ID: "g", Mode: s3.ReadWrite}}}, nil
			}
			res := accessSync{accounts: &accounts, s3: &fake, lockPolicy: noLock, grants: live, store: "store-a", bucket: testBucket,
				grant: s3.Grant{ID: "g", Mode: s3.ReadWrite}, current: tc.current, want: tc.want, haveSecret: tc.current.AccessKeyID != "",
				retiring: tc.retiring, now: syncNow, grace: time.Hour}.run(context.Background())

			g.Expect(res.summary.Reason).To(Equal(tc.wantReason), res.summary.Message)
			g.Expect(res.issued != nil).To(Equal(tc.wantIssued))
			g.Expect(accounts.Calls).NotTo(ContainElement(HavePrefix("Principal")), "no principal is asked of such a store")
			g.Expect(fake.PolicyDoc).NotTo(ContainSubstring("FORGEDKEY"), "no statement of the bucket's policy grants the access")
			if tc.grantErr != nil {
				g.Expect(res.summary.Progress).To(Equal(conditions.Blocked))
				g.Expect(res.summary.Message).To(ContainSubstring("member of the groups admins"))
				return
			}
			g.Expect(res.summary.Progress).To(Equal(conditions.Done))
			if res.issued != nil {
				g.Expect(res.issued.Key).To(Equal(stores.Key{AccessKeyID: tc.want}), "no principal on record")
			}
			granted := make([]string, 0, len(accounts.Grants))
			for account, grant := range accounts.Grants {
				g.Expect(grant).To(Equal(testBucket+" "+s3.ReadWrite), "the access's mode, on its bucket")
				granted = append(granted, account)
			}
			g.Expect(granted).To(ConsistOf(tc.wantGrants))
			g.Expect(res.revoked).To(Equal(tc.wantRevoked))
			g.Expect(stores.AccountNames(res.retiring)).To(ConsistOf(tc.wantRetiring))
		})
	}
}
