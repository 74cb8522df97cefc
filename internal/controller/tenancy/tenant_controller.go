// Package tenancy reconciles Tenants: a team's namespaces, the RoleBindings
// that make its admins admins (and its viewers viewers) there, the guardrails
// every namespace gets (quota, limit range, network isolation, Pod Security
// level, labels and annotations), and a ClusterRole that lets the team read
// its own Tenant and namespaces.
package tenancy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	// everything is kept, whatever the policy says.
	tenantCRDName = "tenants.tenancy.trellis.dev"

	// namespaceTenantIndex finds a tenant's namespaces in the cache.
	namespaceTenantIndex = "metadata.labels.tenant"
	// tenantUIDIndex finds a Tenant by UID: a namespace marked with the UID
	// of a Tenant that still exists is never taken by another.
	tenantUIDIndex = "metadata.uid"

	// maxParallelRequests bounds the API requests one Tenant's reconcile has
	// in flight: its namespaces and their children are written in parallel.
	maxParallelRequests = 8
)

// Controller registers the Tenant controller with the manager.
var Controller = setup.Controller{
	Name: ControllerName,
	Owned: []client.Object{
		&corev1.Namespace{}, &rbacv1.RoleBinding{}, &rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{},
		&corev1.ResourceQuota{}, &corev1.LimitRange{}, &networkingv1.NetworkPolicy{},
	},
	Setup: func(ctx context.Context, mgr ctrl.Manager, opts setup.Options) error {
		extra, err := CompileProtectedPattern(opts.TenantProtectedNamespaces)
		if err != nil {
			return err
		}
		r := NewReconciler(mgr, opts, Protection{ManagerNamespace: opts.Namespace, Extra: extra})
		return r.SetupWithManager(ctx, mgr, opts)
	},
}

// statusEvents: a tenant that became Ready, one that needs a person, and a
// ServiceAccount subject whose namespace does not exist.
var statusEvents = []status.EventRule{
	{Condition: conditions.Ready, Status: metav1.ConditionTrue, Type: corev1.EventTypeNormal},
	{Condition: conditions.Stalled, Status: metav1.ConditionTrue, Type: corev1.EventTypeWarning},
	{Condition: ConditionSubjectsFound, Status: metav1.ConditionFalse, Type: corev1.EventTypeWarning},
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
// +kubebuilder:rbac:groups="",resources=resourcequotas;limitranges,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles;clusterrolebindings,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=admin;view
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get,resourceNames=tenants.tenancy.trellis.dev
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager wires the watches: the Tenant (spec changes, and the
// start of its deletion, which bumps the generation), and everything it
// keeps. Those carry the tenant label instead of an owner reference and are
// mapped back by it.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts setup.Options) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Namespace{}, namespaceTenantIndex, func(o client.Object) []string {
		if t := o.GetLabels()[TenantLabel]; t != "" {
			return []string{t}
		}
		return nil
	}); err != nil {
		return err
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &tenancyv1.Tenant{}, tenantUIDIndex, func(o client.Object) []string {
		return []string{string(o.GetUID())}
	}); err != nil {
		return err
	}
	toTenant := handler.EnqueueRequestsFromMapFunc(childToTenant)
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&tenancyv1.Tenant{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Namespace{}, toTenant, builder.WithPredicates(namespaceChanged))
	for _, obj := range []client.Object{
		&rbacv1.RoleBinding{}, &rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{},
		&corev1.ResourceQuota{}, &corev1.LimitRange{}, &networkingv1.NetworkPolicy{},
	} {
		// Every change passes: drift is restored, and a quota's usage is summed.
		b = b.Watches(obj, toTenant)
	}
	return b.WithOptions(opts.ControllerOptions()).Complete(r)
}

// namespaceChanged passes namespace events that can matter: creation and
// deletion, a change of its labels or annotations (marks, Pod Security
// levels, the tenant's metadata, a hand-over), and the start of a deletion.
var namespaceChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		return !mapsEqual(o.GetLabels(), n.GetLabels()) ||
			!mapsEqual(o.GetAnnotations(), n.GetAnnotations()) ||
			o.GetDeletionTimestamp().IsZero() != n.GetDeletionTimestamp().IsZero()
	},
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// childToTenant maps a namespace or any other object of a tenant to its
// Tenant, by the tenant label; a namespace also to the Tenant it is being
// handed over to.
func childToTenant(_ context.Context, o client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	if t := o.GetLabels()[TenantLabel]; t != "" {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: t}})
	}
	if _, isNamespace := o.(*corev1.Namespace); isNamespace {
		if t := o.GetAnnotations()[HandOverAnnotation]; t != "" && t != o.GetLabels()[TenantLabel] {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: t}})
		}
	}
	return reqs
}

// scope is one reconcile of one Tenant.
type scope struct {
	t   *tenancyv1.Tenant
	obs *observation
	// sem bounds the requests in flight (maxParallelRequests).
	sem chan struct{}
	// wasReady are the namespaces the last status reported Ready: they exist,
	// so a cache miss on one of them means the cache is behind.
	wasReady map[string]bool
	// settled says the last status was written for this generation: every
	// child it asked for was in place.
	settled bool
}

func (r *Reconciler) newScope(t *tenancyv1.Tenant) *scope {
	s := &scope{
		t:        t,
		obs:      newObservation(namespaceNames(t)),
		sem:      make(chan struct{}, maxParallelRequests),
		wasReady: map[string]bool{},
		settled:  t.Status.ObservedGeneration == t.Generation,
	}
	for _, ns := range t.Status.Namespaces {
		if ns.State == tenancyv1.NamespaceReady {
			s.wasReady[ns.Name] = true
		}
	}
	return s
}

// do runs f while holding one of the scope's request slots.
func (s *scope) do(f func() error) error {
	s.sem <- struct{}{}
	defer func() { <-s.sem }()
	return f()
}

// group runs functions concurrently and joins their errors.
type group struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
}

func (g *group) Go(f func() error) {
	g.wg.Go(func() {
		if err := f(); err != nil {
			g.mu.Lock()
			g.errs = append(g.errs, err)
			g.mu.Unlock()
		}
	})
}

func (g *group) Wait() error {
	g.wg.Wait()
	return errors.Join(g.errs...)
}

// Reconcile brings one Tenant's namespaces, bindings and guardrails to the
// desired state.
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

	s := r.newScope(t)
	err = r.reconcileAll(ctx, s)
	switch {
	case apierrors.IsConflict(err):
		// Someone wrote a child since our cache saw it: try again at once,
		// without telling the world about it.
		return ctrl.Result{}, err
	case err != nil:
		s.obs.failed = err
	}
	next := computeStatus(t, s.obs)
	recordMetrics(t, next)
	if _, perr := r.status.Patch(ctx, t, next); perr != nil {
		return ctrl.Result{}, errors.Join(err, perr)
	}
	switch {
	case err != nil:
		return ctrl.Result{}, err
	case s.obs.blocked():
		// A foreign object is outside the cache: its removal is no event.
		return setup.RequeueAfter(setup.ForeignChildRetry), nil
	case conditions.IsTrue(next.Conditions, conditions.Ready):
		// Look again now and then: a safety net for a change any watch might
		// have missed. An unchanged tenant costs cache reads only.
		return setup.RequeueAfter(r.reverify), nil
	}
	return ctrl.Result{}, nil
}

// reconcileAll runs the sub-reconcilers in order; the first error stops them.
func (r *Reconciler) reconcileAll(ctx context.Context, s *scope) error {
	for _, step := range []func(context.Context, *scope) error{
		r.reconcileNamespaces,
		r.releaseDropped,
		r.reconcileTenantRole,
		r.checkSubjects,
	} {
		if err := step(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// reconcileNamespaces brings every namespace of the spec, and what it holds,
// to the desired state, all in parallel.
func (r *Reconciler) reconcileNamespaces(ctx context.Context, s *scope) error {
	var g group
	for _, name := range namespaceNames(s.t) {
		g.Go(func() error { return r.reconcileNamespace(ctx, s, name) })
	}
	return g.Wait()
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
func (r *Reconciler) claim(ctx context.Context, ns *corev1.Namespace, t *tenancyv1.Tenant) namespaceClaim {
	if isMarkedBy(ns.Annotations, t) {
		return claimOurs
	}
	switch {
	case r.holder(ctx, ns.Annotations[TenantUIDAnnotation]) != "":
		return claimForeign
	case ns.Labels[TenantLabel] == t.Name:
		return claimReclaim
	case ns.Annotations[HandOverAnnotation] == t.Name:
		return claimHandOver
	}
	return claimForeign
}

// holder names the Tenant whose UID this is, if it exists. When unsure (the
// cache cannot answer) it answers "?": a namespace is never taken on a guess.
func (r *Reconciler) holder(ctx context.Context, uid string) string {
	if uid == "" {
		return ""
	}
	list := &tenancyv1.TenantList{}
	if err := r.client.List(ctx, list, client.MatchingFields{tenantUIDIndex: uid}); err != nil {
		log.FromContext(ctx).Error(err, "looking up the Tenant holding a namespace")
		return "?"
	}
	if len(list.Items) == 0 {
		return ""
	}
	return list.Items[0].Name
}

// tenantExists reports whether a Tenant of that name exists (the cache;
// when unsure, yes).
func (r *Reconciler) tenantExists(ctx context.Context, name string) bool {
	err := r.client.Get(ctx, client.ObjectKey{Name: name}, &tenancyv1.Tenant{})
	return !apierrors.IsNotFound(err)
}

// ownsChild reports whether an object in one of the tenant's namespaces (or
// a cluster-wide RBAC object named after it) is the tenant's: marked
// managed-by Trellis and labelled with the tenant's name, or with the name
// of a Tenant that no longer exists, whose leftovers in a namespace that is
// now this tenant's must not keep granting anything.
func (r *Reconciler) ownsChild(ctx context.Context, obj metav1.Object, t *tenancyv1.Tenant) bool {
	labels := obj.GetLabels()
	if labels[setup.ManagedByLabel] != setup.ManagedByValue {
		return false
	}
	switch owner := labels[TenantLabel]; owner {
	case t.Name:
		return true
	case "":
		return false
	default:
		return !r.tenantExists(ctx, owner)
	}
}

// reconcileNamespace creates or takes one namespace of the spec, keeps its
// labels and annotations, records its state, and reconciles what it holds.
// It never touches a namespace that is not the Tenant's.
func (r *Reconciler) reconcileNamespace(ctx context.Context, s *scope, name string) error {
	t := s.t
	if why := r.protection.Protected(name); why != "" {
		s.obs.set(name, tenancyv1.NamespaceProtected, "refused: "+why)
		return nil
	}
	live := &corev1.Namespace{}
	claim := claimForeign
	var outcome children.Outcome
	err := s.do(func() (err error) {
		outcome, err = children.CreateOrSync(ctx, r.children, children.Child[*corev1.Namespace]{
			Kind: "Namespace", Live: live, Desired: desiredNamespace(t, name),
			Owns: func(ns *corev1.Namespace) bool {
				claim = r.claim(ctx, ns, t)
				return claim != claimForeign
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
		s.obs.set(name, tenancyv1.NamespaceConflict, r.conflictMessage(ctx, live))
		return nil
	case err != nil:
		return err
	case !live.DeletionTimestamp.IsZero():
		s.obs.set(name, tenancyv1.NamespaceTerminating, "being deleted; it will be created again once it is gone")
		return nil
	}
	logger := log.FromContext(ctx)
	switch {
	case outcome == children.Created:
		claim = claimOurs
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
	return r.reconcileNamespaceChildren(ctx, s, name)
}

func (r *Reconciler) conflictMessage(ctx context.Context, ns *corev1.Namespace) string {
	if other := r.holder(ctx, ns.Annotations[TenantUIDAnnotation]); other != "" {
		return fmt.Sprintf("namespace %s belongs to Tenant %q; it is left untouched", ns.Name, other)
	}
	return fmt.Sprintf("namespace %s already exists and was not created by this Tenant; it is left untouched "+
		"(a cluster admin can hand it over with the annotation %s=<tenant>)", ns.Name, HandOverAnnotation)
}

// reconcileNamespaceChildren keeps, in one of the tenant's namespaces, the
// admin and viewer RoleBindings and the guardrails the spec asks for, and
// removes those it no longer asks for; all in parallel.
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
	return g.Wait()
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
			Owns: func(l T) bool {
				if want, ok := roleRefOf(desired); ok {
					if got, _ := roleRefOf(l); got != want {
						return false
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
	case apierrors.IsInvalid(err):
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
		deleted, err := children.DeleteOwned(ctx, r.children, kind, obj, func(o T) bool { return r.ownsChild(ctx, o, s.t) })
		if deleted {
			log.FromContext(ctx).Info("removed what the spec no longer asks for", "kind", kind, "namespace", ns, "name", name)
		}
		return err
	})
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
func (r *Reconciler) releaseDropped(ctx context.Context, s *scope) error {
	owned, err := r.ownedNamespaces(ctx, s.t)
	if err != nil {
		return err
	}
	desired := namespaceNames(s.t)
	var g group
	for i := range owned {
		if !slices.Contains(desired, owned[i].Name) {
			g.Go(func() error { return r.release(ctx, s, &owned[i], s.t.Spec.NamespaceDeletionPolicy) })
		}
	}
	return g.Wait()
}

// release gives up one of our namespaces. Delete deletes it (only if its UID
// is still the one we saw). Retain keeps it and everything the team put in
// it, and takes away everything Trellis put there for the tenant: the admin
// and viewer RoleBindings, the quota, limit range and network policy, the
// Pod Security labels and the tenant's labels and annotations, and the marks.
// It becomes an ordinary namespace.
func (r *Reconciler) release(ctx context.Context, s *scope, ns *corev1.Namespace, policy tenancyv1.NamespaceDeletionPolicy) error {
	t := s.t
	if !ns.DeletionTimestamp.IsZero() {
		return nil
	}
	if policy == tenancyv1.NamespaceDelete {
		err := s.do(func() error { return r.client.Delete(ctx, ns, client.Preconditions{UID: &ns.UID}) })
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting namespace %s: %w", ns.Name, err)
		}
		namespacesRemoved.WithLabelValues(t.Name).Inc()
		log.FromContext(ctx).Info("namespace deleted", "namespace", ns.Name, "policy", policy)
		r.recorder.Eventf(t, ns, corev1.EventTypeNormal, "NamespaceDeleted", "Release", "deleted namespace %s (namespaceDeletionPolicy: Delete)", ns.Name)
		return nil
	}

	var g group
	g.Go(func() error {
		return deleteChild(ctx, r, s, "RoleBinding", ns.Name, adminRoleBindingName, &rbacv1.RoleBinding{})
	})
	g.Go(func() error {
		return deleteChild(ctx, r, s, "RoleBinding", ns.Name, viewerRoleBindingName, &rbacv1.RoleBinding{})
	})
	g.Go(func() error {
		return deleteChild(ctx, r, s, "ResourceQuota", ns.Name, quotaName, &corev1.ResourceQuota{})
	})
	g.Go(func() error {
		return deleteChild(ctx, r, s, "LimitRange", ns.Name, limitRangeName, &corev1.LimitRange{})
	})
	g.Go(func() error {
		return deleteChild(ctx, r, s, "NetworkPolicy", ns.Name, networkPolicyName, &networkingv1.NetworkPolicy{})
	})
	if err := g.Wait(); err != nil {
		return err
	}
	before := ns.DeepCopy()
	if releaseNamespace(ns) {
		err := s.do(func() error { return r.client.Patch(ctx, ns, client.MergeFrom(before)) })
		if client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("releasing namespace %s: %w", ns.Name, err)
		}
	}
	namespacesRemoved.WithLabelValues(t.Name).Inc()
	log.FromContext(ctx).Info("namespace released", "namespace", ns.Name, "policy", policy)
	r.recorder.Eventf(t, ns, corev1.EventTypeNormal, "NamespaceReleased", "Release",
		"namespace %s kept with its contents; the tenant's bindings, guardrails and marks were removed", ns.Name)
	return nil
}

// reconcileTenantRole keeps the per-tenant ClusterRole, naming the
// namespaces that are ready, then its binding to the admins and viewers: in
// that order, because the API server checks, when a binding is created, that
// its role exists and grants nothing the manager does not hold.
func (r *Reconciler) reconcileTenantRole(ctx context.Context, s *scope) error {
	expect := s.t.Status.ObservedGeneration > 0
	role := desiredTenantRole(s.t, s.obs.ready())
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

// finalize applies the deletion policy to every namespace of a Tenant being
// deleted, removes its cluster-wide RBAC objects, then lets it go. If the
// Tenant CRD itself is being deleted (an uninstall, or a reinstall), nothing
// is touched: namespaces, bindings, guardrails and marks all stay, so the
// team keeps working and the same Tenant applied again finds them.
func (r *Reconciler) finalize(ctx context.Context, t *tenancyv1.Tenant) error {
	if !controllerutil.ContainsFinalizer(t, Finalizer) {
		return nil
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	err := r.apiReader.Get(ctx, client.ObjectKey{Name: tenantCRDName}, crd)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("checking whether the Tenant CRD is being deleted: %w", err)
	}
	if apierrors.IsNotFound(err) || !crd.DeletionTimestamp.IsZero() {
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

// releaseAll applies the policy to every namespace the Tenant holds and
// deletes its ClusterRole and ClusterRoleBinding.
func (r *Reconciler) releaseAll(ctx context.Context, t *tenancyv1.Tenant) error {
	s := r.newScope(t)
	owned, err := r.ownedNamespaces(ctx, t)
	if err != nil {
		return err
	}
	var g group
	for i := range owned {
		g.Go(func() error { return r.release(ctx, s, &owned[i], t.Spec.NamespaceDeletionPolicy) })
	}
	g.Go(func() error {
		return deleteChild(ctx, r, s, "ClusterRoleBinding", "", tenantRoleName(t), &rbacv1.ClusterRoleBinding{})
	})
	g.Go(func() error {
		return deleteChild(ctx, r, s, "ClusterRole", "", tenantRoleName(t), &rbacv1.ClusterRole{})
	})
	return g.Wait()
}
