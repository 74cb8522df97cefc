// The sub-reconcilers of a Tenant: its namespaces (whose they are, and what
// each holds), the per-tenant ClusterRole and binding, and the check of its
// ServiceAccount subjects.

package tenancy

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/apierr"
	"github.com/trellis-dev/trellis/internal/controller/children"
	"github.com/trellis-dev/trellis/internal/controller/setup"
)

// reconcileTenant brings the tenant's objects to the desired state in two
// rounds, each in parallel: first its namespaces; then what each namespace
// holds, beside the release of the namespaces the spec dropped and the
// per-tenant ClusterRole and its binding (the role names the namespaces of
// the first round). A new Tenant thus waits on four round trips to the API
// server: namespaces, bindings and role, role binding, status.
func (r *Reconciler) reconcileTenant(ctx context.Context, s *scope) error {
	names := namespaceNames(s.t)
	ready := make([]bool, len(names))
	var first group
	for i, name := range names {
		first.Go(func() (err error) {
			ready[i], err = r.reconcileNamespace(ctx, s, name)
			return err
		})
	}
	if err := first.Wait(); err != nil {
		return err
	}
	var second group
	var theirs []string
	for i, name := range names {
		if ready[i] {
			theirs = append(theirs, name)
			second.Go(func() error { return r.reconcileNamespaceChildren(ctx, s, name) })
		}
	}
	second.Go(func() error {
		if err := r.releaseDropped(ctx, s); err != nil {
			return err
		}
		return r.reconcileTenantRole(ctx, s, theirs)
	})
	return second.Wait()
}

// namespaceClaim is why a namespace is (or is not) the Tenant's.
type namespaceClaim int

const (
	claimForeign namespaceClaim = iota
	// claimOurs: marked with this Tenant's UID.
	claimOurs
	// claimReclaim: marked with this Tenant's name by a Tenant object that no
	// longer exists (the Tenant was re-created, e.g. after its CRD was
	// deleted and installed again).
	claimReclaim
	// claimHandOver: a cluster admin annotated it with this Tenant's name,
	// and no existing Tenant holds it.
	claimHandOver
)

// claim decides whose namespace ns is. It never takes a namespace marked by
// a Tenant that still exists, whatever its labels or annotations say.
func (r *Reconciler) claim(ctx context.Context, ns *corev1.Namespace, t *tenancyv1.Tenant) (namespaceClaim, error) {
	if isMarkedBy(ns.Annotations, t) {
		return claimOurs, nil
	}
	held, err := r.holder(ctx, ns.Annotations[TenantUIDAnnotation])
	switch {
	case err != nil || held != "":
		return claimForeign, err
	case ns.Labels[TenantLabel] == t.Name:
		return claimReclaim, nil
	case ns.Annotations[HandOverAnnotation] == t.Name:
		return claimHandOver, nil
	}
	return claimForeign, nil
}

// holder names the Tenant whose UID this is, if it exists. A cache that
// cannot answer is an error: a namespace is never taken on a guess, nor
// reported as someone else's.
func (r *Reconciler) holder(ctx context.Context, uid string) (string, error) {
	if uid == "" {
		return "", nil
	}
	list := &tenancyv1.TenantList{}
	if err := r.client.List(ctx, list, client.MatchingFields{tenantUIDIndex: uid}); err != nil {
		return "", fmt.Errorf("looking up the Tenant holding a namespace: %w", err)
	}
	if len(list.Items) == 0 {
		return "", nil
	}
	return list.Items[0].Name, nil
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

// reconcileNamespace creates or takes one namespace of the spec, keeps its
// labels and annotations, records its state, and reports whether it is the
// tenant's and ready to hold what the tenant puts there. It never touches a
// namespace that is not the Tenant's.
func (r *Reconciler) reconcileNamespace(ctx context.Context, s *scope, name string) (bool, error) {
	t := s.t
	if why := r.protection.Protected(name); why != "" {
		s.obs.set(name, tenancyv1.NamespaceProtected, "refused: "+why)
		return false, nil
	}
	live := &corev1.Namespace{}
	claim := claimForeign
	var outcome children.Outcome
	err := s.do(func() (err error) {
		outcome, err = children.CreateOrSync(ctx, r.children, children.Child[*corev1.Namespace]{
			Kind: "Namespace", Live: live, Desired: desiredNamespace(t, name),
			Owns: func(ns *corev1.Namespace) (bool, error) {
				var err error
				claim, err = r.claim(ctx, ns, t)
				return claim != claimForeign, err
			},
			Sync: func(ns *corev1.Namespace) bool {
				return ns.DeletionTimestamp.IsZero() && syncNamespace(ns, t)
			},
			ExpectExists: s.wasReady[name],
		})
		return err
	})
	switch {
	case children.IsNotOwned(err):
		msg, err := r.conflictMessage(ctx, live)
		if err != nil {
			return false, err
		}
		s.obs.set(name, tenancyv1.NamespaceConflict, msg)
		return false, nil
	case err != nil:
		return false, err
	case !live.DeletionTimestamp.IsZero():
		s.obs.set(name, tenancyv1.NamespaceTerminating, "being deleted; it will be created again once it is gone")
		return false, nil
	}
	logger := log.FromContext(ctx)
	switch {
	case outcome == children.Created:
		namespacesAdded.WithLabelValues(t.Name).Inc()
		logger.Info("namespace created", "namespace", name)
	case claim == claimReclaim:
		logger.Info("namespace reclaimed: marked with this Tenant's name by a Tenant that no longer exists", "namespace", name)
		r.recorder.Eventf(t, live, corev1.EventTypeNormal, "NamespaceReclaimed", "Reconcile",
			"namespace %s was marked with this Tenant's name by a Tenant that no longer exists; it is this Tenant's again", name)
	case claim == claimHandOver:
		logger.Info("namespace handed over by annotation", "namespace", name)
		r.recorder.Eventf(t, live, corev1.EventTypeNormal, "NamespaceHandedOver", "Reconcile",
			"namespace %s was handed over to this Tenant with the annotation %s", name, HandOverAnnotation)
	}
	s.obs.set(name, tenancyv1.NamespaceReady, "")
	return true, nil
}

func (r *Reconciler) conflictMessage(ctx context.Context, ns *corev1.Namespace) (string, error) {
	other, err := r.holder(ctx, ns.Annotations[TenantUIDAnnotation])
	if err != nil {
		return "", err
	}
	if other != "" {
		return fmt.Sprintf("namespace %s belongs to Tenant %q; it is left untouched", ns.Name, other), nil
	}
	if from := ns.Labels[ReleasedFromLabel]; from != "" {
		return fmt.Sprintf("namespace %s was released by Tenant %q; it is left untouched "+
			"(a cluster admin can hand it over with the annotation %s=<tenant>)", ns.Name, from, HandOverAnnotation), nil
	}
	return fmt.Sprintf("namespace %s already exists and was not created by this Tenant; it is left untouched "+
		"(a cluster admin can hand it over with the annotation %s=<tenant>)", ns.Name, HandOverAnnotation), nil
}

// reconcileNamespaceChildren keeps, in one of the tenant's namespaces, the
// admin and viewer RoleBindings and the guardrails the spec asks for, and
// removes those it no longer asks for; all in parallel. Then, with network
// isolation, it looks for the team's policies that undo it (in the cache).
func (r *Reconciler) reconcileNamespaceChildren(ctx context.Context, s *scope, ns string) error {
	t := s.t
	expect := s.wasReady[ns] && s.settled
	var g group
	g.Go(func() error {
		return ensureChild(ctx, r, s, ns, "RoleBinding", &rbacv1.RoleBinding{},
			desiredRoleBinding(t, ns, adminRoleBindingName, builtinAdminRole, adminSubjects(t)), syncRoleBinding, expect)
	})
	if viewers := viewerSubjects(t); len(viewers) > 0 {
		g.Go(func() error {
			return ensureChild(ctx, r, s, ns, "RoleBinding", &rbacv1.RoleBinding{},
				desiredRoleBinding(t, ns, viewerRoleBindingName, builtinViewRole, viewers), syncRoleBinding, expect)
		})
	} else {
		g.Go(func() error {
			return deleteChild(ctx, r, s, "RoleBinding", ns, viewerRoleBindingName, &rbacv1.RoleBinding{})
		})
	}
	if len(t.Spec.Quota.Hard) > 0 {
		g.Go(func() error {
			live := &corev1.ResourceQuota{}
			if err := ensureChild(ctx, r, s, ns, "ResourceQuota", live, desiredQuota(t, ns), syncQuota, expect); err != nil {
				return err
			}
			if live.Name != "" && ownsQuota(live, t) {
				s.obs.addQuota(t.Spec.Quota.Hard, live.Status.Used)
			}
			return nil
		})
	} else {
		g.Go(func() error { return deleteChild(ctx, r, s, "ResourceQuota", ns, quotaName, &corev1.ResourceQuota{}) })
	}
	if len(t.Spec.LimitRange.Limits) > 0 {
		g.Go(func() error {
			return ensureChild(ctx, r, s, ns, "LimitRange", &corev1.LimitRange{}, desiredLimitRange(t, ns), syncLimitRange, expect)
		})
	} else {
		g.Go(func() error { return deleteChild(ctx, r, s, "LimitRange", ns, limitRangeName, &corev1.LimitRange{}) })
	}
	if t.Spec.NetworkIsolation != nil {
		g.Go(func() error {
			return ensureChild(ctx, r, s, ns, "NetworkPolicy", &networkingv1.NetworkPolicy{}, desiredNetworkPolicy(t, ns), syncNetworkPolicy, expect)
		})
	} else {
		g.Go(func() error {
			return deleteChild(ctx, r, s, "NetworkPolicy", ns, networkPolicyName, &networkingv1.NetworkPolicy{})
		})
	}
	if err := g.Wait(); err != nil || t.Spec.NetworkIsolation == nil {
		return err
	}
	return r.checkIsolation(ctx, s, ns)
}

// ownsQuota: the quota the sum may count is one carrying this tenant's marks.
func ownsQuota(q *corev1.ResourceQuota, t *tenancyv1.Tenant) bool {
	return q.Labels[TenantLabel] == t.Name
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

// ensureChild creates or syncs one object in a tenant namespace, and records
// what stops it: an object of someone else's with the name (a conflict), or
// a guardrail the API server refuses to store (the spec must change).
func ensureChild[T client.Object](ctx context.Context, r *Reconciler, s *scope, ns, kind string, live, desired T,
	syncFn func(live, desired T, t *tenancyv1.Tenant) bool, expect bool) error {
	err := s.do(func() error {
		_, err := children.CreateOrSync(ctx, r.children, children.Child[T]{
			Kind: kind, Live: live, Desired: desired,
			Owns: func(l T) (bool, error) {
				if want, ok := roleRefOf(desired); ok {
					if got, _ := roleRefOf(l); got != want {
						return false, nil
					}
				}
				return r.ownsChild(ctx, l, s.t)
			},
			Sync:         func(l T) bool { return syncFn(l, desired, s.t) },
			ExpectExists: expect,
		})
		return err
	})
	where := desired.GetName()
	if ns != "" {
		where = ns + "/" + where
	}
	switch {
	case children.IsNotOwned(err):
		msg := fmt.Sprintf("%s %s exists and was not created by this Tenant; it is left untouched", kind, where)
		if ns == "" {
			s.obs.mu.Lock()
			s.obs.rbacConflict = msg
			s.obs.mu.Unlock()
		} else {
			s.obs.conflict(ns, msg)
		}
		return nil
	case apierr.Classify(err) == apierr.Refused:
		s.obs.refuse(fmt.Sprintf("the API server refused %s %s: %s", kind, where, apiMessage(err)))
		return nil
	}
	return err
}

// apiMessage is the API server's own words for a refusal.
func apiMessage(err error) string {
	var refusal apierrors.APIStatus
	if errors.As(err, &refusal) {
		return refusal.Status().Message
	}
	return err.Error()
}

// deleteChild removes a child the spec no longer asks for, if it is ours.
func deleteChild[T client.Object](ctx context.Context, r *Reconciler, s *scope, kind, ns, name string, obj T) error {
	obj.SetNamespace(ns)
	obj.SetName(name)
	return s.do(func() error {
		deleted, err := children.DeleteOwned(ctx, r.children, kind, obj, func(o T) (bool, error) { return r.ownsChild(ctx, o, s.t) })
		if deleted {
			log.FromContext(ctx).Info("removed what the spec no longer asks for", "kind", kind, "namespace", ns, "name", name)
		}
		return err
	})
}

// reconcileTenantRole keeps the per-tenant ClusterRole, naming the
// tenant's namespaces (those the first round found ready), then its binding
// to the admins and viewers: in that order, because the API server checks,
// when a binding is created, that its role exists and grants nothing the
// manager does not hold.
func (r *Reconciler) reconcileTenantRole(ctx context.Context, s *scope, namespaces []string) error {
	expect := s.t.Status.ObservedGeneration > 0
	role := desiredTenantRole(s.t, namespaces)
	if err := ensureChild(ctx, r, s, "", "ClusterRole", &rbacv1.ClusterRole{}, role, syncClusterRole, expect); err != nil {
		return err
	}
	return ensureChild(ctx, r, s, "", "ClusterRoleBinding", &rbacv1.ClusterRoleBinding{}, desiredTenantRoleBinding(s.t),
		syncClusterRoleBinding, expect)
}

// checkSubjects looks for the namespaces of ServiceAccount admins and
// viewers outside the tenant's own namespaces. Only for a spec not checked
// yet, or while one was missing: an unchanged Tenant costs no read.
func (r *Reconciler) checkSubjects(ctx context.Context, s *scope) error {
	t := s.t
	if c := conditions.Get(t.Status.Conditions, ConditionSubjectsFound); c != nil &&
		c.Status == metav1.ConditionTrue && c.ObservedGeneration == t.Generation {
		return nil
	}
	own := namespaceNames(t)
	seen := map[string]bool{}
	var missing []string
	for _, sub := range append(admins(t), t.Spec.Viewers...) {
		if sub.Kind != rbacv1.ServiceAccountKind || slices.Contains(own, sub.Namespace) {
			continue
		}
		id := "ServiceAccount " + sub.Namespace + "/" + sub.Name
		if seen[id] {
			continue
		}
		seen[id] = true
		exists, err := children.Lookup(ctx, r.children, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sub.Namespace}})
		if err != nil {
			return err
		}
		if !exists {
			missing = append(missing, id)
		}
	}
	s.obs.mu.Lock()
	s.obs.subjectsChecked, s.obs.missingSubjects = true, missing
	s.obs.mu.Unlock()
	return nil
}
