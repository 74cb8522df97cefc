package s3

import (
	"encoding/json"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

const userPolicy = `{"Version":"2012-10-17","Id":"mine","Statement":[{"Sid":"Public","Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/public/*"}]}`

func statementSids(g Gomega, doc string) []string {
	var d struct{ Statement []struct{ Sid string } }
	g.Expect(json.Unmarshal([]byte(doc), &d)).To(Succeed(), doc)
	out := make([]string, 0, len(d.Statement))
	for _, s := range d.Statement {
		out = append(out, s.Sid)
	}
	return out
}

func TestValidateUserPolicy(t *testing.T) {
	cases := map[string]struct {
		doc  string
		want error
	}{
		"a policy":                {doc: userPolicy},
		"no statements, to clear": {doc: `{"Version":"2012-10-17","Statement":[]}`},
		"one statement, no list":  {doc: `{"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}}`},
		"empty":                   {doc: "", want: ErrPolicyNotJSON},
		"not JSON":                {doc: "Allow everyone", want: ErrPolicyNotJSON},
		"cut short":               {doc: `{"Statement":[`, want: ErrPolicyNotJSON},
		"a list, not an object":   {doc: `[{"Effect":"Allow"}]`, want: ErrPolicyNotJSON},
		"null":                    {doc: `null`, want: ErrPolicyNotJSON},
		"no Statement":            {doc: `{"Version":"2012-10-17"}`, want: ErrPolicyNoStatements},
		"statement not an object": {doc: `{"Statement":["allow"]}`, want: ErrPolicyNoStatements},
		"Statement a number":      {doc: `{"Statement":3}`, want: ErrPolicyNoStatements},
		"reserved Sid":            {doc: `{"Statement":[{"Sid":"TrellisAccessX","Effect":"Allow"}]}`, want: ErrPolicyReservedSid},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			err := ValidateUserPolicy(tc.doc)
			if tc.want == nil {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(MatchError(tc.want))
			}
		})
	}
}

func TestGrantsAndUserStatementsLiveTogether(t *testing.T) {
	g := NewWithT(t)
	ro := Grant{ID: "aaa", Principals: []string{"KEYRO0000000000001"}, Mode: ReadOnly}
	rw := Grant{ID: "bbb", Principals: []string{"KEYRW0000000000002", "KEYRW0000000000001"}, Mode: ReadWrite}

	// Grants on a bucket without a policy.
	doc, err := WithGrant("", "b", rw)
	g.Expect(err).NotTo(HaveOccurred())
	doc, err = WithGrant(doc, "b", ro)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(statementSids(g, doc)).To(Equal([]string{"TrellisAccessaaa", "TrellisAccessbbb"}), "ordered by Sid, whatever the order of making")
	g.Expect(doc).To(ContainSubstring(`"Version":"2012-10-17"`))

	// Made in the other order: the same document.
	other, _ := WithGrant("", "b", ro)
	other, _ = WithGrant(other, "b", rw)
	g.Expect(SamePolicy(doc, other)).To(BeTrue())

	// A user policy replaces the user's statements and keeps the grants.
	withUser, err := WithUserPolicy(doc, userPolicy)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(statementSids(g, withUser)).To(Equal([]string{"Public", "TrellisAccessaaa", "TrellisAccessbbb"}))
	g.Expect(withUser).To(ContainSubstring(`"Id":"mine"`))

	// A grant change keeps the user's statements.
	rw.Mode = ReadOnly
	changed, err := WithGrant(withUser, "b", rw)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(statementSids(g, changed)).To(Equal([]string{"Public", "TrellisAccessaaa", "TrellisAccessbbb"}))
	g.Expect(SamePolicy(changed, withUser)).To(BeFalse(), "ReadWrite became ReadOnly")
	g.Expect(changed).NotTo(ContainSubstring("s3:PutObject"))

	// Applying the same grant again changes nothing.
	again, _ := WithGrant(changed, "b", rw)
	g.Expect(SamePolicy(again, changed)).To(BeTrue())

	// Removing every grant and the user's statements leaves no policy.
	rw.Principals, ro.Principals = nil, nil
	left, _ := WithGrant(changed, "b", rw)
	left, _ = WithGrant(left, "b", ro)
	g.Expect(statementSids(g, left)).To(Equal([]string{"Public"}))
	cleared, err := WithUserPolicy(left, `{"Statement":[]}`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cleared).To(BeEmpty())

	// A policy the user wrote with a reserved Sid is refused, not merged.
	_, err = WithUserPolicy(doc, `{"Statement":[{"Sid":"TrellisAccessaaa","Effect":"Allow"}]}`)
	g.Expect(err).To(MatchError(ErrPolicyReservedSid))
}

func TestGrantStatement(t *testing.T) {
	cases := map[string]struct {
		mode       string
		has, hasNo []string
	}{
		"read only":  {mode: ReadOnly, has: []string{"s3:GetObject", "s3:ListBucket", "s3:GetBucketLocation"}, hasNo: []string{"s3:PutObject", "s3:DeleteObject", "s3:PutBucketPolicy", "s3:*"}},
		"read write": {mode: ReadWrite, has: []string{"s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"}, hasNo: []string{"s3:PutBucketPolicy", "s3:DeleteBucket", "s3:PutBucketTagging", "s3:*"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			doc, err := WithGrant("", "team-a-assets", Grant{ID: "x", Principals: []string{"K1"}, Mode: tc.mode})
			g.Expect(err).NotTo(HaveOccurred())
			var d struct {
				Statement []struct {
					Effect    string
					Principal struct{ AWS []string }
					Action    []string
					Resource  []string
				}
			}
			g.Expect(json.Unmarshal([]byte(doc), &d)).To(Succeed())
			g.Expect(d.Statement).To(HaveLen(1))
			st := d.Statement[0]
			g.Expect(st.Effect).To(Equal("Allow"))
			g.Expect(st.Principal.AWS).To(Equal([]string{"K1"}))
			g.Expect(st.Resource).To(ConsistOf("arn:aws:s3:::team-a-assets", "arn:aws:s3:::team-a-assets/*"))
			for _, a := range tc.has {
				g.Expect(st.Action).To(ContainElement(a))
			}
			for _, a := range tc.hasNo {
				g.Expect(st.Action).NotTo(ContainElement(a))
			}
		})
	}
}

func TestSamePolicy(t *testing.T) {
	cases := map[string]struct {
		a, b string
		want bool
	}{
		"identical":             {a: userPolicy, b: userPolicy, want: true},
		"formatting":            {a: userPolicy, b: "{\n  \"Id\": \"mine\", \"Version\": \"2012-10-17\",\n \"Statement\": [{\"Resource\":\"arn:aws:s3:::b/public/*\",\"Sid\":\"Public\",\"Effect\":\"Allow\",\"Principal\":\"*\",\"Action\":\"s3:GetObject\"}]}", want: true},
		"string or list of one": {a: `{"Statement":[{"Action":"s3:GetObject"}]}`, b: `{"Statement":[{"Action":["s3:GetObject"]}]}`, want: true},
		"action order":          {a: `{"Statement":[{"Action":["s3:GetObject","s3:ListBucket"]}]}`, b: `{"Statement":[{"Action":["s3:ListBucket","s3:GetObject"]}]}`, want: true},
		"principal order":       {a: `{"Statement":[{"Principal":{"AWS":["A","B"]}}]}`, b: `{"Statement":[{"Principal":{"AWS":["B","A"]}}]}`, want: true},
		"default version":       {a: `{"Statement":[{"Action":"s3:GetObject"}]}`, b: `{"Version":"2012-10-17","Statement":[{"Action":"s3:GetObject"}]}`, want: true},
		"another action":        {a: `{"Statement":[{"Action":"s3:GetObject"}]}`, b: `{"Statement":[{"Action":"s3:PutObject"}]}`},
		"statement order":       {a: `{"Statement":[{"Sid":"A"},{"Sid":"B"}]}`, b: `{"Statement":[{"Sid":"B"},{"Sid":"A"}]}`},
		"another effect":        {a: `{"Statement":[{"Effect":"Allow"}]}`, b: `{"Statement":[{"Effect":"Deny"}]}`},
		"none and none":         {a: "", b: " ", want: true},
		"none and one":          {a: "", b: userPolicy},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(SamePolicy(tc.a, tc.b)).To(Equal(tc.want))
			g.Expect(SamePolicy(tc.b, tc.a)).To(Equal(tc.want))
		})
	}
}

func FuzzWithGrant(f *testing.F) {
	f.Add(userPolicy, "K1", true)
	f.Add(`{"Statement":[{"Sid":"TrellisAccessx"}]}`, "K2", false)
	f.Add(`{"Statement":{}}`, "", true)
	f.Fuzz(func(t *testing.T, current, principal string, rw bool) {
		mode := ReadOnly
		if rw {
			mode = ReadWrite
		}
		var principals []string
		if principal != "" {
			principals = []string{principal}
		}
		g := Grant{ID: "x", Principals: principals, Mode: mode}
		next, err := WithGrant(current, "b", g)
		if err != nil {
			return // a current policy that is not one is reported, never mangled
		}
		// Applying the grant once more changes nothing, and the user's
		// statements (everything but grants) are exactly the ones before.
		again, err := WithGrant(next, "b", g)
		if err != nil || !SamePolicy(next, again) {
			t.Fatalf("not idempotent: %q -> %q -> %q (%v)", current, next, again, err)
		}
		before, _ := parsePolicy(current)
		after, _ := parsePolicy(next)
		var userBefore, userAfter []json.RawMessage
		for _, st := range before.statements {
			if !isGrant(st) {
				userBefore = append(userBefore, st)
			}
		}
		for _, st := range after.statements {
			if !isGrant(st) {
				userAfter = append(userAfter, st)
			}
		}
		if len(userBefore) != len(userAfter) {
			t.Fatalf("user statements changed: %d before, %d after", len(userBefore), len(userAfter))
		}
	})
}

// TestKeepGrants: of the statements with the reserved Sid prefix, a
// rewrite keeps only the grants Trellis recorded, each no wider than
// recorded; it adds nothing, and leaves the user's statements alone.
func TestKeepGrants(t *testing.T) {
	const bucket = "team-a-assets"
	rw := Grant{ID: "aaa", Principals: []string{"KEYA0000000000001", "KEYA0000000000002"}, Mode: ReadWrite}
	ro := Grant{ID: "bbb", Principals: []string{"KEYB0000000000001"}, Mode: ReadOnly}
	stmt := func(g Grant, b string) string {
		st, err := g.statement(b)
		if err != nil {
			t.Fatal(err)
		}
		return string(st)
	}
	with := func(g Grant, principals ...string) Grant { g.Principals = principals; return g }
	doc := func(statements ...string) string {
		out := `{"Version":"2012-10-17","Statement":[`
		for i, s := range statements {
			if i > 0 {
				out += ","
			}
			out += s
		}
		return out + `]}`
	}
	public := `{"Sid":"Public","Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::` + bucket + `/pub/*"}`
	forged := `{"Sid":"TrellisAccessforged","Effect":"Allow","Principal":{"AWS":["KEYX0000000000001"]},"Action":["s3:GetObject","s3:PutObject"],"Resource":["arn:aws:s3:::` + bucket + `/*"]}`

	cases := map[string]struct {
		policy   string
		expected []Grant
		// want is the policy afterwards ("" for none), or the same as
		// policy when wantFixes is empty.
		want      string
		wantFixes []GrantFix
		wantErr   bool
	}{
		"no policy": {policy: "", expected: []Grant{rw}},
		"only the user's statements": {
			policy: doc(public), expected: []Grant{rw},
		},
		"the recorded grants, exactly": {
			policy: doc(public, stmt(rw, bucket), stmt(ro, bucket)), expected: []Grant{rw, ro},
		},
		"a recorded grant naming fewer keys than it may": {
			policy: doc(stmt(with(rw, "KEYA0000000000001"), bucket)), expected: []Grant{rw},
		},
		"written in another order and form: still the same": {
			policy: `{"Statement":{"Resource":["arn:aws:s3:::` + bucket + `/*","arn:aws:s3:::` + bucket + `"],"Sid":"TrellisAccessbbb","Effect":"Allow","Principal":{"AWS":"KEYB0000000000001"},` +
				`"Action":["s3:GetObjectAttributes","s3:GetObjectTagging","s3:GetObjectVersion","s3:GetObject","s3:ListBucketVersions","s3:ListBucket","s3:GetBucketLocation"]}}`,
			expected: []Grant{ro},
		},
		"a forged Sid: removed, the rest in place": {
			policy: doc(public, forged, stmt(rw, bucket)), expected: []Grant{rw},
			want:      doc(public, stmt(rw, bucket)),
			wantFixes: []GrantFix{{Sid: "TrellisAccessforged"}},
		},
		"a grant of no live access: removed": {
			policy: doc(stmt(rw, bucket), stmt(ro, bucket)), expected: []Grant{ro},
			want: doc(stmt(ro, bucket)), wantFixes: []GrantFix{{Sid: "TrellisAccessaaa"}},
		},
		"no grant expected at all: every prefixed statement goes": {
			policy: doc(public, stmt(rw, bucket)),
			want:   doc(public), wantFixes: []GrantFix{{Sid: "TrellisAccessaaa"}},
		},
		"only prefixed statements, all forged: no policy left": {
			policy: doc(forged), expected: []Grant{rw},
			want: "", wantFixes: []GrantFix{{Sid: "TrellisAccessforged"}},
		},
		"a recorded Sid naming a key of someone else too: narrowed": {
			policy:   doc(stmt(with(rw, "KEYA0000000000001", "KEYX0000000000001"), bucket)),
			expected: []Grant{rw},
			want:     doc(stmt(with(rw, "KEYA0000000000001"), bucket)), wantFixes: []GrantFix{{Sid: "TrellisAccessaaa", Rewritten: true}},
		},
		"a recorded Sid naming only someone else's key: removed": {
			policy: doc(stmt(with(ro, "KEYX0000000000001"), bucket)), expected: []Grant{ro},
			want: "", wantFixes: []GrantFix{{Sid: "TrellisAccessbbb"}},
		},
		"a recorded Sid for everyone: removed": {
			policy:   doc(`{"Sid":"TrellisAccessbbb","Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::` + bucket + `/*"}`),
			expected: []Grant{ro},
			want:     "", wantFixes: []GrantFix{{Sid: "TrellisAccessbbb"}},
		},
		"a recorded Sid granting the bucket's policy too: back to its mode": {
			policy: doc(`{"Sid":"TrellisAccessbbb","Effect":"Allow","Principal":{"AWS":["KEYB0000000000001"]},"Action":["s3:GetObject","s3:PutBucketPolicy"],` +
				`"Resource":["arn:aws:s3:::` + bucket + `","arn:aws:s3:::` + bucket + `/*"]}`),
			expected: []Grant{ro},
			want:     doc(stmt(ro, bucket)), wantFixes: []GrantFix{{Sid: "TrellisAccessbbb", Rewritten: true}},
		},
		"a recorded Sid with a condition added: rewritten": {
			policy:   doc(strings.TrimSuffix(stmt(ro, bucket), "}") + `,"Condition":{"IpAddress":{"aws:SourceIp":"0.0.0.0/0"}}}`),
			expected: []Grant{ro},
			want:     doc(stmt(ro, bucket)), wantFixes: []GrantFix{{Sid: "TrellisAccessbbb", Rewritten: true}},
		},
		"a read-only grant made read-write: back to read-only": {
			policy:   doc(stmt(Grant{ID: "bbb", Principals: ro.Principals, Mode: ReadWrite}, bucket)),
			expected: []Grant{ro},
			want:     doc(stmt(ro, bucket)), wantFixes: []GrantFix{{Sid: "TrellisAccessbbb", Rewritten: true}},
		},
		"a recorded grant on another bucket's objects: back to this bucket": {
			policy: doc(stmt(ro, "other-bucket")), expected: []Grant{ro},
			want: doc(stmt(ro, bucket)), wantFixes: []GrantFix{{Sid: "TrellisAccessbbb", Rewritten: true}},
		},
		"a recorded Sid that denies: rewritten to the grant": {
			policy:   doc(`{"Sid":"TrellisAccessbbb","Effect":"Deny","Principal":{"AWS":["KEYB0000000000001"]},"Action":"s3:*","Resource":"*"}`),
			expected: []Grant{ro},
			want:     doc(stmt(ro, bucket)), wantFixes: []GrantFix{{Sid: "TrellisAccessbbb", Rewritten: true}},
		},
		"the same Sid twice: the second goes": {
			policy: doc(stmt(ro, bucket), stmt(with(ro, "KEYB0000000000001"), bucket)), expected: []Grant{ro},
			want: doc(stmt(ro, bucket)), wantFixes: []GrantFix{{Sid: "TrellisAccessbbb"}},
		},
		"a missing grant is not added": {
			policy: doc(public), expected: []Grant{rw, ro},
		},
		"a policy that is not one": {policy: "garbage", wantErr: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			got, fixes, err := KeepGrants(tc.policy, bucket, tc.expected)
			if tc.wantErr {
				g.Expect(err).To(HaveOccurred())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(fixes).To(Equal(tc.wantFixes))
			if len(tc.wantFixes) == 0 {
				g.Expect(got).To(Equal(tc.policy), "nothing to change: the policy as it was")
				return
			}
			if tc.want == "" {
				g.Expect(got).To(BeEmpty())
				return
			}
			g.Expect(SamePolicy(got, tc.want)).To(BeTrue(), "got %s\nwant %s", got, tc.want)
			g.Expect(statementSids(g, got)).To(Equal(statementSids(g, tc.want)), "statements stay in place")
			// Held once, nothing more to change.
			again, more, err := KeepGrants(got, bucket, tc.expected)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(more).To(BeEmpty())
			g.Expect(again).To(Equal(got))
		})
	}
}
