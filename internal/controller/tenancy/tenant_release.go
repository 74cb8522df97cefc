// Giving namespaces up: a namespace that left the spec (a write of the
// second step, tenant_children.go), and every namespace of a Tenant being
// deleted (unless its CRD is going away, when nothing is touched).

package tenancy

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/controller/finalizer"
)

// droppedNamespaces lists our namespaces that left the spec and are granted
// to no request (the request was deleted, or its own namespace left the
// tenant), from the cache.
func (r *Reconciler) droppedNamespaces(ctx context.Context, s *scope) ([]corev1.Namespace, error) {
	owned, err := r.ownedNamespaces(ctx, s.t)
	if err != nil {
		return nil, err
	}
	desired := s.names
	return slices.DeleteFunc(owned, func(ns corev1.Namespace) bool { return slices.Contains(desired, ns.Name) }), nil
}

// ownedNamespaces lists the namespaces carrying t's marks, from the cache.
func (r *Reconciler) ownedNamespaces(ctx context.Context, t *tenancyv1.Tenant) ([]corev1.Namespace, error) {
	list := &corev1.NamespaceList{}
	if err := r.client.List(ctx, list, client.MatchingFields{namespaceTenantIndex: t.Name}); err != nil {
		return nil, err
	}
	owned := list.Items[:0]
	for _, ns := range list.Items {
		if isMarkedBy(ns.Annotations, t) {
			owned = append(owned, ns)
		}
	}
	return owned, nil
}

// release gives up one of our namespaces. Delete deletes it (only if its UID
// is still the one we saw). Retain keeps it and everything the team put in
// it, and follows one rule: releasing never loosens anything. What gave the
// tenant access goes: the admin and viewer RoleBindings, the marks (a
// namespace labelled with the tenant is admitted by the tenant's isolation
// policies) and the tenant's namespaceMetadata. What restricts the namespace
// stays, until a cluster admin removes it: the Pod Security labels, the
// quota, the limit range and the network policy (which still admits only
// the tenant's namespaces and those its spec listed). A team credential left
// behind (a ServiceAccount bound by the team's own RoleBinding) must not be
// able to run what the Tenant forbade; the label released-from=<tenant> keeps
// the admission policy protecting what stayed.
//
// A namespace whose name no Tenant may hold is never touched: marks on it
// were not written by Trellis, and must not make Trellis delete it.
func (r *Reconciler) release(ctx context.Context, s *scope, ns *corev1.Namespace, policy tenancyv1.NamespaceDeletionPolicy) (found, error) {
	t := s.t
	f := found{namespace: ns.Name}
	if !ns.DeletionTimestamp.IsZero() {
		return f, nil
	}
	if why := r.protection.Protected(ns.Name); why != "" {
		log.FromContext(ctx).Info("not releasing a namespace no Tenant may hold, whatever its marks say",
			"namespace", ns.Name, "why", why)
		return f, nil
	}
	if policy == tenancyv1.NamespaceDelete {
		err := r.client.Delete(ctx, ns, client.Preconditions{UID: &ns.UID})
		switch {
		case apierrors.IsConflict(err):
			// Not the namespace we saw any more (its UID differs).
			f.raced = err
			return f, nil
		case client.IgnoreNotFound(err) != nil:
			return f, fmt.Errorf("deleting namespace %s: %w", ns.Name, err)
		}
		namespacesRemoved.WithLabelValues(t.Name).Inc()
		log.FromContext(ctx).Info("namespace deleted", "namespace", ns.Name, "policy", policy)
		r.recorder.Eventf(t, ns, corev1.EventTypeNormal, "NamespaceDeleted", "Release", "deleted namespace %s (namespaceDeletionPolicy: Delete)", ns.Name)
		return f, nil
	}

	for _, binding := range []string{adminRoleBindingName, viewerRoleBindingName} {
		if err := r.deleteChild(ctx, s, "RoleBinding", ns.Name, binding, &rbacv1.RoleBinding{}); err != nil {
			return f, err
		}
	}
	// Copies are the tenant's things: they go too, but for the inline
	// NetworkPolicies and LimitRanges, which are restrictions.
	if err := r.removeCopies(ctx, s, ns.Name); err != nil {
		return f, err
	}
	before := ns.DeepCopy()
	if releaseNamespace(ns, t) {
		if err := r.client.Patch(ctx, ns, client.MergeFrom(before)); client.IgnoreNotFound(err) != nil {
			return f, fmt.Errorf("releasing namespace %s: %w", ns.Name, err)
		}
	}
	namespacesRemoved.WithLabelValues(t.Name).Inc()
	log.FromContext(ctx).Info("namespace released", "namespace", ns.Name, "policy", policy)
	r.recorder.Eventf(t, ns, corev1.EventTypeNormal, "NamespaceReleased", "Release",
		"namespace %s kept with its contents and its restrictions (Pod Security labels, quota, limit range, network policy); "+
			"the tenant's bindings, labels and marks were removed", ns.Name)
	return f, nil
}

// finalize applies the deletion policy to every namespace of a Tenant being
// deleted, removes its cluster-wide RBAC objects, then lets it go. If the
// Tenant CRD itself is being deleted (an uninstall, or a reinstall), nothing
// is touched: namespaces, bindings, guardrails and marks all stay, so the
// team keeps working and the same Tenant applied again finds them.
func (r *Reconciler) finalize(ctx context.Context, t *tenancyv1.Tenant) error {
	if !controllerutil.ContainsFinalizer(t, Finalizer) {
		return nil
	}
	going, err := r.crdGoing(ctx, tenantCRDName)
	if err != nil {
		return err
	}
	if going {
		log.FromContext(ctx).Info("the Tenant CRD is being deleted: keeping the namespaces, bindings and guardrails as they are")
	} else if err := r.releaseAll(ctx, t); err != nil {
		return err
	}
	if err := finalizer.Remove(ctx, r.client, t, Finalizer); err != nil {
		return err
	}
	forgetMetrics(t.Name)
	return nil
}

// crdGoing reports whether the CRD named is being deleted, or gone: its
// objects are then disappearing without anyone having asked for that.
func (r *Reconciler) crdGoing(ctx context.Context, name string) (bool, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := r.apiReader.Get(ctx, client.ObjectKey{Name: name}, crd)
	if err != nil && !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("checking whether the CRD %s is being deleted: %w", name, err)
	}
	return apierrors.IsNotFound(err) || !crd.DeletionTimestamp.IsZero(), nil
}

// releaseAll applies the policy to every namespace the Tenant holds and
// deletes its ClusterRole and ClusterRoleBinding, in one round. A write
// that lost a race is an error here: the Tenant keeps its finalizer until
// the retry succeeds.
func (r *Reconciler) releaseAll(ctx context.Context, t *tenancyv1.Tenant) error {
	s := r.newScope(t)
	owned, err := r.ownedNamespaces(ctx, t)
	if err != nil {
		return err
	}
	writes := make([]write, 0, len(owned)+2)
	for i := range owned {
		writes = append(writes, func(ctx context.Context) (found, error) {
			return r.release(ctx, s, &owned[i], t.Spec.NamespaceDeletionPolicy)
		})
	}
	writes = append(writes,
		r.removeChild(s, "ClusterRoleBinding", "", tenantRoleName(t), &rbacv1.ClusterRoleBinding{}),
		r.removeChild(s, "ClusterRole", "", tenantRoleName(t), &rbacv1.ClusterRole{}))
	if err := s.runRound(ctx, writes); err != nil {
		return err
	}
	return s.raced
}
