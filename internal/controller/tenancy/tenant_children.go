// The second step of a Tenant's reconcile: what each of its namespaces
// holds (the admin and viewer RoleBindings, the guardrails), the
// per-tenant ClusterRole and its binding, and the release of the
// namespaces the spec dropped (tenant_release.go); then, with network
// isolation, the team's policies that undo it (isolation.go).

package tenancy

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/controller/apierr"
	"github.com/trellis-dev/trellis/internal/controller/children"
	"github.com/trellis-dev/trellis/internal/controller/setup"
)

// reconcileContents writes, in one round, what every namespace the first
// step found ready holds, beside the release of the namespaces the spec
// dropped and the per-tenant ClusterRole followed by its binding (the role
// names the namespaces of the first step). A new Tenant thus waits on four
// round trips to the API server: namespaces, bindings and role, role
// binding, status. Then, with network isolation, it judges the team's
// policies in those namespaces, from the cache.
func (r *Reconciler) reconcileContents(ctx context.Context, s *scope) error {
	ready := s.obs.ready()
	dropped, err := r.droppedNamespaces(ctx, s)
	if err != nil {
		return err
	}
	if err := r.planTenantQuota(ctx, s, ready); err != nil {
		return err
	}
	if len(s.t.Spec.Copies)+len(s.t.Status.Copies) > 0 {
		if err := r.planCopies(ctx, s, ready); err != nil {
			return err
		}
	}
	writes := make([]write, 0, (5+len(s.copies))*len(ready)+len(dropped)+1) // five per namespace, and its copies
	for _, ns := range ready {
		writes = append(writes, r.namespaceContents(s, ns)...)
	}
	for i := range dropped {
		writes = append(writes, func(ctx context.Context) (found, error) {
			return r.release(ctx, s, &dropped[i], s.t.Spec.NamespaceDeletionPolicy)
		})
	}
	writes = append(writes, func(ctx context.Context) (found, error) { return r.reconcileTenantRole(ctx, s, ready) })
	err = s.runRound(ctx, writes)
	s.quota.report(s.obs, s.t, ready)
	if err == nil && s.raced == nil {
		s.obs.copies, s.obs.copiesTold = copyStatuses(s.copies, s.obs.copiesUndone), true
	}
	if err != nil || s.raced != nil || s.t.Spec.NetworkIsolation == nil {
		return err
	}
	for _, ns := range ready {
		if err := r.checkIsolation(ctx, s, ns); err != nil {
			return err
		}
	}
	return nil
}

// namespaceContents are the writes that keep, in one of the tenant's
// namespaces, the admin and viewer RoleBindings and the guardrails the spec
// asks for, and remove those it no longer asks for.
func (r *Reconciler) namespaceContents(s *scope, ns string) []write {
	t := s.t
	expect := s.wasReady[ns] && s.settled
	var writes []write
	// With quota.tenant, nobody is bound in a namespace before its quota
	// enforces the tenant's limit (quotaPlan.admits).
	copies := r.copyWrites(s, ns)
	if s.quota.admits(ns, t.Spec.Quota.Tenant.Hard) {
		bind := func(ctx context.Context) (found, error) {
			return ensureChild(ctx, r, s, "RoleBinding", &rbacv1.RoleBinding{},
				desiredRoleBinding(t, ns, adminRoleBindingName, builtinAdminRole, adminSubjects(t)), syncRoleBinding, expect)
		}
		if !s.wasReady[ns] && len(copies) > 0 {
			// A namespace new to the tenant holds its copies before its
			// admins are bound in it.
			bind = inOrder(append(copies, bind)...)
			copies = nil
		}
		writes = append(writes, bind)
		if viewers := viewerSubjects(t); len(viewers) > 0 {
			writes = append(writes, func(ctx context.Context) (found, error) {
				return ensureChild(ctx, r, s, "RoleBinding", &rbacv1.RoleBinding{},
					desiredRoleBinding(t, ns, viewerRoleBindingName, builtinViewRole, viewers), syncRoleBinding, expect)
			})
		} else {
			writes = append(writes, r.removeChild(s, "RoleBinding", ns, viewerRoleBindingName, &rbacv1.RoleBinding{}))
		}
	}
	switch {
	case s.quota != nil:
		writes = append(writes, r.tenantQuotaWrite(s, ns))
	case len(t.Spec.Quota.Hard) > 0:
		writes = append(writes, func(ctx context.Context) (found, error) {
			live := &corev1.ResourceQuota{}
			f, err := ensureChild(ctx, r, s, "ResourceQuota", live, desiredQuota(t, ns), syncQuota, expect)
			if err == nil && live.Name != "" && ownsQuota(live, t) {
				f.quota = live
			}
			return f, err
		})
	default:
		writes = append(writes, r.removeChild(s, "ResourceQuota", ns, quotaName, &corev1.ResourceQuota{}))
	}
	if len(t.Spec.LimitRange.Limits) > 0 {
		writes = append(writes, func(ctx context.Context) (found, error) {
			return ensureChild(ctx, r, s, "LimitRange", &corev1.LimitRange{}, desiredLimitRange(t, ns), syncLimitRange, expect)
		})
	} else {
		writes = append(writes, r.removeChild(s, "LimitRange", ns, limitRangeName, &corev1.LimitRange{}))
	}
	if t.Spec.NetworkIsolation != nil {
		writes = append(writes, func(ctx context.Context) (found, error) {
			return ensureChild(ctx, r, s, "NetworkPolicy", &networkingv1.NetworkPolicy{}, desiredNetworkPolicy(t, ns), syncNetworkPolicy, expect)
		})
	} else {
		writes = append(writes, r.removeChild(s, "NetworkPolicy", ns, networkPolicyName, &networkingv1.NetworkPolicy{}))
	}
	return append(writes, copies...)
}

// reconcileTenantRole keeps the per-tenant ClusterRole, naming the
// tenant's namespaces (those the first step found ready) and recording
// their UIDs (claim), then its binding to the admins and viewers: in that
// order, because the API server checks, when a binding is created, that
// its role exists and grants nothing the manager does not hold.
func (r *Reconciler) reconcileTenantRole(ctx context.Context, s *scope, namespaces []string) (found, error) {
	expect := s.t.Status.ObservedGeneration > 0
	uids := make([]types.UID, 0, len(namespaces))
	for _, ns := range namespaces {
		if uid := s.obs.uids[ns]; uid != "" {
			uids = append(uids, uid)
		}
	}
	waiting, err := r.waitingNamespaces(ctx, s.t)
	if err != nil {
		return found{}, err
	}
	role, err := ensureChild(ctx, r, s, "ClusterRole", &rbacv1.ClusterRole{}, desiredTenantRole(s.t, namespaces, uids),
		syncTenantRole(waiting), expect)
	if err != nil || role.raced != nil {
		return role, err
	}
	binding, err := ensureChild(ctx, r, s, "ClusterRoleBinding", &rbacv1.ClusterRoleBinding{}, desiredTenantRoleBinding(s.t),
		syncClusterRoleBinding, expect)
	return role.then(binding), err
}

// waitingNamespaces are the UIDs of the namespaces labelled with the
// tenant's name that it does not hold (from the cache): those an earlier
// Tenant of the name left, which the ClusterRole keeps recording until
// this one takes them back. Any other is recorded by no one.
func (r *Reconciler) waitingNamespaces(ctx context.Context, t *tenancyv1.Tenant) ([]types.UID, error) {
	list := &corev1.NamespaceList{}
	if err := r.client.List(ctx, list, client.MatchingFields{namespaceTenantIndex: t.Name}); err != nil {
		return nil, fmt.Errorf("listing the namespaces labelled for Tenant %s: %w", t.Name, err)
	}
	var out []types.UID
	for _, ns := range list.Items {
		if !isMarkedBy(ns.Annotations, t) {
			out = append(out, ns.UID)
		}
	}
	return out, nil
}

// ensureChild creates or syncs one object of the tenant, in one of its
// namespaces or cluster-wide, and classifies what stops it where it
// happens: an object of someone else's with the name (a conflict), a
// guardrail the API server refuses to store (the spec must change), a write
// that lost a race (retried at once); any other error is a failure.
func ensureChild[T client.Object](ctx context.Context, r *Reconciler, s *scope, kind string, live, desired T,
	syncFn func(live, desired T, t *tenancyv1.Tenant) bool, expect bool) (found, error) {
	return ensureChildWith(ctx, r, r.children, s, kind, live, desired, syncFn, expect)
}

// ensureChildWith is ensureChild reading through clients: a copy is read
// around the cache, and is the tenant's only if it says it is a copy.
func ensureChildWith[T client.Object](ctx context.Context, r *Reconciler, clients children.Clients, s *scope, kind string, live, desired T,
	syncFn func(live, desired T, t *tenancyv1.Tenant) bool, expect bool) (found, error) {
	_, err := children.CreateOrSync(ctx, clients, children.Child[T]{
		Kind: kind, Live: live, Desired: desired,
		Owns: func(l T) (bool, error) {
			if want, ok := roleRefOf(desired); ok {
				if got, _ := roleRefOf(l); got != want {
					return false, nil
				}
			}
			if _, copied := desired.GetAnnotations()[CopyOfAnnotation]; copied {
				return r.ownsCopy(ctx, l, s.t)
			}
			return r.ownsChild(ctx, l, s.t)
		},
		Sync:         func(l T) bool { return syncFn(l, desired, s.t) },
		ExpectExists: expect,
	})
	ns := desired.GetNamespace()
	f := found{namespace: ns}
	where := desired.GetName()
	if ns != "" {
		where = ns + "/" + where
	}
	switch {
	case err == nil:
	case children.IsNotOwned(err):
		f.conflict = fmt.Sprintf("%s %s exists and was not created by this Tenant; it is left untouched", kind, where)
	case apierr.Classify(err) == apierr.Refused:
		f.refused = []string{fmt.Sprintf("the API server refused %s %s: %s", kind, where, apierr.Message(err))}
	case apierr.Classify(err) == apierr.Conflict:
		f.raced = err
	default:
		return f, err
	}
	return f, nil
}

// removeChild is the write that removes a child the spec no longer asks
// for (deleteChild).
func (r *Reconciler) removeChild(s *scope, kind, ns, name string, obj client.Object) write {
	return func(ctx context.Context) (found, error) {
		return found{namespace: ns}, r.deleteChild(ctx, s, kind, ns, name, obj)
	}
}

// deleteChild deletes a child of the tenant if it is ours. One that is
// gone, or changed since the cache saw it (the delete lost a race), is left
// to the next reconcile.
func (r *Reconciler) deleteChild(ctx context.Context, s *scope, kind, ns, name string, obj client.Object) error {
	obj.SetNamespace(ns)
	obj.SetName(name)
	deleted, err := children.DeleteOwned(ctx, r.children, kind, obj, func(o client.Object) (bool, error) { return r.ownsChild(ctx, o, s.t) })
	if deleted {
		log.FromContext(ctx).Info("removed what the spec no longer asks for", "kind", kind, "namespace", ns, "name", name)
	}
	return err
}

// ownsChild reports whether an object in one of the tenant's namespaces (or
// a cluster-wide RBAC object named after it) is the tenant's: marked
// managed-by Trellis and labelled with the tenant's name, or, in a namespace
// that is now this tenant's, with another Tenant's name: what Trellis kept
// there for a Tenant that released the namespace (that Tenant may still
// exist: the namespace merely left its spec) or that no longer exists. Such
// leftovers are rewritten to this tenant's spec: they must not keep granting
// anything, and a hand-over must not stall on them. A cluster-wide object
// labelled for another Tenant that still exists is that Tenant's.
func (r *Reconciler) ownsChild(ctx context.Context, obj metav1.Object, t *tenancyv1.Tenant) (bool, error) {
	labels := obj.GetLabels()
	if labels[setup.ManagedByLabel] != setup.ManagedByValue {
		return false, nil
	}
	switch owner := labels[TenantLabel]; {
	case owner == t.Name:
		return true, nil
	case owner == "":
		return false, nil
	case obj.GetNamespace() != "":
		return true, nil
	default:
		exists, err := r.tenantExists(ctx, owner)
		return !exists, err
	}
}

// tenantExists reports whether a Tenant of that name exists (the cache; a
// read that fails is an error).
func (r *Reconciler) tenantExists(ctx context.Context, name string) (bool, error) {
	err := r.client.Get(ctx, client.ObjectKey{Name: name}, &tenancyv1.Tenant{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("looking up Tenant %s: %w", name, err)
	}
	return true, nil
}

// roleRefOf is the immutable role a binding grants; a live binding that
// grants another one is not ours to fix.
func roleRefOf(obj client.Object) (rbacv1.RoleRef, bool) {
	switch b := obj.(type) {
	case *rbacv1.RoleBinding:
		return b.RoleRef, true
	case *rbacv1.ClusterRoleBinding:
		return b.RoleRef, true
	}
	return rbacv1.RoleRef{}, false
}

// ownsQuota: the quota the sum may count is one carrying this tenant's marks.
func ownsQuota(q *corev1.ResourceQuota, t *tenancyv1.Tenant) bool {
	return q.Labels[TenantLabel] == t.Name
}
