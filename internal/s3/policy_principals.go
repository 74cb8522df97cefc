package s3

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"
)

// Block Public Access, as Trellis keeps it for the policies people write
// (StorageBucket spec.policy). Unless the store lets the bucket's namespace
// grant to anyone, every statement that can grant access (any Effect but
// "Deny") must name its principals, and each must be the principal of a key
// of a BucketAccess of that namespace, exactly: its access key id on
// versitygw, its IAM user's ARN on an IAM store. Refused:
//
//   - Principal "*", {"AWS": "*"}, or a list holding "*": everyone;
//   - NotPrincipal: everyone but those named;
//   - a principal type other than AWS (Service, Federated, CanonicalUser):
//     nothing Trellis issued;
//   - any other id or ARN: an account outside the namespace, another
//     namespace's key, or a pattern ("TRELLIS*", "arn:aws:iam::*:user/*");
//   - a statement that names no principal at all;
//   - a statement that grants a way to undo the block (guardActions), even
//     to the namespace's own keys.
//
// A "Deny" statement only takes access away, so it names whom it likes. The
// document is read the way Go's encoding/json (versitygw's) reads it: keys
// match whatever their case ("principal" is Principal). A key given twice in
// an object, whatever the case, is refused: readers disagree on which one
// counts, and the one checked must be the one the store applies.

// PrincipalsRefusedError lists what a policy grants beyond the keys allowed:
// one line per refused principal, in the document's order.
type PrincipalsRefusedError struct {
	Problems []string
}

// shownProblems bounds how many problems the error message names.
const shownProblems = 3

func (e *PrincipalsRefusedError) Error() string {
	shown := e.Problems
	more := ""
	if len(shown) > shownProblems {
		more = fmt.Sprintf("; and %d more", len(shown)-shownProblems)
		shown = shown[:shownProblems]
	}
	return strings.Join(shown, "; ") + more
}

// CheckPrincipals refuses a policy that grants to anyone but the principals
// (access key ids, ARNs) held reports true for (see above). It returns nil
// or a *PrincipalsRefusedError.
func CheckPrincipals(doc string, held func(principal string) bool) error {
	v, err := decodeStrict(doc)
	if err != nil {
		return &PrincipalsRefusedError{Problems: []string{"the policy cannot be checked: " + err.Error()}}
	}
	top, ok := v.(map[string]any)
	if !ok {
		return &PrincipalsRefusedError{Problems: []string{"the policy is not a JSON object"}}
	}
	raw, ok := field(top, "Statement")
	if !ok {
		return &PrincipalsRefusedError{Problems: []string{`the policy has no "Statement"`}}
	}
	statements, ok := raw.([]any)
	if !ok {
		statements = []any{raw} // S3 also takes one statement without a list
	}
	var problems []string
	for i, s := range statements {
		st, ok := s.(map[string]any)
		name := fmt.Sprintf("statement %d", i+1)
		if !ok {
			problems = append(problems, name+" is not an object")
			continue
		}
		if sid, ok := field(st, "Sid"); ok {
			if sid, ok := sid.(string); ok && sid != "" {
				name += fmt.Sprintf(" (Sid %s)", quoteShort(sid))
			}
		}
		for _, p := range statementProblems(st, held) {
			problems = append(problems, name+": "+p)
		}
	}
	if len(problems) > 0 {
		return &PrincipalsRefusedError{Problems: problems}
	}
	return nil
}

// statementProblems are the principals of one statement that are refused.
func statementProblems(st map[string]any, held func(string) bool) []string {
	if effect, ok := field(st, "Effect"); ok && effect == "Deny" {
		return nil
	}
	var problems []string
	if _, ok := field(st, "NotPrincipal"); ok {
		problems = append(problems, "NotPrincipal grants everyone it does not name")
	}
	raw, ok := field(st, "Principal")
	if !ok {
		return append(problems, "it names no Principal")
	}
	ids, unreadable := principalIDs(raw)
	problems = append(problems, unreadable...)
	if len(ids) == 0 && len(unreadable) == 0 {
		problems = append(problems, "it names no Principal")
	}
	for _, id := range ids {
		switch {
		case id == "*":
			problems = append(problems, `Principal "*" is everyone: it makes the bucket public`)
		case !held(id):
			problems = append(problems, fmt.Sprintf("principal %s is not a key of this namespace's BucketAccesses", quoteShort(id)))
		}
	}
	return append(problems, guardActionProblems(st)...)
}

// guardActions are the actions that would let a key undo Block Public
// Access behind Trellis' back: rewrite the bucket's policy, or make it or
// its objects public by ACL.
var guardActions = []string{"s3:PutBucketPolicy", "s3:DeleteBucketPolicy", "s3:PutBucketAcl", "s3:PutObjectAcl"}

// guardActionProblems refuses a statement that grants one of guardActions,
// by name or pattern ("s3:*", "s3:Put*"), or by NotAction leaving it out.
func guardActionProblems(st map[string]any) []string {
	var problems []string
	if raw, ok := field(st, "Action"); ok {
		patterns, bad := actionPatterns(raw, "Action")
		problems = append(problems, bad...)
		for _, a := range guardActions {
			if i := slices.IndexFunc(patterns, func(p string) bool { return actionMatches(p, a) }); i >= 0 {
				problems = append(problems, fmt.Sprintf("Action %s grants %s, which would let the key undo the block", quoteShort(patterns[i]), a))
				break
			}
		}
	}
	if raw, ok := field(st, "NotAction"); ok {
		patterns, bad := actionPatterns(raw, "NotAction")
		problems = append(problems, bad...)
		for _, a := range guardActions {
			if !slices.ContainsFunc(patterns, func(p string) bool { return actionMatches(p, a) }) {
				problems = append(problems, fmt.Sprintf("NotAction grants %s, which would let the key undo the block", a))
				break
			}
		}
	}
	return problems
}

func actionPatterns(raw any, what string) ([]string, []string) {
	switch v := raw.(type) {
	case string:
		return []string{v}, nil
	case []any:
		return stringList(v, what)
	}
	return nil, []string{what + " is neither a string nor a list of strings"}
}

// actionMatches reports whether an action pattern of a policy ("*" any
// run, "?" any one character, case-insensitive, as S3 reads them) matches
// action.
func actionMatches(pattern, action string) bool {
	p, a := []rune(strings.ToLower(pattern)), []rune(strings.ToLower(action))
	// Classic glob matching with one backtrack point.
	pi, ai, star, mark := 0, 0, -1, 0
	for ai < len(a) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == a[ai]):
			pi++
			ai++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, ai
			pi++
		case star >= 0:
			pi, mark = star+1, mark+1
			ai = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

// principalIDs reads a Principal element: "*", an id, a list of ids, or an
// object of principal types. Ids of the AWS type are returned; anything else
// is a problem.
func principalIDs(raw any) (ids, problems []string) {
	switch p := raw.(type) {
	case string:
		return []string{p}, nil
	case []any:
		return stringList(p, "Principal")
	case map[string]any:
		types := make([]string, 0, len(p))
		for k := range p {
			types = append(types, k)
		}
		slices.Sort(types) // messages must not change from one check to the next
		for _, typ := range types {
			if !strings.EqualFold(typ, "AWS") {
				problems = append(problems, fmt.Sprintf("principal type %s is not an access key (only AWS principals can be checked)", quoteShort(typ)))
				continue
			}
			switch v := p[typ].(type) {
			case string:
				ids = append(ids, v)
			case []any:
				more, bad := stringList(v, "Principal "+typ)
				ids, problems = append(ids, more...), append(problems, bad...)
			default:
				problems = append(problems, fmt.Sprintf("Principal %s is neither a string nor a list of strings", typ))
			}
		}
		return ids, problems
	}
	return nil, []string{"Principal is neither a string, a list nor an object"}
}

func stringList(list []any, what string) (ids, problems []string) {
	for _, x := range list {
		s, ok := x.(string)
		if !ok {
			problems = append(problems, what+" holds something that is not a string")
			continue
		}
		ids = append(ids, s)
	}
	return ids, problems
}

// field returns the value of an object's key that matches name whatever its
// case, as encoding/json matches struct fields. decodeStrict made sure there
// is at most one.
func field(obj map[string]any, name string) (any, bool) {
	for k, v := range obj {
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return nil, false
}

// maxQuoted is how much of a string from the policy a message shows: a
// whole IAM user's ARN as Trellis names its users (about 100 bytes, with
// AWS's path), so a refusal says which key it means.
const maxQuoted = 128

// quoteShort quotes a string from the policy for a message, cut to maxQuoted bytes.
func quoteShort(s string) string {
	if len(s) > maxQuoted {
		return fmt.Sprintf("%q…", s[:maxQuoted])
	}
	return fmt.Sprintf("%q", s)
}

// decodeStrict decodes a JSON document as encoding/json would into
// interface values, refusing an object that holds a key twice (compared
// without regard to case) and anything after the document.
func decodeStrict(doc string) (any, error) {
	dec := json.NewDecoder(strings.NewReader(doc))
	dec.UseNumber()
	v, err := decodeValue(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("something follows the JSON document")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, errors.New("it is not valid JSON")
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	switch d {
	case '{':
		obj := map[string]any{}
		seen := map[string]string{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, errors.New("it is not valid JSON")
			}
			key, _ := kt.(string)
			if first, dup := seen[foldKey(key)]; dup {
				if first != key {
					return nil, fmt.Errorf("an object holds the key %s twice, also as %s", quoteShort(first), quoteShort(key))
				}
				return nil, fmt.Errorf("an object holds the key %s twice", quoteShort(key))
			}
			seen[foldKey(key)] = key
			if obj[key], err = decodeValue(dec); err != nil {
				return nil, err
			}
		}
		if _, err := dec.Token(); err != nil {
			return nil, errors.New("it is not valid JSON")
		}
		return obj, nil
	case '[':
		list := []any{}
		for dec.More() {
			v, err := decodeValue(dec)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		if _, err := dec.Token(); err != nil {
			return nil, errors.New("it is not valid JSON")
		}
		return list, nil
	}
	return nil, errors.New("it is not valid JSON")
}

// foldKey maps a key to one spelling of all the spellings strings.EqualFold
// (and encoding/json's field matching) takes for the same: each rune to the
// smallest of its case-folding orbit.
func foldKey(s string) string {
	var b strings.Builder
	for _, r := range s {
		least := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			least = min(least, f)
		}
		b.WriteRune(least)
	}
	return b.String()
}

// RestrictPrincipals returns the bucket policy current without the
// statements that CheckPrincipals would refuse, and names those it took
// out ("statement 2 (Sid \"Public\")"). It is Block Public Access applied to
// a policy already in a store: one written before the block was switched on,
// or by someone else. Statements with the grant Sid prefix are left to
// KeepGrants; every other statement stays as it is, in its place. With
// nothing to take out, current comes back as it was.
func RestrictPrincipals(current string, held func(principal string) bool) (string, []string, error) {
	d, err := parsePolicy(current)
	if err != nil {
		return "", nil, fmt.Errorf("the bucket's current policy: %w", err)
	}
	var removed []string
	kept := make([]json.RawMessage, 0, len(d.statements))
	for i, raw := range d.statements {
		if isGrant(raw) {
			kept = append(kept, raw)
			continue
		}
		name := fmt.Sprintf("statement %d", i+1)
		if id := sid(raw); id != "" {
			name += fmt.Sprintf(" (Sid %s)", quoteShort(id))
		}
		v, err := decodeStrict(string(raw))
		st, ok := v.(map[string]any)
		if err != nil || !ok || len(statementProblems(st, held)) > 0 {
			removed = append(removed, name)
			continue
		}
		kept = append(kept, raw)
	}
	if len(removed) == 0 {
		return current, nil, nil
	}
	d.statements = kept
	out, err := d.render()
	return out, removed, err
}
