package s3

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// A bucket has one policy document, written by two hands: the statements a
// StorageBucket's spec.policy declares, and one statement per BucketAccess
// granting its keys. The grants carry a Sid with GrantSidPrefix; every other
// statement is the user's. Each hand rewrites only its own statements and
// keeps the other's, so neither ever drops what the other wrote.
//
// A Sid is no proof, though: whoever may write the policy directly (a key a
// user's statement granted s3:PutBucketPolicy) can write a statement with
// the prefix. So every rewrite first passes the policy through KeepGrants,
// which keeps of the prefixed statements only the grants Trellis recorded.

// GrantSidPrefix starts the Sid of every statement Trellis writes for a
// BucketAccess. It is reserved: a user's policy may not use it.
const GrantSidPrefix = "TrellisAccess"

// policyVersion is the policy language version Trellis writes.
const policyVersion = "2012-10-17"

// Errors of a policy document that cannot be used.
var (
	ErrPolicyNotJSON      = errors.New("the policy is not a JSON object")
	ErrPolicyNoStatements = errors.New(`the policy needs a "Statement" list of objects`)
	ErrPolicyReservedSid  = errors.New("the policy uses a statement Sid reserved for Trellis' own grants (" + GrantSidPrefix + "…)")
	// ErrPolicyAmbiguous: the document names its statements under two keys
	// that differ only in case; readers disagree on which counts.
	ErrPolicyAmbiguous = errors.New(`the policy holds its "Statement" key twice, in different cases`)
)

// Access modes of a grant.
const (
	ReadOnly  = "ReadOnly"
	ReadWrite = "ReadWrite"
)

// Actions granted per mode: enough for every S3 client library to read (and
// write) objects, list them, and find the bucket's region; nothing that
// changes the bucket itself, its policy or its settings.
var (
	readActions = []string{
		"s3:GetBucketLocation", "s3:ListBucket", "s3:ListBucketVersions",
		"s3:GetObject", "s3:GetObjectVersion", "s3:GetObjectTagging", "s3:GetObjectAttributes",
	}
	writeActions = []string{
		"s3:PutObject", "s3:DeleteObject", "s3:DeleteObjectVersion", "s3:PutObjectTagging", "s3:DeleteObjectTagging",
		"s3:AbortMultipartUpload", "s3:ListMultipartUploadParts", "s3:ListBucketMultipartUploads",
	}
)

// Grant is the statement of one BucketAccess: its keys may read (and, in
// ReadWrite mode, write) the objects of one bucket, and nothing else.
type Grant struct {
	// ID tells the grants of a bucket apart; the statement's Sid is
	// GrantSidPrefix+ID, so it must be letters and digits.
	ID string
	// Principals are the access key ids granted; none removes the grant.
	Principals []string
	Mode       string
}

// Sid is the statement id of the grant.
func (g Grant) Sid() string { return GrantSidPrefix + g.ID }

func (g Grant) statement(bucket string) (json.RawMessage, error) {
	actions := slices.Clone(readActions)
	if g.Mode == ReadWrite {
		actions = append(actions, writeActions...)
	}
	principals := slices.Clone(g.Principals)
	slices.Sort(principals)
	return json.Marshal(struct {
		Sid       string
		Effect    string
		Principal map[string][]string
		Action    []string
		Resource  []string
	}{
		Sid:       g.Sid(),
		Effect:    "Allow",
		Principal: map[string][]string{"AWS": principals},
		Action:    actions,
		Resource:  []string{"arn:aws:s3:::" + bucket, "arn:aws:s3:::" + bucket + "/*"},
	})
}

// document is a policy taken apart as far as Trellis needs: the top-level
// fields other than Statement are kept as they are.
type document struct {
	fields     map[string]json.RawMessage
	statements []json.RawMessage
}

func parsePolicy(doc string) (document, error) {
	d := document{fields: map[string]json.RawMessage{}}
	if strings.TrimSpace(doc) == "" {
		return d, nil
	}
	if err := json.Unmarshal([]byte(doc), &d.fields); err != nil || d.fields == nil {
		return document{}, ErrPolicyNotJSON
	}
	// A store written in Go (versitygw) matches "Statement" whatever its
	// case; so must Trellis, or statements under "statement" would pass
	// unseen and be written back.
	var raw json.RawMessage
	found := false
	for k, v := range d.fields {
		if foldKey(k) != foldKey("Statement") {
			continue
		}
		if found {
			return document{}, ErrPolicyAmbiguous
		}
		raw, found = v, true
		delete(d.fields, k)
	}
	if !found {
		return document{}, ErrPolicyNoStatements
	}
	if err := json.Unmarshal(raw, &d.statements); err != nil {
		// S3 also accepts a single statement object in place of a list.
		var one map[string]json.RawMessage
		if json.Unmarshal(raw, &one) != nil || one == nil {
			return document{}, ErrPolicyNoStatements
		}
		d.statements = []json.RawMessage{raw}
	}
	for _, st := range d.statements {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(st, &obj); err != nil || obj == nil {
			return document{}, ErrPolicyNoStatements
		}
	}
	return d, nil
}

// sid returns a statement's Sid, "" when it has none.
func sid(st json.RawMessage) string {
	var s struct{ Sid string }
	_ = json.Unmarshal(st, &s)
	return s.Sid
}

func isGrant(st json.RawMessage) bool { return strings.HasPrefix(sid(st), GrantSidPrefix) }

func (d document) render() (string, error) {
	if len(d.statements) == 0 {
		return "", nil
	}
	out := map[string]json.RawMessage{}
	for k, v := range d.fields {
		out[k] = v
	}
	if _, ok := out["Version"]; !ok {
		out["Version"] = json.RawMessage(`"` + policyVersion + `"`)
	}
	st, err := json.Marshal(d.statements)
	if err != nil {
		return "", err
	}
	out["Statement"] = st
	b, err := json.Marshal(out)
	return string(b), err
}

// ValidateUserPolicy checks a policy a person wrote: a JSON object with a
// list of statement objects, none using the reserved Sid prefix. What the
// statements say is the store's to judge when the policy is applied.
func ValidateUserPolicy(doc string) error {
	if strings.TrimSpace(doc) == "" {
		return ErrPolicyNotJSON
	}
	d, err := parsePolicy(doc)
	if err != nil {
		return err
	}
	for _, st := range d.statements {
		if isGrant(st) {
			return ErrPolicyReservedSid
		}
	}
	return nil
}

// WithUserPolicy returns the bucket policy current with its user statements
// replaced by those of user (and user's other top-level fields, such as
// Version and Id), keeping current's grants. "" means no policy at all.
func WithUserPolicy(current, user string) (string, error) {
	if err := ValidateUserPolicy(user); err != nil {
		return "", err
	}
	cur, err := parsePolicy(current)
	if err != nil {
		return "", fmt.Errorf("the bucket's current policy: %w", err)
	}
	next, _ := parsePolicy(user)
	for _, st := range cur.statements {
		if isGrant(st) {
			next.statements = append(next.statements, st)
		}
	}
	return next.render()
}

// WithGrant returns the bucket policy current with g's statement set (or
// removed, when g has no principals), everything else kept. Grants follow
// the user's statements, ordered by Sid, so the result does not depend on
// the order grants were made in.
func WithGrant(current, bucket string, g Grant) (string, error) {
	d, err := parsePolicy(current)
	if err != nil {
		return "", fmt.Errorf("the bucket's current policy: %w", err)
	}
	var user, grants []json.RawMessage
	for _, st := range d.statements {
		switch {
		case sid(st) == g.Sid():
		case isGrant(st):
			grants = append(grants, st)
		default:
			user = append(user, st)
		}
	}
	if len(g.Principals) > 0 {
		st, err := g.statement(bucket)
		if err != nil {
			return "", err
		}
		grants = append(grants, st)
	}
	slices.SortFunc(grants, func(a, b json.RawMessage) int { return strings.Compare(sid(a), sid(b)) })
	d.statements = append(user, grants...)
	return d.render()
}

// GrantFix is a grant statement KeepGrants changed.
type GrantFix struct {
	Sid string
	// Rewritten: brought back to the expected grant, as it said more than
	// that grant or something else; otherwise the statement was removed.
	Rewritten bool
}

// KeepGrants returns the policy current with its grant statements (Sid
// starting with GrantSidPrefix) held to the expected grants, and what it
// changed: a statement whose Sid is no expected grant's is removed; one
// whose Sid is becomes exactly that grant's statement on bucket, naming
// only those of its own principals the expected grant names (and is
// removed when none is left); a second statement of the same Sid is
// removed. It never adds a grant or a principal: a grant missing from the
// policy is for its own BucketAccess to put back, and an expected grant
// names every key its BucketAccess may have granted, so a grant made a
// moment ago and not yet on record is kept. Every other statement stays as
// it is, in its place; with nothing to change, current comes back as it was.
func KeepGrants(current, bucket string, expected []Grant) (string, []GrantFix, error) {
	d, err := parsePolicy(current)
	if err != nil {
		return "", nil, fmt.Errorf("the bucket's current policy: %w", err)
	}
	want := make(map[string]Grant, len(expected))
	for _, g := range expected {
		want[g.Sid()] = g
	}
	fixes := make([]GrantFix, 0, len(d.statements))
	seen := map[string]bool{}
	kept := make([]json.RawMessage, 0, len(d.statements))
	for _, st := range d.statements {
		if !isGrant(st) {
			kept = append(kept, st)
			continue
		}
		id := sid(st)
		g, ok := want[id]
		if ok && !seen[id] {
			seen[id] = true
			g.Principals = intersect(statementPrincipals(st), g.Principals)
		} else {
			g.Principals = nil // no grant of that Sid, or its second statement
		}
		if len(g.Principals) == 0 {
			fixes = append(fixes, GrantFix{Sid: id})
			continue
		}
		next, err := g.statement(bucket)
		if err != nil {
			return "", nil, err
		}
		if sameStatement(st, next) {
			kept = append(kept, st)
			continue
		}
		kept = append(kept, next)
		fixes = append(fixes, GrantFix{Sid: id, Rewritten: true})
	}
	if len(fixes) == 0 {
		return current, nil, nil
	}
	d.statements = kept
	out, err := d.render()
	return out, fixes, err
}

// statementPrincipals returns the account ids a statement names as
// {"AWS": id} or {"AWS": [ids]}; any other form names none Trellis grants.
func statementPrincipals(st json.RawMessage) []string {
	var s struct{ Principal json.RawMessage }
	if json.Unmarshal(st, &s) != nil {
		return nil
	}
	var p map[string]json.RawMessage
	if json.Unmarshal(s.Principal, &p) != nil {
		return nil
	}
	var one string
	if json.Unmarshal(p["AWS"], &one) == nil {
		return []string{one}
	}
	var many []string
	if json.Unmarshal(p["AWS"], &many) == nil {
		return many
	}
	return nil
}

// intersect returns the elements of a that b holds, without repeats.
func intersect(a, b []string) []string {
	var out []string
	for _, x := range a {
		if slices.Contains(b, x) && !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}

// sameStatement reports whether two statements say the same, as SamePolicy
// compares them.
func sameStatement(a, b json.RawMessage) bool {
	var sa, sb map[string]any
	if json.Unmarshal(a, &sa) != nil || json.Unmarshal(b, &sb) != nil {
		return false
	}
	normalizeStatement(sa)
	normalizeStatement(sb)
	ja, errA := json.Marshal(sa)
	jb, errB := json.Marshal(sb)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// SamePolicy reports whether two policy documents say the same: equal after
// formatting is dropped and the lists S3 treats as sets (actions, resources,
// principals) are sorted, a single string counting as a list of one.
func SamePolicy(a, b string) bool {
	if strings.TrimSpace(a) == "" || strings.TrimSpace(b) == "" {
		return strings.TrimSpace(a) == strings.TrimSpace(b)
	}
	na, errA := canonicalPolicy(a)
	nb, errB := canonicalPolicy(b)
	if errA != nil || errB != nil {
		return a == b
	}
	return bytes.Equal(na, nb)
}

// setElements are the statement elements whose order means nothing.
var setElements = []string{"Action", "NotAction", "Resource", "NotResource"}

func canonicalPolicy(doc string) ([]byte, error) {
	var v map[string]any
	if err := json.Unmarshal([]byte(doc), &v); err != nil {
		return nil, err
	}
	if _, ok := v["Version"]; !ok {
		v["Version"] = policyVersion
	}
	statements, _ := v["Statement"].([]any)
	if one, ok := v["Statement"].(map[string]any); ok {
		statements = []any{one}
	}
	for _, s := range statements {
		if st, ok := s.(map[string]any); ok {
			normalizeStatement(st)
		}
	}
	v["Statement"] = statements
	return json.Marshal(v) // map keys come out sorted
}

// normalizeStatement sorts the lists of a statement that S3 treats as sets.
func normalizeStatement(st map[string]any) {
	for _, k := range setElements {
		if e, ok := st[k]; ok {
			st[k] = sortedSet(e)
		}
	}
	for _, k := range []string{"Principal", "NotPrincipal"} {
		if p, ok := st[k].(map[string]any); ok {
			for typ, e := range p {
				p[typ] = sortedSet(e)
			}
		}
	}
}

func sortedSet(e any) any {
	var out []string
	switch t := e.(type) {
	case string:
		out = []string{t}
	case []any:
		for _, x := range t {
			s, ok := x.(string)
			if !ok {
				return e
			}
			out = append(out, s)
		}
	default:
		return e
	}
	slices.Sort(out)
	return slices.Compact(out)
}
