package bucket

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/outcome"
	"github.com/trellis-dev/trellis/internal/controller/storage/storagetest"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/s3"
)

// TestBucketSettings drives every exit of applying bucket settings with a
// fake store: each setting is read, and written only when it differs.
// keyV1 is an access key a policy grants to.
const keyV1 = "TRELLISAAAAV1"

func noLock() func() { return func() {} }

func TestBucketSettings(t *testing.T) {
	userPolicy := `{"Version":"2012-10-17","Statement":[{"Sid":"Public","Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::team-assets/pub/*"}]}`
	withGrant, _ := s3.WithGrant("", testBucket, s3.Grant{ID: "g", Principals: []string{keyV1}, Mode: s3.ReadOnly})
	withBoth, _ := s3.WithUserPolicy(withGrant, userPolicy)
	cors := &storagev1.BucketCORS{Rules: []storagev1.CORSRule{{AllowedOrigins: []string{"https://app.example.com"}, AllowedMethods: []storagev1.CORSMethod{"GET", "PUT"}, MaxAgeSeconds: 60}}}
	corsInStore := []s3.CORSRule{{AllowedOrigins: []string{"https://app.example.com"}, AllowedMethods: []string{"PUT", "GET"}, MaxAgeSeconds: 60}}
	lifecycle := &storagev1.BucketLifecycle{Rules: []storagev1.ExpirationRule{{ID: "tmp", Prefix: "tmp/", ExpirationDays: 7}}}

	blocked := &principalRule{store: "store-a", namespace: testNS, held: map[string]bool{keyV1: true}}
	ownKeyPolicy := `{"Statement":[{"Effect":"Allow","Principal":{"AWS":"` + keyV1 + `"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::team-assets/*"}]}`
	cases := map[string]struct {
		reason string
		spec   func(*storagev1.StorageBucketSpec)
		s3     storagetest.FakeS3
		// principals is whom the policy may grant to (nil: anyone).
		principals *principalRule
		// restrictOnly: no policy declared, held to principals all the same.
		restrictOnly bool

		wantCalls    []string
		wantChanged  []string
		wantProgress conditions.Progress
		wantReason   string
		wantDown     bool
		// wantFixes are the grant statements taken out or put back.
		wantFixes []s3.GrantFix
		// grantsErr: the cache cannot say which grants are live.
		grantsErr error
		check     func(Gomega, *storagetest.FakeS3)
	}{
		"nothing declared": {
			reason: "no setting in the spec: nothing is even read",
			spec:   func(*storagev1.StorageBucketSpec) {}, wantProgress: conditions.Done, wantReason: ReasonApplied,
		},
		"versioning to enable": {
			spec:      func(s *storagev1.StorageBucketSpec) { s.Versioning = storagev1.VersioningEnabled },
			wantCalls: []string{"Versioning", "SetVersioning"}, wantChanged: []string{settingVersioning},
			wantProgress: conditions.Done, wantReason: ReasonApplied,
			check: func(g Gomega, f *storagetest.FakeS3) { g.Expect(f.VersioningStatus).To(Equal(s3.VersioningEnabled)) },
		},
		"versioning in place": {
			spec: func(s *storagev1.StorageBucketSpec) { s.Versioning = storagev1.VersioningEnabled },
			s3:   storagetest.FakeS3{VersioningStatus: s3.VersioningEnabled}, wantCalls: []string{"Versioning"},
			wantProgress: conditions.Done, wantReason: ReasonApplied,
		},
		"suspended on a bucket never versioned": {
			reason:    "the same thing to S3: no write",
			spec:      func(s *storagev1.StorageBucketSpec) { s.Versioning = storagev1.VersioningSuspended },
			wantCalls: []string{"Versioning"}, wantProgress: conditions.Done, wantReason: ReasonApplied,
		},
		"policy with grants in place": {
			reason: "the user's statements are set, the grants kept",
			spec:   func(s *storagev1.StorageBucketSpec) { s.Policy = userPolicy },
			s3:     storagetest.FakeS3{PolicyDoc: withGrant}, wantCalls: []string{"Policy", "SetPolicy"}, wantChanged: []string{settingPolicy},
			wantProgress: conditions.Done, wantReason: ReasonApplied,
			check: func(g Gomega, f *storagetest.FakeS3) {
				g.Expect(s3.SamePolicy(f.PolicyDoc, withBoth)).To(BeTrue(), f.PolicyDoc)
			},
		},
		"policy in place": {
			spec: func(s *storagev1.StorageBucketSpec) { s.Policy = userPolicy },
			s3:   storagetest.FakeS3{PolicyDoc: withBoth}, wantCalls: []string{"Policy"},
			wantProgress: conditions.Done, wantReason: ReasonApplied,
		},
		"policy in place, a forged grant beside it: taken out, told": {
			reason: "a statement with the reserved Sid that is no recorded grant",
			spec:   func(s *storagev1.StorageBucketSpec) { s.Policy = userPolicy },
			s3: storagetest.FakeS3{PolicyDoc: func() string {
				p, _ := s3.WithGrant(withBoth, testBucket, s3.Grant{ID: "forged", Principals: []string{"FORGEDKEY0000001"}, Mode: s3.ReadWrite})
				return p
			}()},
			wantCalls: []string{"Policy", "SetPolicy"}, wantChanged: []string{settingPolicy},
			wantProgress: conditions.Done, wantReason: ReasonApplied,
			wantFixes: []s3.GrantFix{{Sid: s3.GrantSidPrefix + "forged"}},
			check: func(g Gomega, f *storagetest.FakeS3) {
				g.Expect(s3.SamePolicy(f.PolicyDoc, withBoth)).To(BeTrue(), f.PolicyDoc)
			},
		},
		"policy in place, a live grant widened: put back, told": {
			spec: func(s *storagev1.StorageBucketSpec) { s.Policy = userPolicy },
			s3: storagetest.FakeS3{PolicyDoc: func() string {
				p, _ := s3.WithGrant(withBoth, testBucket, s3.Grant{ID: "g", Principals: []string{keyV1, "FORGEDKEY0000001"}, Mode: s3.ReadWrite})
				return p
			}()},
			wantCalls: []string{"Policy", "SetPolicy"}, wantChanged: []string{settingPolicy},
			wantProgress: conditions.Done, wantReason: ReasonApplied,
			wantFixes: []s3.GrantFix{{Sid: s3.GrantSidPrefix + "g", Rewritten: true}},
			check: func(g Gomega, f *storagetest.FakeS3) {
				g.Expect(s3.SamePolicy(f.PolicyDoc, withBoth)).To(BeTrue(), f.PolicyDoc)
			},
		},
		"the cache cannot say which grants are live: nothing sent": {
			spec:         func(s *storagev1.StorageBucketSpec) { s.Policy = userPolicy },
			s3:           storagetest.FakeS3{PolicyDoc: withGrant},
			grantsErr:    storagetest.ErrUnavailable,
			wantProgress: conditions.Working, wantReason: conditions.ReasonReconcileError,
		},
		"policy that is not JSON": {
			reason:       "refused before the store is asked",
			spec:         func(s *storagev1.StorageBucketSpec) { s.Policy = "allow everyone" },
			wantProgress: conditions.Blocked, wantReason: stores.ReasonInvalidPolicy,
		},
		"policy using the reserved Sid": {
			spec: func(s *storagev1.StorageBucketSpec) {
				s.Policy = `{"Statement":[{"Sid":"TrellisAccessX","Effect":"Allow"}]}`
			},
			wantProgress: conditions.Blocked, wantReason: stores.ReasonInvalidPolicy,
		},
		"policy the store refuses": {
			spec: func(s *storagev1.StorageBucketSpec) { s.Policy = userPolicy },
			s3:   storagetest.FakeS3{SetPolicyErr: storagetest.ErrBadPolicy}, wantCalls: []string{"Policy", "SetPolicy"}, wantChanged: []string{settingPolicy},
			wantProgress: conditions.Blocked, wantReason: stores.ReasonInvalidPolicy,
		},
		"a public policy where the store blocks it": {
			reason: "refused: the store's policy is read, and with nothing to take out it stays as it was",
			spec:   func(s *storagev1.StorageBucketSpec) { s.Policy = userPolicy }, principals: blocked,
			s3:           storagetest.FakeS3{PolicyDoc: withGrant},
			wantCalls:    []string{"Policy"},
			wantProgress: conditions.Blocked, wantReason: ReasonPolicyRefused,
			check: func(g Gomega, f *storagetest.FakeS3) { g.Expect(f.PolicyDoc).To(Equal(withGrant)) },
		},
		"a public policy where the store blocks it, the store's policy already public": {
			reason: "refused, and the public statement in the store taken out, the grant kept",
			spec:   func(s *storagev1.StorageBucketSpec) { s.Policy = userPolicy }, principals: blocked,
			s3:           storagetest.FakeS3{PolicyDoc: mustPolicy(s3.WithUserPolicy(withGrant, userPolicy))},
			wantCalls:    []string{"Policy", "SetPolicy"},
			wantProgress: conditions.Blocked, wantReason: ReasonPolicyRefused,
			check: func(g Gomega, f *storagetest.FakeS3) {
				g.Expect(s3.SamePolicy(f.PolicyDoc, withGrant)).To(BeTrue(), f.PolicyDoc)
			},
		},
		"an invalid spec.policy where the store blocks, the store's policy public: taken out all the same": {
			spec:       func(s *storagev1.StorageBucketSpec) { s.Policy = "{}" },
			principals: blocked, s3: storagetest.FakeS3{PolicyDoc: withBoth},
			wantCalls:    []string{"Policy", "SetPolicy"},
			wantProgress: conditions.Blocked, wantReason: stores.ReasonInvalidPolicy,
			check: func(g Gomega, f *storagetest.FakeS3) {
				g.Expect(s3.SamePolicy(f.PolicyDoc, withGrant)).To(BeTrue(), f.PolicyDoc)
			},
		},
		"no spec.policy, the store's policy unreadable where the store blocks: replaced by the grants": {
			spec: func(*storagev1.StorageBucketSpec) {}, principals: blocked, restrictOnly: true,
			s3:           storagetest.FakeS3{PolicyDoc: `{"Statement":[],"statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"*"}]}`},
			wantCalls:    []string{"Policy", "SetPolicy"},
			wantProgress: conditions.Done, wantReason: ReasonApplied,
			check: func(g Gomega, f *storagetest.FakeS3) {
				g.Expect(s3.SamePolicy(f.PolicyDoc, withGrant)).To(BeTrue(), f.PolicyDoc)
			},
		},
		"no spec.policy, the store refuses the held policy: Stalled, said": {
			spec: func(*storagev1.StorageBucketSpec) {}, principals: blocked, restrictOnly: true,
			s3:           storagetest.FakeS3{PolicyDoc: withBoth, SetPolicyErr: storagetest.ErrBadPolicy},
			wantCalls:    []string{"Policy", "SetPolicy"},
			wantProgress: conditions.Blocked, wantReason: stores.ReasonInvalidPolicy,
		},
		"no spec.policy, the store down while holding its policy: not Done": {
			spec: func(*storagev1.StorageBucketSpec) {}, principals: blocked, restrictOnly: true,
			s3:        storagetest.FakeS3{PolicyErr: storagetest.ErrDown},
			wantCalls: []string{"Policy"}, wantDown: true,
			wantProgress: conditions.Working, wantReason: string(s3.ReasonStoreUnreachable),
		},
		"no spec.policy, held to a blocking store: the public statement taken out": {
			spec: func(*storagev1.StorageBucketSpec) {}, principals: blocked, restrictOnly: true,
			s3:           storagetest.FakeS3{PolicyDoc: mustPolicy(s3.WithUserPolicy(withGrant, userPolicy))},
			wantCalls:    []string{"Policy", "SetPolicy"},
			wantProgress: conditions.Done, wantReason: ReasonApplied,
			check: func(g Gomega, f *storagetest.FakeS3) {
				g.Expect(s3.SamePolicy(f.PolicyDoc, withGrant)).To(BeTrue(), f.PolicyDoc)
			},
		},
		"a policy of the namespace's own key where the store blocks public access": {
			spec: func(s *storagev1.StorageBucketSpec) { s.Policy = ownKeyPolicy }, principals: blocked,
			wantCalls: []string{"Policy", "SetPolicy"}, wantChanged: []string{settingPolicy},
			wantProgress: conditions.Done, wantReason: ReasonApplied,
		},
		"a public policy refused, the other settings still applied": {
			spec: func(s *storagev1.StorageBucketSpec) {
				s.Policy, s.Versioning = userPolicy, storagev1.VersioningEnabled
			},
			principals: blocked, wantCalls: []string{"Versioning", "SetVersioning", "Policy"}, wantChanged: []string{settingVersioning},
			wantProgress: conditions.Blocked, wantReason: ReasonPolicyRefused,
		},
		"cors to set": {
			spec:      func(s *storagev1.StorageBucketSpec) { s.CORS = cors },
			wantCalls: []string{"CORS", "SetCORS"}, wantChanged: []string{settingCORS}, wantProgress: conditions.Done, wantReason: ReasonApplied,
			check: func(g Gomega, f *storagetest.FakeS3) { g.Expect(s3.SameCORS(f.CORSRules, corsInStore)).To(BeTrue()) },
		},
		"cors in place (methods in another order)": {
			spec: func(s *storagev1.StorageBucketSpec) { s.CORS = cors },
			s3:   storagetest.FakeS3{CORSRules: corsInStore}, wantCalls: []string{"CORS"}, wantProgress: conditions.Done, wantReason: ReasonApplied,
		},
		"cors with no rules removes them": {
			spec: func(s *storagev1.StorageBucketSpec) { s.CORS = &storagev1.BucketCORS{} },
			s3:   storagetest.FakeS3{CORSRules: corsInStore}, wantCalls: []string{"CORS", "SetCORS"}, wantChanged: []string{settingCORS},
			wantProgress: conditions.Done, wantReason: ReasonApplied,
			check: func(g Gomega, f *storagetest.FakeS3) { g.Expect(f.CORSRules).To(BeEmpty()) },
		},
		"lifecycle not implemented, the others still applied": {
			reason: "versitygw v1.8.0: said so, never faked",
			spec: func(s *storagev1.StorageBucketSpec) {
				s.Versioning, s.Lifecycle = storagev1.VersioningEnabled, lifecycle
			},
			s3:        storagetest.FakeS3{LifecycleErr: errNotImpl},
			wantCalls: []string{"Versioning", "SetVersioning", "Lifecycle"}, wantChanged: []string{settingVersioning},
			wantProgress: conditions.Blocked, wantReason: ReasonSettingNotSupported,
		},
		"lifecycle to set": {
			spec:      func(s *storagev1.StorageBucketSpec) { s.Lifecycle = lifecycle },
			wantCalls: []string{"Lifecycle", "SetLifecycle"}, wantChanged: []string{settingLifecycle}, wantProgress: conditions.Done, wantReason: ReasonApplied,
			check: func(g Gomega, f *storagetest.FakeS3) {
				g.Expect(f.LifecycleRules).To(Equal([]s3.ExpirationRule{{ID: "tmp", Prefix: "tmp/", Days: 7}}))
			},
		},
		"store down: the rest is not tried": {
			spec: func(s *storagev1.StorageBucketSpec) { s.Versioning, s.CORS = storagev1.VersioningEnabled, cors },
			s3:   storagetest.FakeS3{VersioningErr: storagetest.ErrDown}, wantCalls: []string{"Versioning"},
			wantProgress: conditions.Working, wantReason: string(s3.ReasonStoreUnreachable), wantDown: true,
		},
		"refused credentials": {
			spec: func(s *storagev1.StorageBucketSpec) { s.CORS = cors },
			s3:   storagetest.FakeS3{CORSErr: storagetest.ErrDenied}, wantCalls: []string{"CORS"},
			wantProgress: conditions.Blocked, wantReason: string(s3.ReasonAccessDenied),
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			b := statusBucket(1, storagev1.StorageBucketStatus{})
			tc.spec(&b.Spec)
			fake := tc.s3
			settings := settingsOf(b)
			settings.s3, settings.store, settings.bucket, settings.lockPolicy = &fake, "store-a", testBucket, noLock
			settings.principals, settings.restrictOnly = tc.principals, tc.restrictOnly
			// The grant of the bucket's one live access.
			settings.grants = func(context.Context) ([]stores.LiveGrant, error) {
				return []stores.LiveGrant{{Grant: s3.Grant{ID: "g", Principals: []string{keyV1}, Mode: s3.ReadOnly}}}, tc.grantsErr
			}

			res := settings.apply(context.Background())
			var fixes []s3.GrantFix
			for _, f := range res.grantFixes {
				fixes = append(fixes, f.GrantFix)
			}
			g.Expect(fixes).To(Equal(tc.wantFixes))

			g.Expect(fake.Calls).To(Equal(tc.wantCalls), tc.reason)
			g.Expect(res.changed).To(Equal(tc.wantChanged))
			g.Expect(res.storeDown).To(Equal(tc.wantDown))
			sum := res.summary()
			g.Expect(sum.Progress).To(Equal(tc.wantProgress), sum.Message)
			g.Expect(sum.Reason).To(Equal(tc.wantReason), sum.Message)
			if tc.check != nil {
				tc.check(g, &fake)
			}
		})
	}
}

// TestSettingsStatus: SettingsApplied is there exactly when settings are
// declared, and a failed check leaves what is known of them.
func TestSettingsStatus(t *testing.T) {
	g := NewWithT(t)
	b := statusBucket(1, wasReady)
	b.Spec.Versioning = storagev1.VersioningEnabled
	notSupported := settingsResult{declared: []string{settingLifecycle}, problems: []settingProblem{{setting: settingLifecycle, reason: ReasonSettingNotSupported, blocked: true, message: "lifecycle: no"}}}
	res := checkResult{summary: notSupported.summary(), claim: storagev1.BucketClaimed, settings: &notSupported}
	st := computeBucketStatus(b, checked(res), outcome.Outcome{})
	c := conditions.Get(st.Conditions, conditions.SettingsApplied)
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.Reason).To(Equal(ReasonSettingNotSupported))
	g.Expect(conditions.IsTrue(st.Conditions, conditions.Stalled)).To(BeTrue())

	// The store goes down: the check stops before the settings; what is known stays.
	b.Status = st
	down := checkResult{summary: conditions.Summary{Progress: conditions.Working, Reason: string(s3.ReasonStoreUnreachable), Message: "down"}}
	st = computeBucketStatus(b, checked(down), outcome.Outcome{})
	g.Expect(conditions.Get(st.Conditions, conditions.SettingsApplied).Reason).To(Equal(ReasonSettingNotSupported))

	// The settings leave the spec: so does the condition.
	b.Status = st
	b.Spec.Versioning = ""
	st = computeBucketStatus(b, checked(checkResult{summary: healthy(testBucket, "store-a")}), outcome.Outcome{})
	g.Expect(conditions.Get(st.Conditions, conditions.SettingsApplied)).To(BeNil())
	g.Expect(conditions.IsTrue(st.Conditions, conditions.Ready)).To(BeTrue())
}

// TestPolicyRefusedSays: the message names what was refused, that nothing
// was sent, and who can allow it.
func TestPolicyRefusedSays(t *testing.T) {
	g := NewWithT(t)
	rule := &principalRule{store: "store-a", namespace: testNS, held: map[string]bool{}}
	p := settingProblemOf(settingPolicy, rule.check(`{"Statement":[{"Sid":"Pub","Effect":"Allow","Principal":"*"}]}`))
	g.Expect(p.reason).To(Equal(ReasonPolicyRefused))
	g.Expect(p.blocked).To(BeTrue())
	g.Expect(p.message).To(HavePrefix(`policy: refused, ObjectStore store-a blocks public access (publicAccess: Blocked): statement 1 (Sid "Pub"): Principal "*" is everyone`))
	g.Expect(p.message).To(ContainSubstring("left as it was"))
	g.Expect(p.message).To(ContainSubstring("publicAccess: Allowed and select the namespace in publicAccessNamespaceSelector"))
	rule.allowed = true
	p = settingProblemOf(settingPolicy, rule.check(`{"Statement":[{"Effect":"Allow","Principal":"*"}]}`))
	g.Expect(p.message).To(ContainSubstring("allows public access only to the namespaces its publicAccessNamespaceSelector selects, not team"))
	g.Expect((*principalRule)(nil).check(`{"Statement":[{"Effect":"Allow","Principal":"*"}]}`)).To(Succeed(), "no rule: anyone")
}

func mustPolicy(doc string, err error) string {
	if err != nil {
		panic(err)
	}
	return doc
}
