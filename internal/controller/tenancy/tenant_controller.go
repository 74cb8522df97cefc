// Package tenancy reconciles Tenants: a team's namespaces, the RoleBindings
// that make its admins admins (and its viewers viewers) there, the guardrails
// every namespace gets (quota, limit range, network isolation, Pod Security
// level, labels and annotations), and a ClusterRole that lets the team read
// its own Tenant and namespaces.
package tenancy

import (
	"context"
	"maps"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/children"
	"github.com/trellis-dev/trellis/internal/controller/finalizer"
	"github.com/trellis-dev/trellis/internal/controller/operate"
	"github.com/trellis-dev/trellis/internal/controller/outcome"
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
	// requestCRDName is checked when a granted request disappears: with its
	// CRD going away, the namespaces granted stay.
	requestCRDName = "namespacerequests.tenancy.trellis.dev"

	// namespaceTenantIndex finds a tenant's namespaces in the cache.
	namespaceTenantIndex = "metadata.labels.tenant"
	// tenantUIDIndex finds a Tenant by UID: a namespace marked with the UID
	// of a Tenant that still exists is never taken by another.
	tenantUIDIndex = "metadata.uid"

	// maxParallelRequests bounds the API requests one Tenant's reconcile has
	// in flight: the writes of a round run side by side (runRound), each
	// sending one request at a time.
	maxParallelRequests = 8
)

// Controller registers the Tenant controller with the manager.
var Controller = setup.Controller{
	Name: ControllerName,
	Owned: []client.Object{
		&corev1.Namespace{}, &rbacv1.RoleBinding{}, &rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{},
		&corev1.ResourceQuota{}, &corev1.LimitRange{}, &networkingv1.NetworkPolicy{},
	},
	// A tenant's own objects are cached whole; other labelled ones as metadata.
	Recognise:   recogniseChild,
	ForeignKeys: foreignKeys,
	// Of its namespaces it reads which labels and annotations it set
	// (metadataKeysOf); of nothing else.
	ReadsManagedFields: []client.Object{&corev1.Namespace{}},
	// Every NetworkPolicy is cached, a team's too (they carry no label):
	// network isolation is undone by any policy in a tenant namespace that
	// admits more (isolation.go). All but Trellis' own are cut down to what
	// that judgement reads.
	// NamespaceRequests are the team's objects: of them it reads name,
	// namespace, creation time and status, never what the team wrote in
	// labels or annotations (trimRequest).
	Transforms: []setup.Transform{
		{Object: &networkingv1.NetworkPolicy{}, Func: reduceNetworkPolicy, All: true},
		{Object: &tenancyv1.NamespaceRequest{}, Func: trimRequest},
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

// statusEvents: a tenant that became Ready, one that needs a person, a
// ServiceAccount subject whose namespace does not exist, usage over the
// tenant's quota, and pods that do not meet its Pod Security level.
var statusEvents = []status.EventRule{
	{Condition: conditions.Ready, Status: metav1.ConditionTrue, Type: corev1.EventTypeNormal},
	{Condition: conditions.Stalled, Status: metav1.ConditionTrue, Type: corev1.EventTypeWarning},
	{Condition: ConditionSubjectsFound, Status: metav1.ConditionFalse, Type: corev1.EventTypeWarning},
	{Condition: ConditionQuotaWithinLimit, Status: metav1.ConditionFalse, Type: corev1.EventTypeWarning},
	{Condition: ConditionPodsMeetPodSecurity, Status: metav1.ConditionFalse, Type: corev1.EventTypeWarning},
}

// requestEvents: a request granted, or refused.
var requestEvents = []status.EventRule{
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
	requests   *status.Patcher[*tenancyv1.NamespaceRequest, tenancyv1.NamespaceRequestStatus]
	protection Protection
	// reverify is how often a Ready tenant is looked at again.
	reverify time.Duration
	// sources watches the sources of copies; copyClients read copies
	// around the cache (copies.go).
	sources     *sourceWatches
	copyClients children.Clients
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
		requests: status.NewPatcher(mgr.GetClient(), rec,
			func(r *tenancyv1.NamespaceRequest) *tenancyv1.NamespaceRequestStatus { return &r.Status }, requestEvents...),
		protection:  protection,
		reverify:    opts.TenantReverifyInterval,
		copyClients: children.Clients{Cached: readThrough{Client: mgr.GetClient(), reader: mgr.GetAPIReader()}, Uncached: mgr.GetAPIReader()},
	}
}

// +kubebuilder:rbac:groups=tenancy.trellis.dev,resources=tenants,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=tenancy.trellis.dev,resources=tenants/status,verbs=get;patch
// +kubebuilder:rbac:groups=tenancy.trellis.dev,resources=tenants/finalizers,verbs=update
// +kubebuilder:rbac:groups=tenancy.trellis.dev,resources=namespacerequests,verbs=get;list;watch
// +kubebuilder:rbac:groups=tenancy.trellis.dev,resources=namespacerequests/status,verbs=get;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=resourcequotas;limitranges,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles;clusterrolebindings,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=admin;edit;view
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles,verbs=get;create;patch;delete;escalate;bind
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get,resourceNames=tenants.tenancy.trellis.dev;namespacerequests.tenancy.trellis.dev
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;patch;delete

// SetupWithManager wires the watches: the Tenant (spec changes, and the
// start of its deletion, which bumps the generation), and everything it
// keeps. Those carry the tenant label instead of an owner reference and are
// mapped back by it.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts setup.Options) error {
	return r.setupWith(ctx, mgr, opts.ControllerOptions())
}

func (r *Reconciler) setupWith(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	for _, ix := range indexes {
		if err := mgr.GetFieldIndexer().IndexField(ctx, ix.obj, ix.field, ix.value); err != nil {
			return err
		}
	}
	if err := r.status.FollowCache(ctx, mgr.GetCache()); err != nil {
		return err
	}
	if err := r.requests.FollowCache(ctx, mgr.GetCache()); err != nil {
		return err
	}
	meta, err := metadata.NewForConfig(mgr.GetConfig())
	if err != nil {
		return err
	}
	r.sources = newSourceWatches(meta, mgr.GetCache())
	if err := mgr.Add(r.sources); err != nil {
		return err
	}
	toTenant := handler.EnqueueRequestsFromMapFunc(childToTenant)
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&tenancyv1.Tenant{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, operate.ReconcileRequested))).
		Watches(&corev1.Namespace{}, toTenant, builder.WithPredicates(namespaceChanged)).
		// A request made or deleted; its status is the controller's own.
		Watches(&tenancyv1.NamespaceRequest{}, handler.EnqueueRequestsFromMapFunc(requestToTenant(mgr.GetClient())),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A copy's source changed (copies_watch.go).
		WatchesRawSource(source.Channel(r.sources.events, &handler.EnqueueRequestForObject{}))
	for _, obj := range []client.Object{
		&rbacv1.RoleBinding{}, &rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{},
		&corev1.ResourceQuota{}, &corev1.LimitRange{},
	} {
		// Every change passes: drift is restored, and a quota's usage is summed.
		b = b.Watches(obj, toTenant)
	}
	// Trellis' own policies by their label; anyone's by the tenant of their
	// namespace, whose isolation they may undo.
	b = b.Watches(&networkingv1.NetworkPolicy{}, handler.EnqueueRequestsFromMapFunc(networkPolicyToTenant(mgr.GetClient())),
		builder.WithPredicates(networkPolicyChanged))
	return b.WithOptions(opts).Complete(r)
}

// indexes are the field indexes the reconcile reads from the cache.
var indexes = []struct {
	obj   client.Object
	field string
	value client.IndexerFunc
}{
	{&corev1.Namespace{}, namespaceTenantIndex, func(o client.Object) []string {
		if t := o.GetLabels()[TenantLabel]; t != "" {
			return []string{t}
		}
		return nil
	}},
	{&tenancyv1.Tenant{}, tenantUIDIndex, func(o client.Object) []string {
		return []string{string(o.GetUID())}
	}},
	{&tenancyv1.Tenant{}, copySourceIndex, sourceKeys},
	{&tenancyv1.NamespaceRequest{}, requestTenantIndex, func(o client.Object) []string {
		if t := o.(*tenancyv1.NamespaceRequest).Status.Tenant; t != "" {
			return []string{t}
		}
		return nil
	}},
}

// namespaceChanged passes namespace events that can matter: creation and
// deletion, a change of its labels or annotations (marks, Pod Security
// levels, the tenant's metadata, a hand-over), and the start of a deletion.
var namespaceChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld, e.ObjectNew
		return !maps.Equal(o.GetLabels(), n.GetLabels()) ||
			!maps.Equal(o.GetAnnotations(), n.GetAnnotations()) ||
			o.GetDeletionTimestamp().IsZero() != n.GetDeletionTimestamp().IsZero()
	},
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

// Reconcile brings one Tenant's namespaces, bindings and guardrails to the
// desired state.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return r.reconcile(ctx, req).Result(ControllerName)
}

// reconcile is the shape every kind shares (docs/architecture.md, "One
// reconcile"): the Tenant read, its deletion or its finalizer, the steps
// in order, then one deferred status write computed from what they found
// and how they ended.
func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request) (out outcome.Outcome) {
	t := &tenancyv1.Tenant{}
	exists, err := r.status.Get(ctx, req.NamespacedName, t)
	if err != nil {
		return outcome.Of(err) // a read that failed is no deletion
	}
	if !exists {
		forgetMetrics(req.Name)
		r.sources.keepOnly(req.Name, nil)
		return outcome.Outcome{}
	}
	if !t.DeletionTimestamp.IsZero() {
		// Suspended or not: deleting is exactly what a user asked for. No
		// status is written: an error is returned and retried.
		return outcome.Of(r.finalize(ctx, t))
	}
	if operate.IsSuspended(t.Spec.Suspend) {
		return outcome.Of(r.suspend(ctx, t))
	}

	s := r.newScope(t)
	defer func() { out = r.finish(ctx, s, out) }()
	// The finalizer goes on before any namespace exists, so no namespace can
	// outlive a Tenant without its policy being applied.
	if _, err := finalizer.Ensure(ctx, r.client, t, Finalizer); err != nil {
		return outcome.Of(err)
	}
	if err := r.readRequests(ctx, s); err != nil {
		return outcome.Of(err)
	}
	return r.runSteps(ctx, s)
}

// finish writes the Tenant's status computed from what the steps found and
// how they ended, then its requests' statuses, each only when it differs,
// and returns the outcome the reconcile ends with. After a conflict nothing
// is written: what was read is stale, and the reconcile runs again soon.
func (r *Reconciler) finish(ctx context.Context, s *scope, out outcome.Outcome) outcome.Outcome {
	if !out.WritesStatus() {
		return out
	}
	next := computeStatus(s.t, s.obs, out)
	recordMetrics(s.t, next)
	if _, err := r.status.Patch(ctx, s.t, next); err != nil {
		return out.And(err)
	}
	if err := r.reportRequests(ctx, s, next, out); err != nil {
		return out.And(err)
	}
	switch {
	case out.Kind() != outcome.Done:
		return out
	case s.obs.blocked():
		// A person must act, as the status (or a request's) says. What
		// blocks it is outside the cache: its removal is no event.
		return outcome.RequeueAfter(setup.Jitter(setup.ForeignChildRetry))
	case conditions.IsTrue(next.Conditions, conditions.Ready):
		// Look again now and then: a safety net for a change any watch might
		// have missed. An unchanged tenant costs cache reads only.
		return outcome.RequeueAfter(setup.Jitter(r.reverify))
	}
	return out
}

// suspend writes, once, that the tenant is suspended, and nothing else: its
// namespaces and everything in them stay as they are, requests wait, and no
// periodic look is scheduled. Resuming is a generation change.
func (r *Reconciler) suspend(ctx context.Context, t *tenancyv1.Tenant) error {
	next := *t.Status.DeepCopy()
	next.ObservedGeneration = t.Generation
	operate.Suspend(&next.Conditions, t.Generation)
	_, err := r.status.Patch(ctx, t, next)
	return err
}

// runSteps runs the sub-reconcilers in order: the namespaces
// (tenant_namespaces.go); what each holds, the per-tenant ClusterRole and
// the release of the namespaces the spec dropped (tenant_children.go,
// tenant_release.go); the pods that came before the Pod Security level
// (podsecurity.go); the ServiceAccount subjects (tenant_subjects.go). The
// first error, or a write that lost a race, stops them.
func (r *Reconciler) runSteps(ctx context.Context, s *scope) outcome.Outcome {
	for _, step := range []func(context.Context, *scope) error{
		r.reconcileNamespaces,
		r.reconcileContents,
		r.checkPodSecurity,
		r.checkSubjects,
	} {
		if err := step(ctx, s); err != nil {
			return outcome.Of(err)
		}
		if s.raced != nil {
			return outcome.RaceLost()
		}
	}
	return outcome.Outcome{}
}

// scope is one reconcile of one Tenant. The writes of a round only read it:
// what they found comes back as values (found), which the round records
// here in order, on the reconcile's own goroutine.
type scope struct {
	t   *tenancyv1.Tenant
	obs *observation
	// raced is the first write that lost a race: someone wrote the object
	// since the cache saw it (409 Conflict). The steps stop, and the
	// reconcile is retried at once without a status.
	raced error
	// wasReady are the namespaces the last status reported Ready: they exist,
	// so a cache miss on one of them means the cache is behind.
	wasReady map[string]bool
	// settled says the last status was written for this generation: every
	// child it asked for was in place.
	settled bool
	// names are the tenant's namespaces: the spec's, then those granted to
	// requests (sel). requests are the requests in the tenant's namespaces;
	// strays, those whose status names the Tenant from a namespace it no
	// longer holds.
	names            []string
	sel              selection
	requests, strays []*tenancyv1.NamespaceRequest
	// quota is the plan of quota.tenant; nil without it (tenant_quota.go).
	quota *quotaPlan
	// waiting are the namespaces kept although their request is gone, each
	// with the requests in it that hold namespaces (waitingNamespaces).
	waiting map[string][]string
	// copies is what each item of spec.copies needs (copies.go).
	copies []copyPlan
}

func (r *Reconciler) newScope(t *tenancyv1.Tenant) *scope {
	s := &scope{
		t:        t,
		wasReady: map[string]bool{},
		settled:  t.Status.ObservedGeneration == t.Generation,
	}
	s.grant(selection{})
	for _, ns := range t.Status.Namespaces {
		if ns.State == tenancyv1.NamespaceReady {
			s.wasReady[ns.Name] = true
		}
	}
	return s
}

// grant makes the namespaces sel granted the tenant's, after the spec's.
func (s *scope) grant(sel selection) {
	s.sel = sel
	s.names = append(namespaceNames(s.t), sel.namespaces...)
	s.obs = newObservation(s.names, sel.requestedBy)
}

// A write is one task of a round: it keeps one object, or a short chain of
// objects that must be written in order (a ClusterRole, then its binding),
// one request at a time. Its error is a failure; what it found that is none
// (a name someone else holds, an object the API server refused, a race
// lost) it reports as a found.
type write func(context.Context) (found, error)

// found is what one write found, classified where it happened. The zero
// value is "done, nothing to report".
type found struct {
	// namespace is where the write was; "" for the cluster-wide RBAC objects.
	namespace string
	// state and message: the namespace's own state, found by the write of
	// the namespace itself.
	state   tenancyv1.NamespaceState
	message string
	// uid is the namespace's UID, when the write found it the tenant's.
	uid types.UID
	// conflict: an object someone else holds under the name Trellis gives
	// it; it is left untouched.
	conflict string
	// refused: objects the API server refused to store as Trellis wrote them.
	refused []string
	// raced: a 409 Conflict, retried at once (scope.raced).
	raced error
	// quota is the tenant's quota in the namespace, its usage to be summed.
	quota *corev1.ResourceQuota
	// level is what the write of the namespace did to its Pod Security
	// enforce label (podsecurity.go).
	level levelWrite
	// held: whether the namespace is the tenant's once the write of the
	// namespace itself is done; told by that write only.
	held hold
	// copiesUndone are the items of spec.copies (copyKey) whose copy the
	// write could not make as wanted (a conflict, a refusal).
	copiesUndone []string
}

// hold is what the write of a namespace found of whose it is.
type hold int

const (
	// holdUntold: the write did not get to tell (it failed, or it is not the
	// namespace's own write).
	holdUntold hold = iota
	// holdYes: the namespace exists, is the tenant's and is not being deleted.
	holdYes
	// holdNo: it is not the tenant's (someone else's, a protected name, being
	// deleted, or not made).
	holdNo
)

// then adds what a later write of the same chain found.
func (f found) then(next found) found {
	if f.conflict == "" {
		f.conflict = next.conflict
	}
	f.refused = append(f.refused, next.refused...)
	f.copiesUndone = append(f.copiesUndone, next.copiesUndone...)
	if f.raced == nil {
		f.raced = next.raced
	}
	return f
}

// inOrder runs writes one after the other, as one write: it stops at the
// first that fails or loses a race, and adds up what they found.
func inOrder(writes ...write) write {
	return func(ctx context.Context) (found, error) {
		var f found
		for i, w := range writes {
			next, err := w(ctx)
			if i == 0 {
				f = next
			} else {
				f = f.then(next)
			}
			if err != nil || f.raced != nil {
				return f, err
			}
		}
		return f, nil
	}
}

// runRound runs writes side by side, at most maxParallelRequests at a time,
// then records what each found in the order given, so the status does not
// depend on which answer came first; a write that failed records what the
// others found all the same. It returns the first error.
func (s *scope) runRound(ctx context.Context, writes []write) error {
	results := make([]found, len(writes))
	var g errgroup.Group
	g.SetLimit(maxParallelRequests)
	for i, w := range writes {
		g.Go(func() (err error) {
			results[i], err = w(ctx)
			return err
		})
	}
	err := g.Wait()
	for _, f := range results {
		s.obs.record(f, quotaKeys(s.t))
		if s.raced == nil {
			s.raced = f.raced
		}
	}
	return err
}
