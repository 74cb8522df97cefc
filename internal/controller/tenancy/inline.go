// Copies given inline (spec.copies items with inline): a Role,
// RoleBinding, NetworkPolicy or LimitRange written into every namespace of
// the tenant from the Tenant itself. They are kept as the other copies are
// (copies.go); what they may hold is bounded at admission
// (config/admission/tenant_copies.yaml, tenant-copy-rights) and by the
// CRD's rules on roleRef.

package tenancy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
)

// inlineCopyOf is CopyOfAnnotation's value on a copy given inline: it
// comes from no other object.
const inlineCopyOf = "inline"

// isInline says whether an item is given inline rather than copied from a
// source.
func isInline(item tenancyv1.TenantCopy) bool { return item.Inline != nil }

// inlineVersion stands for an inline item's content where a source's
// resourceVersion stands for a copied one: it changes exactly when the
// copies must be written again.
func inlineVersion(item tenancyv1.TenantCopy) (string, error) {
	raw, err := json.Marshal(item.Inline)
	if err != nil {
		return "", fmt.Errorf("encoding copy %s: %w", copyKey(item.Kind, item.Name), err)
	}
	sum := sha256.Sum256(raw)
	return "inline-" + hex.EncodeToString(sum[:16]), nil
}

// restricts says whether copies of a kind restrict the namespace rather
// than give it something: they stay in a namespace the tenant releases.
func restricts(kind tenancyv1.CopyKind) bool {
	return kind == tenancyv1.CopyNetworkPolicy || kind == tenancyv1.CopyLimitRange
}

// emptyCopy is an object of a copy's kind, to read or delete one.
func emptyCopy(kind tenancyv1.CopyKind) client.Object {
	switch kind {
	case tenancyv1.CopySecret:
		return &corev1.Secret{}
	case tenancyv1.CopyRole:
		return &rbacv1.Role{}
	case tenancyv1.CopyRoleBinding:
		return &rbacv1.RoleBinding{}
	case tenancyv1.CopyNetworkPolicy:
		return &networkingv1.NetworkPolicy{}
	case tenancyv1.CopyLimitRange:
		return &corev1.LimitRange{}
	}
	return &corev1.ConfigMap{}
}

// writeInline keeps the copy of an inline item in one namespace. A
// RoleBinding's roleRef cannot change (the CRD refuses it), so a live
// binding of the tenant's that grants another role is a leftover of an
// item removed and added again: ensureChildWith reports it as a conflict,
// and removing it is a Tenant editor's call.
func (r *Reconciler) writeInline(ctx context.Context, s *scope, item tenancyv1.TenantCopy, ns string) (found, error) {
	meta := copyMeta(s.t, item, ns)
	in := item.Inline
	expect := s.wasReady[ns]
	switch item.Kind {
	case tenancyv1.CopyRole:
		desired := &rbacv1.Role{ObjectMeta: meta, Rules: deepCopyRules(in.Rules)}
		return ensureChildWith(ctx, r, r.copyClients, s, string(item.Kind), &rbacv1.Role{}, desired, syncRoleCopy, expect)
	case tenancyv1.CopyRoleBinding:
		desired := &rbacv1.RoleBinding{ObjectMeta: meta, Subjects: append([]rbacv1.Subject(nil), in.Subjects...)}
		if in.RoleRef != nil {
			desired.RoleRef = *in.RoleRef
		}
		return ensureChildWith(ctx, r, r.copyClients, s, string(item.Kind), &rbacv1.RoleBinding{}, desired, syncRoleBindingCopy, expect)
	case tenancyv1.CopyNetworkPolicy:
		desired := &networkingv1.NetworkPolicy{ObjectMeta: meta}
		if in.NetworkPolicy != nil {
			desired.Spec = *in.NetworkPolicy.DeepCopy()
		}
		return ensureChildWith(ctx, r, r.copyClients, s, string(item.Kind), &networkingv1.NetworkPolicy{}, desired, syncNetworkPolicyCopy, expect)
	case tenancyv1.CopyLimitRange:
		desired := &corev1.LimitRange{ObjectMeta: meta}
		if in.LimitRange != nil {
			desired.Spec = *in.LimitRange.DeepCopy()
			for i := range desired.Spec.Limits {
				defaultLimitRangeItem(&desired.Spec.Limits[i])
			}
		}
		return ensureChildWith(ctx, r, r.copyClients, s, string(item.Kind), &corev1.LimitRange{}, desired, syncLimitRangeCopy, expect)
	}
	return found{namespace: ns}, fmt.Errorf("copy %s: %s is not given inline", copyKey(item.Kind, item.Name), item.Kind)
}

func deepCopyRules(in []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	out := make([]rbacv1.PolicyRule, 0, len(in))
	for i := range in {
		out = append(out, *in[i].DeepCopy())
	}
	return out
}

// keepCopy is keep for a copy: the marks, the annotation that says it is
// a copy, and the one part Trellis keeps.
func keepCopy[T client.Object, P any](part func(T) *P) func(live, desired T, t *tenancyv1.Tenant) bool {
	return func(live, desired T, t *tenancyv1.Tenant) bool {
		changed := syncCopyOf(live, desired, t)
		if l, d := part(live), part(desired); !equality.Semantic.DeepEqual(*l, *d) {
			*l = *d
			changed = true
		}
		return changed
	}
}

// What Trellis keeps of each kind of inline copy: all of what the item
// gives. A binding's role is not among it (roleRefOf).
var (
	syncRoleCopy          = keepCopy(func(r *rbacv1.Role) *[]rbacv1.PolicyRule { return &r.Rules })
	syncRoleBindingCopy   = keepCopy(func(b *rbacv1.RoleBinding) *[]rbacv1.Subject { return &b.Subjects })
	syncNetworkPolicyCopy = keepCopy(func(p *networkingv1.NetworkPolicy) *networkingv1.NetworkPolicySpec { return &p.Spec })
	syncLimitRangeCopy    = keepCopy(func(l *corev1.LimitRange) *corev1.LimitRangeSpec { return &l.Spec })
)
