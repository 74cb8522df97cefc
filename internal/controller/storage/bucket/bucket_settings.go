package bucket

import (
	"context"
	"errors"
	"fmt"
	"strings"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/s3"
)

// Reasons of the SettingsApplied condition (and of Ready, when a setting is
// what keeps a bucket from being Ready).
const (
	ReasonApplied = "Applied"
	// ReasonSettingNotSupported: the store does not implement a setting.
	ReasonSettingNotSupported = "SettingNotSupported"
	// ReasonPolicyRefused: spec.policy grants beyond what the store's
	// publicAccess lets the namespace grant; nothing was sent.
	ReasonPolicyRefused = "PolicyRefused"
)

// The settings, by the names the spec gives them.
const (
	settingVersioning = "versioning"
	settingPolicy     = "policy"
	settingCORS       = "cors"
	settingLifecycle  = "lifecycle"
)

// bucketSettings are the settings a StorageBucket declares, and the means to
// apply them. Each is read from the store and written only when it differs:
// an unchanged bucket costs reads, never a write. A setting the spec leaves
// unset is not read at all.
type bucketSettings struct {
	s3     s3.Client
	store  string
	bucket string
	// lockPolicy serialises edits of the bucket's policy with BucketAccesses'.
	lockPolicy func() (unlock func())
	// grants lists the grants of live BucketAccesses that may stand in the
	// policy (read with the lock held); nil: none.
	grants func(context.Context) ([]stores.LiveGrant, error)

	versioning string // "" when not managed
	policy     string // "" when not managed
	// principals, when set, is whom the policy may grant to: the store
	// blocks public access for the namespace. nil: anyone.
	principals *principalRule
	// restrictOnly: no policy is declared, but the one in the store is held
	// to principals (public_access.go).
	restrictOnly    bool
	manageCORS      bool
	cors            []s3.CORSRule
	manageLifecycle bool
	lifecycle       []s3.ExpirationRule
}

// settingsOf reads the settings a StorageBucket declares.
func settingsOf(b *storagev1.StorageBucket) bucketSettings {
	s := bucketSettings{versioning: string(b.Spec.Versioning), policy: b.Spec.Policy}
	if b.Spec.CORS != nil {
		s.manageCORS = true
		for _, r := range b.Spec.CORS.Rules {
			rule := s3.CORSRule{AllowedOrigins: r.AllowedOrigins, AllowedHeaders: r.AllowedHeaders,
				ExposeHeaders: r.ExposeHeaders, MaxAgeSeconds: int(r.MaxAgeSeconds)}
			for _, m := range r.AllowedMethods {
				rule.AllowedMethods = append(rule.AllowedMethods, string(m))
			}
			s.cors = append(s.cors, rule)
		}
	}
	if b.Spec.Lifecycle != nil {
		s.manageLifecycle = true
		for _, r := range b.Spec.Lifecycle.Rules {
			s.lifecycle = append(s.lifecycle, s3.ExpirationRule{ID: r.ID, Prefix: r.Prefix, Days: int(r.ExpirationDays)})
		}
	}
	return s
}

// declared lists the settings the spec declares, in the order they are applied.
func (s bucketSettings) declared() []string {
	var out []string
	if s.versioning != "" {
		out = append(out, settingVersioning)
	}
	if s.policy != "" {
		out = append(out, settingPolicy)
	}
	if s.manageCORS {
		out = append(out, settingCORS)
	}
	if s.manageLifecycle {
		out = append(out, settingLifecycle)
	}
	return out
}

// settingsResult is what applying the settings found.
type settingsResult struct {
	declared []string
	// changed lists the settings written to the store.
	changed []string
	// problems are the settings not in place, each with why.
	problems []settingProblem
	// storeDown: the store stopped answering; the rest was not tried.
	storeDown bool
	// grantFixes are the statements with Trellis' Sid prefix that writing
	// the policy took out or put back to what was recorded.
	grantFixes []stores.GrantFix
	// restricted names the statements taken out of the policy in the store
	// as they granted beyond what the store lets the namespace grant.
	restricted []string
	// restrictFailed: the policy in the store could not be held to the
	// rule (a problem says why); the next check tries again.
	restrictFailed bool
}

type settingProblem struct {
	setting string
	reason  string
	message string
	// blocked: only a person can fix it.
	blocked bool
}

// apply brings each declared setting to what the spec says. A setting that
// fails does not stop the others, except a store that stopped answering.
// Where the store blocks public access (principals), the policy in the store
// is then held to the rule whatever became of the declared one.
func (s bucketSettings) apply(ctx context.Context) settingsResult {
	res := settingsResult{declared: s.declared()}
	restrict := s.restrictOnly
	for _, name := range res.declared {
		changed, fixes, err := s.applyOne(ctx, name)
		if changed {
			res.changed = append(res.changed, name)
		}
		res.grantFixes = append(res.grantFixes, fixes...)
		if name == settingPolicy && s.principals != nil {
			// Not applied, but refused or unusable: what the store holds
			// is still held to the rule.
			restrict = notApplied(err)
		}
		if err == nil {
			continue
		}
		p := settingProblemOf(name, err)
		res.problems = append(res.problems, p)
		if p.reason == string(s3.ReasonStoreUnreachable) {
			res.storeDown = true
			break
		}
	}
	if restrict && !res.storeDown {
		edit, err := s.restrict(ctx)
		res.grantFixes, res.restricted = append(res.grantFixes, edit.Fixes...), edit.Restricted
		if err != nil {
			res.restrictFailed = true
			p := settingProblemOf(settingPolicy, err)
			p.message = fmt.Sprintf("policy in the store: it may grant beyond what ObjectStore %s lets namespace %s grant, and could not be checked or rewritten: %s",
				s.store, s.principals.namespace, strings.TrimPrefix(p.message, settingPolicy+": "))
			res.problems = append(res.problems, p)
			res.storeDown = p.reason == string(s3.ReasonStoreUnreachable)
		}
	}
	return res
}

// notApplied reports a declared policy the check refused, or one Trellis or
// the store could not use; not one the store or the cache failed to take.
func notApplied(err error) bool {
	var refused *policyRefusedError
	var invalid *stores.InvalidPolicyError
	if errors.As(err, &refused) || errors.As(err, &invalid) {
		return true
	}
	if err == nil {
		return false
	}
	reason, _ := stores.ClassifyError(err)
	return reason == s3.ReasonInvalidRequest
}

func (s bucketSettings) applyOne(ctx context.Context, name string) (bool, []stores.GrantFix, error) {
	if name == settingPolicy {
		if err := s3.ValidateUserPolicy(s.policy); err != nil {
			return false, nil, &stores.InvalidPolicyError{Err: err}
		}
		if err := s.principals.check(s.policy); err != nil {
			// Not sent (apply holds the store's policy to the rule).
			return false, nil, err
		}
		edit, err := stores.BucketPolicy{S3: s.s3, Lock: s.lockPolicy, Bucket: s.bucket, Grants: s.grants}.Edit(ctx,
			func(current string) (string, error) { return s3.WithUserPolicy(current, s.policy) })
		return edit.Written, edit.Fixes, err
	}
	changed, err := s.applyOther(ctx, name)
	return changed, nil, err
}

func (s bucketSettings) applyOther(ctx context.Context, name string) (bool, error) {
	switch name {
	case settingVersioning:
		current, err := s.s3.Versioning(ctx, s.bucket)
		if err != nil {
			return false, err
		}
		// A bucket never versioned behaves as a suspended one.
		if current == s.versioning || current == "" && s.versioning == s3.VersioningSuspended {
			return false, nil
		}
		return true, s.s3.SetVersioning(ctx, s.bucket, s.versioning)
	case settingCORS:
		current, err := s.s3.CORS(ctx, s.bucket)
		if err != nil {
			return false, err
		}
		if s3.SameCORS(current, s.cors) {
			return false, nil
		}
		return true, s.s3.SetCORS(ctx, s.bucket, s.cors)
	case settingLifecycle:
		current, err := s.s3.Lifecycle(ctx, s.bucket)
		if err != nil {
			return false, err
		}
		if s3.SameLifecycle(current, s.lifecycle) {
			return false, nil
		}
		return true, s.s3.SetLifecycle(ctx, s.bucket, s.lifecycle)
	}
	return false, fmt.Errorf("unknown setting %q", name)
}

// restrict takes out of the policy in the store the statements that grant
// beyond s.principals, keeping the recorded grants. A policy Trellis cannot
// read (two spellings of "Statement", say) cannot be held to anything: it is
// replaced by the recorded grants alone.
func (s bucketSettings) restrict(ctx context.Context) (stores.PolicyEdit, error) {
	var removed []string
	edit, err := stores.BucketPolicy{S3: s.s3, Lock: s.lockPolicy, Bucket: s.bucket, Grants: s.grants,
		Unreadable: func(grants []s3.Grant, why error) (string, error) {
			removed = []string{fmt.Sprintf("every statement but the BucketAccesses' grants (the policy cannot be read: %v)", why)}
			doc := ""
			for _, g := range grants {
				var err error
				if doc, err = s3.WithGrant(doc, s.bucket, g); err != nil {
					return "", err
				}
			}
			return doc, nil
		}}.Edit(ctx,
		func(current string) (string, error) {
			next, out, err := s.principals.restrict(current)
			removed = out
			return next, err
		})
	if edit.Written && err == nil {
		edit.Restricted = removed
	}
	return edit, err
}

// principalRule is whom a bucket policy may grant to while the store blocks
// public access for the namespace: the access keys of the namespace's
// BucketAccesses in the store (s3.CheckPrincipals).
type principalRule struct {
	store, namespace string
	// allowed: the store's publicAccess is Allowed, but its
	// publicAccessNamespaceSelector does not select the namespace.
	allowed bool
	// held are the principals of the keys the namespace's BucketAccesses
	// hold in the store, current and retiring: access key ids on
	// versitygw, IAM users' ARNs on an IAM store.
	held map[string]bool
}

// check refuses a policy that grants beyond the rule; a nil rule refuses nothing.
func (p *principalRule) check(policy string) error {
	if p == nil {
		return nil
	}
	if err := s3.CheckPrincipals(policy, func(id string) bool { return p.held[id] }); err != nil {
		return &policyRefusedError{rule: p, err: err}
	}
	return nil
}

// restrict is current without the statements that grant beyond the rule.
func (p *principalRule) restrict(current string) (string, []string, error) {
	return s3.RestrictPrincipals(current, func(id string) bool { return p.held[id] })
}

// policyRefusedError is a spec.policy that grants beyond what the store lets
// the namespace grant; it was not sent to the store.
type policyRefusedError struct {
	rule *principalRule
	err  error
}

func (e *policyRefusedError) Error() string {
	why := fmt.Sprintf("ObjectStore %s blocks public access (publicAccess: Blocked)", e.rule.store)
	if e.rule.allowed {
		why = fmt.Sprintf("ObjectStore %s allows public access only to the namespaces its publicAccessNamespaceSelector selects, not %s", e.rule.store, e.rule.namespace)
	}
	// The same words whether or not this check took something out (an
	// Event tells that): the message must not change from check to check.
	inStore := "statements of the bucket's policy in the store that grant beyond that are taken out, the rest is left as it was"
	return fmt.Sprintf("refused, %s: %v. Statements that grant may name only keys of namespace %s's BucketAccesses in this store (their status.principal, or status.accessKeyID where it has none); "+
		"%s. To grant anyone else, ask the platform team to set publicAccess: Allowed and select the namespace in publicAccessNamespaceSelector",
		why, e.err, e.rule.namespace, inStore)
}

func (e *policyRefusedError) Unwrap() error { return e.err }

func settingProblemOf(setting string, err error) settingProblem {
	var ip *stores.InvalidPolicyError
	if errors.As(err, &ip) {
		return settingProblem{setting: setting, reason: stores.ReasonInvalidPolicy, blocked: true, message: "policy: " + ip.Error()}
	}
	var refused *policyRefusedError
	if errors.As(err, &refused) {
		return settingProblem{setting: setting, reason: ReasonPolicyRefused, blocked: true, message: "policy: " + refused.Error()}
	}
	var ce *stores.CacheError
	if errors.As(err, &ce) {
		return settingProblem{setting: setting, reason: conditions.ReasonReconcileError, message: setting + ": " + ce.Error()}
	}
	reason, msg := stores.ClassifyError(err)
	p := settingProblem{setting: setting, reason: string(reason), message: setting + ": " + msg}
	switch reason {
	case s3.ReasonNotSupported:
		p.reason, p.blocked = ReasonSettingNotSupported, true
		p.message = fmt.Sprintf("%s: the store does not implement it (%s); remove it from the spec", setting, msg)
	case s3.ReasonInvalidRequest:
		p.reason, p.blocked = stores.ReasonInvalidPolicy, true
	default:
		p.blocked = stores.NeedsPerson(reason)
	}
	return p
}

// summary is how the settings stand, for Ready: Done when all are in place.
func (r settingsResult) summary() conditions.Summary {
	if len(r.problems) == 0 {
		return conditions.Summary{Progress: conditions.Done, Reason: ReasonApplied,
			Message: strings.Join(r.declared, ", ") + " in place"}
	}
	progress, reason := conditions.Working, r.problems[0].reason
	for _, p := range r.problems {
		if p.blocked {
			progress, reason = conditions.Blocked, p.reason
			break
		}
	}
	msgs := make([]string, 0, len(r.problems))
	for _, p := range r.problems {
		msgs = append(msgs, p.message)
	}
	return conditions.Summary{Progress: progress, Reason: reason, Message: "bucket settings not applied: " + strings.Join(msgs, "; ")}
}
