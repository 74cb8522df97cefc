// Package tenancy reconciles Tenants: a team's namespaces, the RoleBinding that
// makes its admin an admin there, and a ClusterRole that lets the admin read
// its own Tenant and namespaces.
package tenancy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/children"
	"github.com/trellis-dev/trellis/internal/controller/finalizer"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/controller/status"
)

const (
	// ControllerName names the controller in flags, logs, metrics and Events.
	ControllerName = "tenant"
	// Finalizer holds a Tenant until its namespaces are released or deleted
	// as its policy says.
	Finalizer = "tenancy.trellis.dev/namespaces"
	// tenantCRDName is checked on deletion: when the CRD itself is going away,
	// namespaces are kept whatever the policy says.
	tenantCRDName = "tenants.tenancy.trellis.dev"

	// namespaceTenantIndex finds a tenant's namespaces in the cache.
	namespaceTenantIndex = "metadata.labels.tenant"
)

// Controller registers the Tenant controller with the manager.
var Controller = setup.Controller{
	Name:  ControllerName,
	Owned: []client.Object{&corev1.Namespace{}, &rbacv1.RoleBinding{}, &rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{}},
	Setup: func(ctx context.Context, mgr ctrl.Manager, opts setup.Options) error {
		extra, err := CompileProtectedPattern(opts.TenantProtectedNamespaces)
		if err != nil {
			return err
		}
		r := NewReconciler(mgr, opts, Protection{ManagerNamespace: opts.Namespace, Extra: extra})
		return r.SetupWithManager(ctx, mgr, opts)
	},
}

// statusEvents: a tenant that became Ready, and one that needs a person.
var statusEvents = []status.EventRule{
	{Condition: conditions.Ready, Status: metav1.ConditionTrue, Type: corev1.EventTypeNormal},
	{Condition: conditions.Stalled, Status: metav1.ConditionTrue, Type: corev1.EventTypeWarning},
}

// Reconciler reconciles Tenant objects.
type Reconciler struct {
	client     client.Client
	apiReader  client.Reader
	children   children.Clients
	recorder   recorder.EventRecorder
	status     *status.Patcher[*tenancyv1.Tenant, tenancyv1.TenantStatus]
	protection Protection
	// reverify is how often a Ready tenant is looked at again.
	reverify time.Duration
}

// NewReconciler builds the reconciler from the manager's clients and the options.
func NewReconciler(mgr ctrl.Manager, opts setup.Options, protection Protection) *Reconciler {
	rec := mgr.GetEventRecorder(ControllerName)
	return &Reconciler{
		client:    mgr.GetClient(),
		apiReader: mgr.GetAPIReader(),
		children:  children.Clients{Cached: mgr.GetClient(), Uncached: mgr.GetAPIReader()},
		recorder:  rec,
		status: status.NewPatcher(mgr.GetClient(), rec,
			func(t *tenancyv1.Tenant) *tenancyv1.TenantStatus { return &t.Status }, statusEvents...),
		protection: protection,
		reverify:   opts.TenantReverifyInterval,
	}
}

// +kubebuilder:rbac:groups=tenancy.trellis.dev,resources=tenants,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=tenancy.trellis.dev,resources=tenants/status,verbs=get;patch
// +kubebuilder:rbac:groups=tenancy.trellis.dev,resources=tenants/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles;clusterrolebindings,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=admin
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get,resourceNames=tenants.tenancy.trellis.dev
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager wires the watches: the Tenant (spec changes, and the
// start of its deletion, which bumps the generation), the RBAC objects it
// owns, and its namespaces, which carry marks instead of owner references and
// are mapped back by label.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts setup.Options) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Namespace{}, namespaceTenantIndex, func(o client.Object) []string {
		if t := o.GetLabels()[TenantLabel]; t != "" {
			return []string{t}
		}
		return nil
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&tenancyv1.Tenant{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&rbacv1.RoleBinding{}).
		Owns(&rbacv1.ClusterRole{}).
		Owns(&rbacv1.ClusterRoleBinding{}).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(namespaceToTenant), builder.WithPredicates(namespaceChanged)).
		WithOptions(opts.ControllerOptions()).
		Complete(r)
}

// namespaceChanged passes namespace events that can matter: creation and
// deletion, a change of our marks, and the start of a deletion.
var namespaceChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		return o.GetLabels()[TenantLabel] != n.GetLabels()[TenantLabel] ||
			o.GetLabels()[setup.ManagedByLabel] != n.GetLabels()[setup.ManagedByLabel] ||
			o.GetAnnotations()[TenantUIDAnnotation] != n.GetAnnotations()[TenantUIDAnnotation] ||
			o.GetDeletionTimestamp().IsZero() != n.GetDeletionTimestamp().IsZero()
	},
}

func namespaceToTenant(_ context.Context, o client.Object) []reconcile.Request {
	if t := o.GetLabels()[TenantLabel]; t != "" {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: t}}}
	}
	return nil
}

// Reconcile brings one Tenant's namespaces and RBAC to the desired state.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	t := &tenancyv1.Tenant{}
	found, err := r.status.Get(ctx, req.NamespacedName, t)
	if err != nil || !found {
		if !found {
			forgetMetrics(req.Name)
		}
		return ctrl.Result{}, err
	}
	if !t.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, t)
	}
	// The finalizer goes on before any namespace exists, so no namespace can
	// outlive a Tenant without its policy being applied.
	if _, err := finalizer.Ensure(ctx, r.client, t, Finalizer); err != nil {
		return ctrl.Result{}, err
	}

	obs := &observation{}
	err = r.reconcileAll(ctx, t, obs)
	switch {
	case apierrors.IsConflict(err):
		// Someone wrote a child since our cache saw it: try again at once,
		// without telling the world about it.
		return ctrl.Result{}, err
	case err != nil:
		obs.failed = err
	}
	next := computeStatus(t, obs)
	readyGauge.WithLabelValues(t.Name).Set(boolGauge(conditions.IsTrue(next.Conditions, conditions.Ready)))
	if _, perr := r.status.Patch(ctx, t, next); perr != nil {
		return ctrl.Result{}, errors.Join(err, perr)
	}
	switch {
	case err != nil:
		return ctrl.Result{}, err
	case obs.blocked():
		// A foreign namespace or RBAC object is outside the cache: its removal is no event.
		return setup.RequeueAfter(setup.ForeignChildRetry), nil
	case conditions.IsTrue(next.Conditions, conditions.Ready):
		// Look again now and then: a safety net for a change any watch might
		// have missed. An unchanged tenant costs cache reads only.
		return setup.RequeueAfter(r.reverify), nil
	}
	return ctrl.Result{}, nil
}

// reconcileAll runs the sub-reconcilers in order; the first error stops them.
func (r *Reconciler) reconcileAll(ctx context.Context, t *tenancyv1.Tenant, obs *observation) error {
	for _, step := range []func(context.Context, *tenancyv1.Tenant, *observation) error{
		r.reconcileNamespaces,
		r.releaseDropped,
		r.reconcileRBAC,
	} {
		if err := step(ctx, t, obs); err != nil {
			return err
		}
	}
	return nil
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// reconcileNamespaces creates the tenant's missing namespaces and records the
// state of each; it never touches a namespace this Tenant did not create.
func (r *Reconciler) reconcileNamespaces(ctx context.Context, t *tenancyv1.Tenant, obs *observation) error {
	for _, name := range namespaceNames(t) {
		if why := r.protection.Protected(name); why != "" {
			obs.set(name, tenancyv1.NamespaceProtected, "refused: "+why)
			continue
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		exists, err := children.Lookup(ctx, r.children, ns)
		if err != nil {
			return err
		}
		switch {
		case !exists:
			if err := r.createNamespace(ctx, t, name); err != nil {
				if apierrors.IsAlreadyExists(err) {
					// Someone (another Tenant?) created it since we looked; next time we will see whose it is.
					obs.set(name, tenancyv1.NamespaceConflict, "created by someone else while this Tenant was creating it")
					continue
				}
				return err
			}
			obs.set(name, tenancyv1.NamespaceReady, "")
		case !isMarkedBy(ns.Annotations, t):
			obs.set(name, tenancyv1.NamespaceConflict, conflictMessage(ns))
		case !ns.DeletionTimestamp.IsZero():
			obs.set(name, tenancyv1.NamespaceTerminating, "being deleted; it will be created again once it is gone")
		default:
			if err := r.ensureNamespaceLabels(ctx, t, ns); err != nil {
				return err
			}
			obs.set(name, tenancyv1.NamespaceReady, "")
		}
	}
	return nil
}

func conflictMessage(ns *corev1.Namespace) string {
	if other := ns.Labels[TenantLabel]; other != "" {
		return fmt.Sprintf("namespace %s belongs to Tenant %q; it is left untouched", ns.Name, other)
	}
	return fmt.Sprintf("namespace %s already exists and was not created by this Tenant; it is left untouched", ns.Name)
}

func (r *Reconciler) createNamespace(ctx context.Context, t *tenancyv1.Tenant, name string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:        name,
		Labels:      childLabels(t),
		Annotations: map[string]string{TenantUIDAnnotation: string(t.UID)},
	}}
	if err := r.client.Create(ctx, ns); err != nil {
		return err
	}
	namespacesAdded.WithLabelValues(t.Name).Inc()
	log.FromContext(ctx).Info("namespace created", "namespace", name)
	r.recorder.Eventf(t, ns, corev1.EventTypeNormal, "NamespaceCreated", "Reconcile", "created namespace %s", name)
	return nil
}

// ensureNamespaceLabels restores our labels on one of our namespaces (they
// scope the cache and the index), writing only when one is missing.
func (r *Reconciler) ensureNamespaceLabels(ctx context.Context, t *tenancyv1.Tenant, ns *corev1.Namespace) error {
	want := childLabels(t)
	missing := false
	for k, v := range want {
		if ns.Labels[k] != v {
			missing = true
		}
	}
	if !missing {
		return nil
	}
	patch := client.MergeFrom(ns.DeepCopy())
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	for k, v := range want {
		ns.Labels[k] = v
	}
	return r.client.Patch(ctx, ns, patch)
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

// releaseDropped applies the deletion policy to our namespaces that left the spec.
func (r *Reconciler) releaseDropped(ctx context.Context, t *tenancyv1.Tenant, _ *observation) error {
	owned, err := r.ownedNamespaces(ctx, t)
	if err != nil {
		return err
	}
	desired := namespaceNames(t)
	for i := range owned {
		if !slices.Contains(desired, owned[i].Name) {
			if err := r.release(ctx, t, &owned[i], t.Spec.NamespaceDeletionPolicy); err != nil {
				return err
			}
		}
	}
	return nil
}

// release gives up one of our namespaces: Delete deletes it (only if its UID
// is still the one we saw); Retain keeps it and its contents but removes the
// tenant's RoleBinding and our marks.
func (r *Reconciler) release(ctx context.Context, t *tenancyv1.Tenant, ns *corev1.Namespace, policy tenancyv1.NamespaceDeletionPolicy) error {
	if !ns.DeletionTimestamp.IsZero() {
		return nil
	}
	if policy == tenancyv1.NamespaceDelete {
		if err := r.client.Delete(ctx, ns, client.Preconditions{UID: &ns.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting namespace %s: %w", ns.Name, err)
		}
		namespacesRemoved.WithLabelValues(t.Name).Inc()
		log.FromContext(ctx).Info("namespace deleted", "namespace", ns.Name, "policy", policy)
		r.recorder.Eventf(t, ns, corev1.EventTypeNormal, "NamespaceDeleted", "Release", "deleted namespace %s (namespaceDeletionPolicy: Delete)", ns.Name)
		return nil
	}

	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: adminRoleBindingName, Namespace: ns.Name}}
	exists, err := children.LookupOwned(ctx, r.children, t, "RoleBinding", rb)
	if err != nil && !children.IsNotOwned(err) {
		return err
	}
	if exists && err == nil {
		if err := r.client.Delete(ctx, rb, client.Preconditions{UID: &rb.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting RoleBinding in %s: %w", ns.Name, err)
		}
	}
	patch := client.MergeFrom(ns.DeepCopy())
	delete(ns.Labels, TenantLabel)
	delete(ns.Labels, setup.ManagedByLabel)
	delete(ns.Labels, "app.kubernetes.io/part-of")
	delete(ns.Annotations, TenantUIDAnnotation)
	if err := r.client.Patch(ctx, ns, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("releasing namespace %s: %w", ns.Name, err)
	}
	namespacesRemoved.WithLabelValues(t.Name).Inc()
	log.FromContext(ctx).Info("namespace released", "namespace", ns.Name, "policy", policy)
	r.recorder.Eventf(t, ns, corev1.EventTypeNormal, "NamespaceReleased", "Release", "namespace %s kept with its contents; the tenant's RoleBinding was removed", ns.Name)
	return nil
}

// reconcileRBAC keeps the admin's RoleBinding in every Ready namespace, and
// the per-tenant ClusterRole and its binding.
func (r *Reconciler) reconcileRBAC(ctx context.Context, t *tenancyv1.Tenant, obs *observation) error {
	for _, ns := range obs.ready() {
		live := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: adminRoleBindingName, Namespace: ns}}
		_, err := children.ApplyOwned(ctx, r.children, t, "RoleBinding", live, desiredAdminRoleBinding(t, ns), rbacv1ac.ExtractRoleBinding)
		if children.IsNotOwned(err) {
			obs.set(ns, tenancyv1.NamespaceConflict, fmt.Sprintf("RoleBinding %s/%s exists and was not created by this Tenant", ns, adminRoleBindingName))
			continue
		}
		if err != nil {
			return err
		}
	}

	role := desiredTenantRole(t, obs.ready())
	_, err := children.ApplyOwned(ctx, r.children, t, "ClusterRole",
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: *role.Name}}, role, rbacv1ac.ExtractClusterRole)
	if children.IsNotOwned(err) {
		obs.rbacConflict = fmt.Sprintf("ClusterRole %s exists and was not created by this Tenant", *role.Name)
		return nil
	}
	if err != nil {
		return err
	}
	binding := desiredTenantRoleBinding(t)
	_, err = children.ApplyOwned(ctx, r.children, t, "ClusterRoleBinding",
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: *binding.Name}}, binding, rbacv1ac.ExtractClusterRoleBinding)
	if children.IsNotOwned(err) {
		obs.rbacConflict = fmt.Sprintf("ClusterRoleBinding %s exists and was not created by this Tenant", *binding.Name)
		return nil
	}
	return err
}

// finalize applies the deletion policy to every namespace of a Tenant being
// deleted, then lets it go. If the Tenant CRD itself is being deleted (an
// uninstall, or a reinstall gone wrong), namespaces are kept whatever the
// policy: deleting a CRD must never delete a team's data.
func (r *Reconciler) finalize(ctx context.Context, t *tenancyv1.Tenant) error {
	if !controllerutil.ContainsFinalizer(t, Finalizer) {
		return nil
	}
	policy := t.Spec.NamespaceDeletionPolicy
	if policy == tenancyv1.NamespaceDelete {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		err := r.apiReader.Get(ctx, client.ObjectKey{Name: tenantCRDName}, crd)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("checking whether the Tenant CRD is being deleted: %w", err)
		}
		if apierrors.IsNotFound(err) || !crd.DeletionTimestamp.IsZero() {
			log.FromContext(ctx).Info("Tenant CRD is being deleted: keeping the namespaces despite namespaceDeletionPolicy Delete")
			policy = tenancyv1.NamespaceRetain
		}
	}
	owned, err := r.ownedNamespaces(ctx, t)
	if err != nil {
		return err
	}
	for i := range owned {
		if err := r.release(ctx, t, &owned[i], policy); err != nil {
			return err
		}
	}
	if err := finalizer.Remove(ctx, r.client, t, Finalizer); err != nil {
		return err
	}
	forgetMetrics(t.Name)
	return nil
}
