// The first step of a Tenant's reconcile: its namespaces, whose they are,
// and their labels and annotations.

package tenancy

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/controller/apierr"
	"github.com/trellis-dev/trellis/internal/controller/children"
	"github.com/trellis-dev/trellis/internal/controller/setup"
)

// reconcileNamespaces creates or takes every namespace of the tenant (the
// spec's and those granted to requests), all in
// one round, and records each one's state: the next step fills those that
// are the tenant's and ready.
func (r *Reconciler) reconcileNamespaces(ctx context.Context, s *scope) error {
	names := s.names
	writes := make([]write, 0, len(names))
	for _, name := range names {
		writes = append(writes, func(ctx context.Context) (found, error) { return r.reconcileNamespace(ctx, s, name) })
	}
	return s.runRound(ctx, writes)
}

// reconcileNamespace creates or takes one namespace of the spec, keeps its
// labels and annotations, and finds its state: Ready when it is the
// tenant's and ready to hold what the tenant puts there. It never touches a
// namespace that is not the Tenant's. A namespace granted to a request is
// made, or marked for it, only once the request records it (recordGrant);
// a cache miss is confirmed first: a name someone else holds records no
// grant.
func (r *Reconciler) reconcileNamespace(ctx context.Context, s *scope, name string) (found, error) {
	t := s.t
	f := found{namespace: name}
	if why := r.protection.Protected(name); why != "" {
		f.state, f.message, f.held = tenancyv1.NamespaceProtected, "refused: "+why, holdNo
		return f, nil
	}
	requestedBy := s.sel.requestedBy[name]
	live := &corev1.Namespace{}
	claim := claimForeign
	enforced := "" // the Pod Security level the write found
	ch := children.Child[*corev1.Namespace]{
		Kind: "Namespace", Live: live, Desired: desiredNamespace(t, name, requestedBy),
		Owns: func(ns *corev1.Namespace) (bool, error) {
			var err error
			claim, err = r.claim(ctx, ns, t)
			return claim != claimForeign, err
		},
		Sync: func(ns *corev1.Namespace) bool {
			enforced = ns.Labels[podSecurityEnforceLabel]
			return ns.DeletionTimestamp.IsZero() && syncNamespace(ns, t, requestedBy)
		},
		ExpectExists: s.wasReady[name],
	}
	if requestedBy.key != "" {
		ch.ExpectExists = true
		ch.BeforeCreate = func(ctx context.Context) error { return r.recordGrant(ctx, s, name, requestedBy) }
		if s.request(requestedBy) != nil { // else kept for a request that is gone: as it is, never made again
			ch.BeforeUpdate = ch.BeforeCreate
		}
	}
	outcome, err := children.CreateOrSync(ctx, r.children, ch)
	switch {
	case children.IsNotOwned(err):
		msg, err := r.conflictMessage(ctx, live, t)
		if err != nil {
			return f, err
		}
		f.state, f.message, f.held = tenancyv1.NamespaceConflict, msg, holdNo
		return f, nil
	case errors.Is(err, errRequestGone):
		// Nothing made: the reconcile runs again, and decides without it.
		f.raced = err
		return f, nil
	case apierr.Classify(err) == apierr.Conflict:
		f.raced = err
		return f, nil
	case apierr.Classify(err) == apierr.Refused:
		// Invalid, or forbidden by an admission policy or a quota: only a
		// person can change that, as for a refused guardrail.
		f.refused = []string{fmt.Sprintf("the API server refused Namespace %s: %s", name, apierr.Message(err))}
		if live.UID == "" { // the create was refused: nothing made
			f.held = holdNo
		}
		return f, nil
	case err != nil:
		return f, err
	case !live.DeletionTimestamp.IsZero():
		f.state, f.message, f.held = tenancyv1.NamespaceTerminating, "being deleted; it will be created again once it is gone", holdNo
		return f, nil
	}
	logger := log.FromContext(ctx)
	switch {
	case outcome == children.Created:
		namespacesAdded.WithLabelValues(t.Name).Inc()
		logger.Info("namespace created", "namespace", name)
	case claim == claimReclaim:
		logger.Info("namespace reclaimed: held for a Tenant of this name that no longer exists", "namespace", name)
		r.recorder.Eventf(t, live, corev1.EventTypeNormal, "NamespaceReclaimed", "Reconcile",
			"namespace %s was held by Trellis for a Tenant of this name that no longer exists; it is this Tenant's again", name)
	case claim == claimHandOver:
		logger.Info("namespace handed over by annotation", "namespace", name)
		r.recorder.Eventf(t, live, corev1.EventTypeNormal, "NamespaceHandedOver", "Reconcile",
			"namespace %s was handed over to this Tenant with the annotation %s", name, HandOverAnnotation)
	}
	f.state, f.held, f.level, f.uid = tenancyv1.NamespaceReady, holdYes, levelWritten(outcome, enforced, live), live.UID
	if holding := s.waiting[name]; len(holding) > 0 {
		f.message = waitingMessage(requestedBy.key, holding)
	}
	return f, nil
}

// namespaceClaim is why a namespace is (or is not) the Tenant's.
type namespaceClaim int

const (
	claimForeign namespaceClaim = iota
	// claimOurs: marked with this Tenant's UID.
	claimOurs
	// claimReclaim: Trellis held it for a Tenant object of this name that
	// no longer exists (the Tenant was re-created, e.g. after its CRD was
	// deleted and installed again), as that Tenant's ClusterRole records.
	claimReclaim
	// claimHandOver: a cluster admin annotated it with this Tenant's name,
	// and no existing Tenant holds it.
	claimHandOver
)

// claim decides whose namespace ns is. It never takes a namespace marked by
// a Tenant that still exists, whatever its labels or annotations say, nor
// one on its labels alone: whoever creates a namespace writes its labels
// and annotations, marks included, and the namespace's UID is the one thing
// of it no one chooses.
func (r *Reconciler) claim(ctx context.Context, ns *corev1.Namespace, t *tenancyv1.Tenant) (namespaceClaim, error) {
	if isMarkedBy(ns.Annotations, t) {
		return claimOurs, nil
	}
	held, err := r.holder(ctx, ns.Annotations[TenantUIDAnnotation])
	if err != nil || held != "" {
		return claimForeign, err
	}
	if ns.Labels[TenantLabel] == t.Name {
		recorded, err := r.recordedFor(ctx, t, ns.UID)
		switch {
		case err != nil:
			return claimForeign, err
		case recorded:
			return claimReclaim, nil
		}
	}
	if ns.Annotations[HandOverAnnotation] == t.Name {
		return claimHandOver, nil
	}
	return claimForeign, nil
}

// recordedFor reports whether the ClusterRole of the Tenant's name records
// the namespace UID among those Trellis held for it. A role that is not
// Trellis' records nothing; a cache that cannot answer is an error.
func (r *Reconciler) recordedFor(ctx context.Context, t *tenancyv1.Tenant, uid types.UID) (bool, error) {
	role := &rbacv1.ClusterRole{}
	err := r.client.Get(ctx, client.ObjectKey{Name: tenantRoleName(t)}, role)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading ClusterRole %s: %w", tenantRoleName(t), err)
	case role.Labels[setup.ManagedByLabel] != setup.ManagedByValue || role.Labels[TenantLabel] != t.Name:
		return false, nil
	}
	return slices.Contains(recordedUIDs(role), uid), nil
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

func (r *Reconciler) conflictMessage(ctx context.Context, ns *corev1.Namespace, t *tenancyv1.Tenant) (string, error) {
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
	if ns.Labels[TenantLabel] == t.Name {
		return fmt.Sprintf("namespace %s is labelled %s=%s, but Trellis did not make it for a Tenant of this name, or has no record "+
			"of it (a label is not a claim: whoever creates a namespace writes its labels); it is left untouched "+
			"(a cluster admin can hand it over with the annotation %s=%s)", ns.Name, TenantLabel, t.Name, HandOverAnnotation, t.Name), nil
	}
	return fmt.Sprintf("namespace %s already exists and was not created by this Tenant; it is left untouched "+
		"(a cluster admin can hand it over with the annotation %s=<tenant>)", ns.Name, HandOverAnnotation), nil
}
