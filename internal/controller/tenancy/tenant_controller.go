// Package tenancy reconciles Tenants: a team's namespaces, the RoleBinding that
// makes its admin an admin there, and a ClusterRole that lets the admin read
// its own Tenant and namespaces.
package tenancy

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
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
	"sigs.k8s.io/controller-runtime/pkg/source"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/children"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/controller/statusmemo"
	"github.com/trellis-dev/trellis/internal/jitter"
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
	// tenantReadyIndex finds the Ready tenants the re-verifier re-queues.
	tenantReadyIndex = "status.conditions.ready"
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
		r := &Reconciler{
			Client:     mgr.GetClient(),
			APIReader:  mgr.GetAPIReader(),
			Recorder:   mgr.GetEventRecorder(ControllerName),
			Protection: Protection{ManagerNamespace: opts.Namespace, Extra: extra},
		}
		return r.SetupWithManager(ctx, mgr, opts)
	},
}

// Reconciler reconciles Tenant objects.
type Reconciler struct {
	Client     client.Client
	APIReader  client.Reader
	Recorder   recorder.EventRecorder
	Protection Protection
	// written avoids re-sending a status the cache has not caught up with yet.
	written statusmemo.Memo
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

// SetupWithManager wires the seed's watches: the Tenant (spec changes only),
// the RBAC objects it owns, its namespaces (which carry marks, not owner
// references, so they are watched and mapped back by label), and a channel
// of periodic re-verification events.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts setup.Options) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Namespace{}, namespaceTenantIndex, func(o client.Object) []string {
		if t := o.GetLabels()[TenantLabel]; t != "" {
			return []string{t}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &tenancyv1.Tenant{}, tenantReadyIndex, func(o client.Object) []string {
		t := o.(*tenancyv1.Tenant)
		return []string{readyValue(t)}
	}); err != nil {
		return err
	}

	reverify := &Reverifier{
		Reader:   mgr.GetCache(),
		Interval: opts.TenantReverifyInterval,
		Events:   make(chan event.TypedGenericEvent[*tenancyv1.Tenant]),
	}
	if err := mgr.Add(reverify); err != nil {
		return err
	}

	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&tenancyv1.Tenant{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, setup.DeletionStarted))).
		Owns(&rbacv1.RoleBinding{}).
		Owns(&rbacv1.ClusterRole{}).
		Owns(&rbacv1.ClusterRoleBinding{}).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(namespaceToTenant), builder.WithPredicates(namespaceChanged)).
		WatchesRawSource(source.Channel(reverify.Events, &handler.TypedEnqueueRequestForObject[*tenancyv1.Tenant]{})).
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
	if err := r.Client.Get(ctx, req.NamespacedName, t); err != nil {
		if apierrors.IsNotFound(err) {
			forgetMetrics(req.Name)
			r.written.Forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !t.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, t)
	}
	// The finalizer goes on before any namespace exists, so no namespace can
	// outlive a Tenant without its policy being applied.
	if !controllerutil.ContainsFinalizer(t, Finalizer) {
		patch := client.MergeFrom(t.DeepCopy())
		controllerutil.AddFinalizer(t, Finalizer)
		if err := r.Client.Patch(ctx, t, patch); err != nil {
			return ctrl.Result{}, fmt.Errorf("adding finalizer: %w", err)
		}
	}

	obs := &observation{}
	if err := r.reconcileNamespaces(ctx, t, obs); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.releaseDropped(ctx, t); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.reconcileRBAC(ctx, t, obs); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.updateStatus(ctx, t, obs); err != nil {
		return ctrl.Result{}, err
	}
	if obs.blocked() {
		// A foreign namespace is outside the cache: its removal is no event.
		return ctrl.Result{RequeueAfter: jitter.Duration(retryAfterConflict, 0.2)}, nil
	}
	return ctrl.Result{}, nil
}

// reconcileNamespaces creates the tenant's missing namespaces and records the
// state of each; it never touches a namespace this Tenant did not create.
func (r *Reconciler) reconcileNamespaces(ctx context.Context, t *tenancyv1.Tenant, obs *observation) error {
	for _, name := range namespaceNames(t) {
		if why := r.Protection.Protected(name); why != "" {
			obs.set(name, tenancyv1.NamespaceProtected, "refused: "+why)
			continue
		}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		exists, err := children.Lookup(ctx, r.Client, r.APIReader, ns)
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
	if err := r.Client.Create(ctx, ns); err != nil {
		return err
	}
	namespacesAdded.WithLabelValues(t.Name).Inc()
	log.FromContext(ctx).Info("namespace created", "namespace", name)
	r.Recorder.Eventf(t, ns, corev1.EventTypeNormal, "NamespaceCreated", "Reconcile", "created namespace %s", name)
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
	return r.Client.Patch(ctx, ns, patch)
}

// ownedNamespaces lists the namespaces carrying t's marks, from the cache.
func (r *Reconciler) ownedNamespaces(ctx context.Context, t *tenancyv1.Tenant) ([]corev1.Namespace, error) {
	list := &corev1.NamespaceList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{namespaceTenantIndex: t.Name}); err != nil {
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
func (r *Reconciler) releaseDropped(ctx context.Context, t *tenancyv1.Tenant) error {
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
		if err := r.Client.Delete(ctx, ns, client.Preconditions{UID: &ns.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting namespace %s: %w", ns.Name, err)
		}
		namespacesRemoved.WithLabelValues(t.Name).Inc()
		log.FromContext(ctx).Info("namespace deleted", "namespace", ns.Name, "policy", policy)
		r.Recorder.Eventf(t, ns, corev1.EventTypeNormal, "NamespaceDeleted", "Release", "deleted namespace %s (namespaceDeletionPolicy: Delete)", ns.Name)
		return nil
	}

	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: adminRoleBindingName, Namespace: ns.Name}}
	exists, err := children.Lookup(ctx, r.Client, r.APIReader, rb)
	if err != nil {
		return err
	}
	if exists && metav1.IsControlledBy(rb, t) {
		if err := r.Client.Delete(ctx, rb, client.Preconditions{UID: &rb.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting RoleBinding in %s: %w", ns.Name, err)
		}
	}
	patch := client.MergeFrom(ns.DeepCopy())
	delete(ns.Labels, TenantLabel)
	delete(ns.Labels, setup.ManagedByLabel)
	delete(ns.Labels, "app.kubernetes.io/part-of")
	delete(ns.Annotations, TenantUIDAnnotation)
	if err := r.Client.Patch(ctx, ns, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("releasing namespace %s: %w", ns.Name, err)
	}
	namespacesRemoved.WithLabelValues(t.Name).Inc()
	log.FromContext(ctx).Info("namespace released", "namespace", ns.Name, "policy", policy)
	r.Recorder.Eventf(t, ns, corev1.EventTypeNormal, "NamespaceReleased", "Release", "namespace %s kept with its contents; the tenant's RoleBinding was removed", ns.Name)
	return nil
}

// reconcileRBAC keeps the admin's RoleBinding in every Ready namespace, and
// the per-tenant ClusterRole and its binding.
func (r *Reconciler) reconcileRBAC(ctx context.Context, t *tenancyv1.Tenant, obs *observation) error {
	ready := obs.ready()
	for _, ns := range ready {
		desired := desiredAdminRoleBinding(t, ns)
		live := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: adminRoleBindingName, Namespace: ns}}
		exists, err := children.Lookup(ctx, r.Client, r.APIReader, live)
		if err != nil {
			return err
		}
		if exists && !metav1.IsControlledBy(live, t) {
			obs.set(ns, tenancyv1.NamespaceConflict, fmt.Sprintf("RoleBinding %s/%s exists and was not created by this Tenant", ns, adminRoleBindingName))
			continue
		}
		var current *rbacv1ac.RoleBindingApplyConfiguration
		if exists {
			if current, err = rbacv1ac.ExtractRoleBinding(live, setup.FieldManager); err != nil {
				return err
			}
		}
		if _, err := children.ApplyIfChanged(ctx, r.Client, desired, current, exists); err != nil {
			return fmt.Errorf("applying RoleBinding in %s: %w", ns, err)
		}
	}

	role := desiredTenantRole(t, obs.ready())
	liveRole := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: *role.Name}}
	exists, err := children.Lookup(ctx, r.Client, r.APIReader, liveRole)
	if err != nil {
		return err
	}
	if exists && !metav1.IsControlledBy(liveRole, t) {
		obs.rbacConflict = fmt.Sprintf("ClusterRole %s exists and was not created by this Tenant", *role.Name)
		return nil
	}
	var currentRole *rbacv1ac.ClusterRoleApplyConfiguration
	if exists {
		if currentRole, err = rbacv1ac.ExtractClusterRole(liveRole, setup.FieldManager); err != nil {
			return err
		}
	}
	if _, err := children.ApplyIfChanged(ctx, r.Client, role, currentRole, exists); err != nil {
		return fmt.Errorf("applying ClusterRole: %w", err)
	}

	binding := desiredTenantRoleBinding(t)
	liveBinding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: *binding.Name}}
	if exists, err = children.Lookup(ctx, r.Client, r.APIReader, liveBinding); err != nil {
		return err
	}
	if exists && !metav1.IsControlledBy(liveBinding, t) {
		obs.rbacConflict = fmt.Sprintf("ClusterRoleBinding %s exists and was not created by this Tenant", *binding.Name)
		return nil
	}
	var currentBinding *rbacv1ac.ClusterRoleBindingApplyConfiguration
	if exists {
		if currentBinding, err = rbacv1ac.ExtractClusterRoleBinding(liveBinding, setup.FieldManager); err != nil {
			return err
		}
	}
	if _, err := children.ApplyIfChanged(ctx, r.Client, binding, currentBinding, exists); err != nil {
		return fmt.Errorf("applying ClusterRoleBinding: %w", err)
	}
	return nil
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
		err := r.APIReader.Get(ctx, client.ObjectKey{Name: tenantCRDName}, crd)
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
	patch := client.MergeFrom(t.DeepCopy())
	controllerutil.RemoveFinalizer(t, Finalizer)
	if err := r.Client.Patch(ctx, t, patch); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("removing finalizer: %w", err)
	}
	forgetMetrics(t.Name)
	return nil
}

// retryAfterConflict is how soon a tenant blocked by a foreign namespace looks
// again; the foreign namespace is outside the cache, so its removal is no event.
const retryAfterConflict = 2 * time.Minute

// updateStatus writes the status only when it differs from what is stored,
// and emits an Event when Ready changes.
func (r *Reconciler) updateStatus(ctx context.Context, t *tenancyv1.Tenant, obs *observation) error {
	if latest, ok := r.written.Latest(client.ObjectKeyFromObject(t), t.ResourceVersion); ok {
		st := latest.(tenancyv1.TenantStatus)
		t.Status = *st.DeepCopy() // the cache has not seen our last write yet
	}
	next := computeStatus(t, obs)
	ready := 0.0
	if conditions.IsTrue(next.Conditions, conditions.Ready) {
		ready = 1
	}
	readyGauge.WithLabelValues(t.Name).Set(ready)
	if equality.Semantic.DeepEqual(t.Status, next) {
		return nil
	}
	before := conditions.Get(t.Status.Conditions, conditions.Ready)
	rvBefore := t.ResourceVersion
	patch := client.MergeFrom(t.DeepCopy())
	t.Status = next
	if err := r.Client.Status().Patch(ctx, t, patch); err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	r.written.Wrote(client.ObjectKeyFromObject(t), rvBefore, *next.DeepCopy())
	after := conditions.Get(next.Conditions, conditions.Ready)
	if before != nil && before.Status == after.Status && before.Reason == after.Reason {
		return nil
	}
	if after.Status == metav1.ConditionTrue {
		r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, after.Reason, "Reconcile", "%s", after.Message)
	} else if obs.blocked() {
		r.Recorder.Eventf(t, nil, corev1.EventTypeWarning, after.Reason, "Reconcile", "%s", after.Message)
	}
	return nil
}
