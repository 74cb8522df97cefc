package s3

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

func TestCheckPrincipals(t *testing.T) {
	const mine, retiring, theirs = "TRELLISAAAAV1", "TRELLISAAAAV0", "TRELLISBBBBV1"
	// On an IAM store a policy names a key's user by ARN.
	const mineARN, theirsARN = "arn:aws:iam::000000000000:user/TRELLISAAAAV2", "arn:aws:iam::000000000000:user/TRELLISBBBBV2"
	held := func(id string) bool { return id == mine || id == retiring || id == mineARN }
	// one is a policy of one statement, whose fields are given as JSON.
	one := func(fields string) string {
		return `{"Version":"2012-10-17","Statement":[{"Sid":"S",` + fields + `,"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}`
	}
	cases := map[string]struct {
		policy string
		// refused: the problems expected, by a word each (nil: accepted).
		refused []string
	}{
		"the namespace's key":                 {policy: one(`"Effect":"Allow","Principal":{"AWS":"` + mine + `"}`)},
		"its keys as a list, retiring too":    {policy: one(`"Effect":"Allow","Principal":{"AWS":["` + mine + `","` + retiring + `"]}`)},
		"a bare key":                          {policy: one(`"Effect":"Allow","Principal":"` + mine + `"`)},
		"a bare list of keys":                 {policy: one(`"Effect":"Allow","Principal":["` + mine + `"]`)},
		"one statement without a list":        {policy: `{"Statement":{"Effect":"Allow","Principal":{"AWS":"` + mine + `"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}}`},
		"Deny names whom it likes":            {policy: one(`"Effect":"Deny","Principal":"*"`)},
		"Deny with NotPrincipal":              {policy: one(`"Effect":"Deny","NotPrincipal":{"AWS":"` + mine + `"}`)},
		"no statements":                       {policy: `{"Statement":[]}`},
		"everyone":                            {policy: one(`"Effect":"Allow","Principal":"*"`), refused: []string{`"*" is everyone`}},
		"everyone, as AWS":                    {policy: one(`"Effect":"Allow","Principal":{"AWS":"*"}`), refused: []string{`"*" is everyone`}},
		"everyone, in a list":                 {policy: one(`"Effect":"Allow","Principal":{"AWS":["` + mine + `","*"]}`), refused: []string{`"*" is everyone`}},
		"everyone, in a bare list":            {policy: one(`"Effect":"Allow","Principal":["*"]`), refused: []string{`"*" is everyone`}},
		"everyone, key in lower case":         {policy: one(`"Effect":"Allow","principal":"*"`), refused: []string{`"*" is everyone`}},
		"everyone, type in lower case":        {policy: one(`"Effect":"Allow","Principal":{"aws":"*"}`), refused: []string{`"*" is everyone`}},
		"everyone, key escaped":               {policy: one(`"Effect":"Allow","Princip\u0061l":"*"`), refused: []string{`"*" is everyone`}},
		"an effect in other case is not Deny": {policy: one(`"Effect":"deny","Principal":"*"`), refused: []string{`"*" is everyone`}},
		"no effect is not Deny":               {policy: one(`"Principal":"*"`), refused: []string{`"*" is everyone`}},
		"NotPrincipal":                        {policy: one(`"Effect":"Allow","NotPrincipal":{"AWS":"` + theirs + `"}`), refused: []string{"NotPrincipal", "no Principal"}},
		"NotPrincipal beside a Principal":     {policy: one(`"Effect":"Allow","Principal":"` + mine + `","NotPrincipal":"x"`), refused: []string{"NotPrincipal"}},
		"another namespace's key":             {policy: one(`"Effect":"Allow","Principal":{"AWS":["` + mine + `","` + theirs + `"]}`), refused: []string{theirs}},
		"the namespace's user, by ARN":        {policy: one(`"Effect":"Allow","Principal":{"AWS":["` + mineARN + `","` + mine + `"]}`)},
		"another namespace's user, by ARN":    {policy: one(`"Effect":"Allow","Principal":{"AWS":"` + theirsARN + `"}`), refused: []string{theirsARN}},
		"a pattern of users' ARNs":            {policy: one(`"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::000000000000:user/TRELLIS*"}`), refused: []string{"user/TRELLIS*"}},
		"the user's ARN in other case":        {policy: one(`"Effect":"Allow","Principal":{"AWS":"` + strings.ToUpper(mineARN) + `"}`), refused: []string{"ARN:AWS"}},
		"an account ARN":                      {policy: one(`"Effect":"Allow","Principal":{"AWS":"arn:aws:iam::123456789012:root"}`), refused: []string{"arn:aws:iam"}},
		"a pattern of keys":                   {policy: one(`"Effect":"Allow","Principal":{"AWS":"TRELLIS*"}`), refused: []string{"TRELLIS*"}},
		"a key with a space":                  {policy: one(`"Effect":"Allow","Principal":" ` + mine + `"`), refused: []string{"not a key"}},
		"a service":                           {policy: one(`"Effect":"Allow","Principal":{"Service":"s3.amazonaws.com"}`), refused: []string{`type "Service"`}},
		"a canonical user beside a key":       {policy: one(`"Effect":"Allow","Principal":{"AWS":"` + mine + `","CanonicalUser":"*"}`), refused: []string{`type "CanonicalUser"`}},
		"no principal":                        {policy: one(`"Effect":"Allow"`), refused: []string{"no Principal"}},
		"an empty list":                       {policy: one(`"Effect":"Allow","Principal":{"AWS":[]}`), refused: []string{"no Principal"}},
		"null":                                {policy: one(`"Effect":"Allow","Principal":null`), refused: []string{"neither"}},
		"a number in the list":                {policy: one(`"Effect":"Allow","Principal":{"AWS":["` + mine + `",1]}`), refused: []string{"not a string"}},
		"the key twice":                       {policy: one(`"Effect":"Allow","Principal":"*","Principal":"` + mine + `"`), refused: []string{`"Principal" twice`}},
		"the key twice, in two cases":         {policy: one(`"Effect":"Allow","Principal":"` + mine + `","PRINCIPAL":"*"`), refused: []string{"twice, also as"}},
		"the effect twice":                    {policy: one(`"Effect":"Deny","effect":"Allow","Principal":"*"`), refused: []string{"twice"}},
		"statements twice, in two cases": {
			policy:  `{"Statement":[],"statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]}`,
			refused: []string{"twice"},
		},
		"a statement that is not an object": {policy: `{"Statement":["*"]}`, refused: []string{"not an object"}},
		"not JSON":                          {policy: `{"Statement":`, refused: []string{"not valid JSON"}},
		"trailing data":                     {policy: `{"Statement":[]} {"Statement":[{"Effect":"Allow","Principal":"*"}]}`, refused: []string{"follows"}},
		"no statement":                      {policy: `{"Version":"2012-10-17"}`, refused: []string{`no "Statement"`}},
		"each statement is told": {
			policy:  `{"Statement":[{"Sid":"Public","Effect":"Allow","Principal":"*"},{"Effect":"Allow","Principal":{"AWS":"` + mine + `"}},{"Effect":"Allow","Principal":{"AWS":"` + theirs + `"}}]}`,
			refused: []string{`statement 1 (Sid "Public")`, "statement 3: principal"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			err := CheckPrincipals(tc.policy, held)
			if tc.refused == nil {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			var refused *PrincipalsRefusedError
			g.Expect(errors.As(err, &refused)).To(BeTrue(), "got %v", err)
			g.Expect(refused.Problems).To(HaveLen(len(tc.refused)), "%q", refused.Problems)
			for i, want := range tc.refused {
				g.Expect(refused.Problems[i]).To(ContainSubstring(want))
			}
		})
	}
}

// TestCheckPrincipalsMessageIsStable: the message goes into status, which is
// written only when it changes: it must not depend on map order, and it
// stays short however many problems there are.
func TestCheckPrincipalsMessageIsStable(t *testing.T) {
	g := NewWithT(t)
	statements := make([]string, 0, 10)
	for i := range 10 {
		statements = append(statements, fmt.Sprintf(`{"Effect":"Allow","Principal":{"Service":"s%d","Federated":"f","AWS":"k%d"}}`, i, i))
	}
	policy := `{"Statement":[` + strings.Join(statements, ",") + `]}`
	first := CheckPrincipals(policy, func(string) bool { return false }).Error()
	for range 20 {
		g.Expect(CheckPrincipals(policy, func(string) bool { return false }).Error()).To(Equal(first))
	}
	g.Expect(first).To(HavePrefix(`statement 1: principal type "Federated"`))
	g.Expect(first).To(HaveSuffix("and 27 more"))
	g.Expect(CheckPrincipals(`{"Statement":[{"Effect":"Allow","Principal":"`+strings.Repeat("x", 5000)+`"}]}`, func(string) bool { return false }).Error()).
		To(HaveLen(len(`statement 1: principal "`) + maxQuoted + len(`"… is not a key of this namespace's BucketAccesses`)))
}

// FuzzCheckPrincipals: whatever CheckPrincipals accepts, read the way
// versitygw reads a policy (encoding/json into structs, keys in any case),
// grants nothing to "*" and nothing to a key it was not given.
func FuzzCheckPrincipals(f *testing.F) {
	for _, seed := range []string{
		`{"Statement":[{"Effect":"Allow","Principal":{"AWS":"K1"}}]}`,
		`{"Statement":[{"Effect":"Allow","Principal":"*"}]}`,
		`{"Statement":[{"Effect":"Deny","Principal":"*"}]}`,
		`{"Statement":[{"Effect":"Allow","principal":["K1","*"]}]}`,
		`{"Statement":{"Effect":"Allow","Principal":{"aws":["K1"]}}}`,
		`{"Statement":[],"statement":[{"Effect":"Allow","Principal":"*"}]}`,
	} {
		f.Add(seed)
	}
	held := func(id string) bool { return id == "K1" }
	f.Fuzz(func(t *testing.T, doc string) {
		if CheckPrincipals(doc, held) != nil {
			return
		}
		for _, st := range versitygwStatements(doc) {
			if st.Effect == "Deny" {
				continue
			}
			for _, p := range st.Principals {
				if !held(p) {
					t.Fatalf("accepted %s, which grants %q", doc, p)
				}
			}
		}
	})
}

// versitygwStatements reads a policy as versitygw v1.8.0 does
// (auth/bucket_policy.go, bucket_policy_principals.go): the statement list
// into structs, a Principal as a list, a string, or {"AWS": one or a list}.
func versitygwStatements(doc string) []struct {
	Effect     string
	Principals []string
} {
	var policy struct {
		Statement []struct {
			Effect    string
			Principal json.RawMessage
		}
	}
	if json.Unmarshal([]byte(doc), &policy) != nil {
		return nil
	}
	out := make([]struct {
		Effect     string
		Principals []string
	}, 0, len(policy.Statement))
	for _, st := range policy.Statement {
		var ps []string
		var s string
		var one struct{ AWS string }
		var many struct{ AWS []string }
		switch {
		case len(st.Principal) == 0:
		case json.Unmarshal(st.Principal, &ps) == nil:
		case json.Unmarshal(st.Principal, &s) == nil:
			ps = []string{s}
		case json.Unmarshal(st.Principal, &one) == nil:
			ps = []string{one.AWS}
		case json.Unmarshal(st.Principal, &many) == nil:
			ps = many.AWS
		default:
			ps = nil
		}
		out = append(out, struct {
			Effect     string
			Principals []string
		}{st.Effect, slices.Clone(ps)})
	}
	return out
}

func TestRestrictPrincipals(t *testing.T) {
	held := func(id string) bool { return id == heldKey }
	grant := `{"Sid":"` + GrantSidPrefix + `x","Effect":"Allow","Principal":{"AWS":["KEYA"]},"Action":["s3:GetObject"],"Resource":["arn:aws:s3:::b/*"]}`
	own := `{"Sid":"Own","Effect":"Allow","Principal":{"AWS":"KEYA"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`
	deny := `{"Effect":"Deny","Principal":"*","Action":"s3:DeleteObject","Resource":"arn:aws:s3:::b/*"}`
	public := `{"Sid":"Public","Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`
	other := `{"Effect":"Allow","Principal":{"AWS":["KEYA","KEYB"]},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`
	twice := `{"Effect":"Allow","Principal":{"AWS":"KEYA"},"principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}`
	doc := func(sts ...string) string {
		return `{"Version":"2012-10-17","Statement":[` + strings.Join(sts, ",") + `]}`
	}
	for _, tc := range []struct {
		name, current, want string
		removed             []string
	}{
		{name: "no policy", current: "", want: ""},
		{name: "nothing to take out comes back as it was", current: doc(grant, own, deny), want: doc(grant, own, deny)},
		{name: "everyone", current: doc(own, public, grant), want: doc(own, grant), removed: []string{`statement 2 (Sid "Public")`}},
		{name: "a key of no BucketAccess of the namespace", current: doc(other, deny), want: doc(deny), removed: []string{"statement 1"}},
		{name: "a key given twice in other cases", current: doc(twice, own), want: doc(own), removed: []string{"statement 1"}},
		{name: "only public statements leave no policy", current: doc(public), want: "", removed: []string{`statement 1 (Sid "Public")`}},
		{name: "one statement without a list", current: `{"Version":"2012-10-17","Statement":` + public + `}`, want: "", removed: []string{`statement 1 (Sid "Public")`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, removed, err := RestrictPrincipals(tc.current, held)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(removed, tc.removed) {
				t.Errorf("removed %q, want %q", removed, tc.removed)
			}
			if tc.removed == nil && got != tc.current {
				t.Errorf("changed a policy with nothing to take out:\n%s", got)
			}
			if !SamePolicy(got, tc.want) {
				t.Errorf("got\n%s\nwant\n%s", got, tc.want)
			}
			if got != "" {
				if err := CheckPrincipals(got, held); err != nil {
					t.Errorf("what is left is still refused: %v", err)
				}
			}
		})
	}
	if _, _, err := RestrictPrincipals(`{"Statement":`, held); err == nil {
		t.Error("a policy that is not JSON was not refused")
	}
}

// TestKeysMayNotUndoTheBlock: a statement that lets even the namespace's own
// key rewrite the policy or the ACLs is refused, whichever way it says so.
func TestKeysMayNotUndoTheBlock(t *testing.T) {
	held := func(id string) bool { return id == heldKey }
	stmt := func(action string) string {
		return `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":"KEYA"},` + action + `,"Resource":"arn:aws:s3:::b"}]}`
	}
	for _, action := range []string{
		`"Action":"s3:PutBucketPolicy"`, `"Action":["s3:GetObject","s3:DeleteBucketPolicy"]`, `"Action":"s3:*"`, `"Action":"*"`,
		`"Action":"S3:put*"`, `"action":"s3:PutBucket?cl"`, `"Action":"s3:PutObjectAcl"`, `"NotAction":"s3:GetObject"`,
		`"NotAction":["s3:PutBucketPolicy","s3:DeleteBucketPolicy","s3:PutBucketAcl"]`, `"Action":7`,
	} {
		if err := CheckPrincipals(stmt(action), held); err == nil {
			t.Errorf("%s: not refused", action)
		}
	}
	for _, action := range []string{
		`"Action":["s3:GetObject","s3:PutObject","s3:ListBucket"]`, `"Action":"s3:Get*"`, `"Action":"s3:PutObjectTagging"`,
		`"NotAction":["s3:Put*","s3:Delete*"]`,
	} {
		if err := CheckPrincipals(stmt(action), held); err != nil {
			t.Errorf("%s: refused: %v", action, err)
		}
	}
	deny := `{"Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":"arn:aws:s3:::b"}]}`
	if err := CheckPrincipals(deny, held); err != nil {
		t.Errorf("a Deny of everything refused: %v", err)
	}
}

// TestStatementsUnderAnotherCaseAreSeen: a store in Go reads "statement" as
// "Statement"; statements hidden under another spelling are not passed
// over, and two spellings at once are refused.
func TestStatementsUnderAnotherCaseAreSeen(t *testing.T) {
	held := func(id string) bool { return id == heldKey }
	public := `[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]`
	own := `[{"Effect":"Allow","Principal":{"AWS":"KEYA"},"Action":"s3:GetObject","Resource":"arn:aws:s3:::b/*"}]`
	got, removed, err := RestrictPrincipals(`{"statement":`+public+`}`, held)
	if err != nil || got != "" || len(removed) != 1 {
		t.Errorf(`"statement" in lower case: got %q, removed %q, %v`, got, removed, err)
	}
	got, removed, err = RestrictPrincipals(`{"ſtatement":`+public+`}`, held)
	if err != nil || got != "" || len(removed) != 1 {
		t.Errorf(`"ſtatement": got %q, removed %q, %v`, got, removed, err)
	}
	for _, doc := range []string{`{"Statement":` + own + `,"statement":` + public + `}`, `{"Statement":null,"STATEMENT":` + public + `}`} {
		if _, _, err := RestrictPrincipals(doc, held); !errors.Is(err, ErrPolicyAmbiguous) {
			t.Errorf("%s: got %v, want ErrPolicyAmbiguous", doc, err)
		}
		if _, _, err := KeepGrants(doc, "b", nil); !errors.Is(err, ErrPolicyAmbiguous) {
			t.Errorf("KeepGrants %s: got %v, want ErrPolicyAmbiguous", doc, err)
		}
	}
}

// heldKey is the one key the namespace holds in the tests above.
const heldKey = "KEYA"
