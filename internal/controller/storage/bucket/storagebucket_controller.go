// Package bucket reconciles StorageBuckets: a bucket in an ObjectStore,
// created, health-checked on a schedule and on external events, given the
// settings it declares, and deleted or kept by its deletion policy.
// storage.Controller registers it beside the ObjectStore and BucketAccess
// controllers.
package bucket

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
	"sigs.k8s.io/controller-runtime/pkg/source"

	storagev1 "github.com/trellis-dev/trellis/api/storage/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/finalizer"
	"github.com/trellis-dev/trellis/internal/controller/operate"
	"github.com/trellis-dev/trellis/internal/controller/outcome"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/controller/status"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/s3"
)

// bucketController names the controller: the controller label of
// controller-runtime's metrics and trellis_reconcile_conflicts_total.
const bucketController = "storagebucket"

// defaultInterval is the health-check interval of a bucket that sets none.
const defaultInterval = 60 * time.Second

// bucketStatusEvents: Ready, a person needed, and a store that stopped answering.
// Creating and waiting for a store's first check are routine.
var bucketStatusEvents = []status.EventRule{
	{Condition: conditions.Ready, Status: metav1.ConditionTrue, Type: corev1.EventTypeNormal},
	{Condition: conditions.Stalled, Status: metav1.ConditionTrue, Type: corev1.EventTypeWarning},
	{Condition: conditions.Reconciling, Status: metav1.ConditionTrue, Type: corev1.EventTypeWarning,
		Except: []string{ReasonCreating, stores.ReasonStoreNotReady, ReasonDeleting}},
}

// Reconciler reconciles StorageBuckets.
type Reconciler struct {
	client     client.Client
	recorder   recorder.EventRecorder
	status     *status.Patcher[*storagev1.StorageBucket, storagev1.StorageBucketStatus]
	stores     *stores.Clients
	schedule   *Schedule
	namespaces *stores.NamespaceLabels
	// guards remembers under which public-access rule each bucket's policy
	// was last checked (public_access.go).
	guards *publicAccessGuards
	// storeChecks asks the ObjectStore controller to check a store a bucket found down.
	storeChecks stores.StoreChecks
	// bucketEvents carries requests for an immediate check (the bucket-event receiver).
	bucketEvents <-chan event.TypedGenericEvent[*storagev1.StorageBucket]
	// accessEvents asks the BucketAccess controller to look at the accesses
	// of a bucket whose policy this controller rewrote.
	accessEvents chan<- event.TypedGenericEvent[*storagev1.BucketAccess]
}

// Config is what the StorageBucket reconciler shares with the other storage
// controllers.
type Config struct {
	Stores     *stores.Clients
	Namespaces *stores.NamespaceLabels
	// Schedule is when each bucket's next check is due; the bucket-event
	// receiver makes one due at once.
	Schedule *Schedule
	// StoreChecks asks the ObjectStore controller to check a store a bucket found down.
	StoreChecks stores.StoreChecks
	// BucketEvents carries requests for an immediate check (the bucket-event receiver).
	BucketEvents <-chan event.TypedGenericEvent[*storagev1.StorageBucket]
	// AccessEvents asks the BucketAccess controller to look at the accesses
	// of a bucket whose policy this controller rewrote.
	AccessEvents chan<- event.TypedGenericEvent[*storagev1.BucketAccess]
}

// New is the StorageBucket reconciler.
func New(c client.Client, rec recorder.EventRecorder, cfg Config) *Reconciler {
	return &Reconciler{
		client: c, recorder: rec,
		status: status.NewPatcher(c, rec, func(b *storagev1.StorageBucket) *storagev1.StorageBucketStatus { return &b.Status }, bucketStatusEvents...),
		stores: cfg.Stores, schedule: cfg.Schedule, namespaces: cfg.Namespaces, guards: newPublicAccessGuards(),
		storeChecks: cfg.StoreChecks, bucketEvents: cfg.BucketEvents, accessEvents: cfg.AccessEvents,
	}
}

// Status is the reconciler's status patcher, which follows the cache
// (status.Patcher.FollowCache).
func (r *Reconciler) Status() *status.Patcher[*storagev1.StorageBucket, storagev1.StorageBucketStatus] {
	return r.status
}

// +kubebuilder:rbac:groups=storage.trellis.dev,resources=storagebuckets,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=storage.trellis.dev,resources=storagebuckets/status,verbs=get;patch
// +kubebuilder:rbac:groups=storage.trellis.dev,resources=storagebuckets/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get

// SetupWithManager wires the watches: StorageBuckets (spec changes and the
// start of a deletion), their store's Ready condition and spec (a store that
// came back re-checks its unhealthy buckets; a changed selector re-decides
// who may use it), BucketAccesses that go (a deletion waits for them), and
// the bucket-event receiver, an external event source. Two more spare a
// person an interval's wait: a StorageBucket that starts or ends its
// deletion re-checks the others that want its bucket (their Conflict
// message changes), and a BucketAccess whose keys change re-checks its
// namespace's buckets whose policy was refused (it may name the new key).
// Periodic checks are RequeueAfter results.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts setup.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(bucketController).
		For(&storagev1.StorageBucket{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, operate.ReconcileRequested))).
		Watches(&storagev1.StorageBucket{}, handler.EnqueueRequestsFromMapFunc(r.othersWantingBucket), builder.WithPredicates(claimantLeaving)).
		Watches(&storagev1.ObjectStore{}, handler.EnqueueRequestsFromMapFunc(r.bucketsOfStore), builder.WithPredicates(stores.StoreReadyChanged)).
		Watches(&storagev1.BucketAccess{}, handler.EnqueueRequestsFromMapFunc(bucketOfAccess), builder.WithPredicates(stores.AccessGone)).
		Watches(&storagev1.BucketAccess{}, handler.EnqueueRequestsFromMapFunc(r.refusedPoliciesOf), builder.WithPredicates(accessKeysChanged)).
		WatchesRawSource(source.Channel(r.bucketEvents, &handler.TypedEnqueueRequestForObject[*storagev1.StorageBucket]{})).
		WithOptions(opts.ControllerOptions()).
		Complete(r)
}

// claimantLeaving passes a StorageBucket whose deletion starts, and its
// final deletion: whoever waits for its bucket reads something else now.
var claimantLeaving = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp().IsZero() && !e.ObjectNew.GetDeletionTimestamp().IsZero()
	},
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// othersWantingBucket are the other StorageBuckets that name the same bucket
// in the same store.
func (r *Reconciler) othersWantingBucket(ctx context.Context, o client.Object) []reconcile.Request {
	b, ok := o.(*storagev1.StorageBucket)
	if !ok {
		return nil
	}
	list := &storagev1.StorageBucketList{}
	if err := r.client.List(ctx, list, client.MatchingFields{stores.StoreBucketIndex: stores.StoreBucketKey(b.Spec.StoreRef.Name, stores.BucketName(b))}); err != nil {
		log.FromContext(ctx).Error(err, "listing the StorageBuckets that want a bucket", "bucket", stores.BucketName(b))
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if list.Items[i].UID != b.UID {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

// accessKeysChanged passes a BucketAccess whose recorded keys changed.
var accessKeysChanged = predicate.Funcs{
	CreateFunc: func(event.CreateEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*storagev1.BucketAccess)
		n, ok2 := e.ObjectNew.(*storagev1.BucketAccess)
		return ok1 && ok2 && (o.Status.AccessKeyID != n.Status.AccessKeyID ||
			!slices.Equal(stores.KeyIDs(o.Status.RetiringKeys), stores.KeyIDs(n.Status.RetiringKeys)))
	},
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}

// refusedPoliciesOf are the StorageBuckets of the access's namespace whose
// policy was refused for its principals.
func (r *Reconciler) refusedPoliciesOf(ctx context.Context, o client.Object) []reconcile.Request {
	list := &storagev1.StorageBucketList{}
	if err := r.client.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
		log.FromContext(ctx).Error(err, "listing the StorageBuckets of a namespace whose keys changed", "namespace", o.GetNamespace())
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if c := conditions.Get(list.Items[i].Status.Conditions, conditions.Ready); c != nil && c.Reason == ReasonPolicyRefused {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return reqs
}

func bucketOfAccess(_ context.Context, o client.Object) []reconcile.Request {
	a, ok := o.(*storagev1.BucketAccess)
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: a.Namespace, Name: a.Spec.BucketRef.Name}}}
}

func (r *Reconciler) bucketsOfStore(ctx context.Context, o client.Object) []reconcile.Request {
	list := &storagev1.StorageBucketList{}
	if err := r.client.List(ctx, list, client.MatchingFields{stores.BucketStoreIndex: o.GetName()}); err != nil {
		// A map function cannot return an error; the buckets' own schedule
		// still checks them.
		log.FromContext(ctx).Error(err, "listing the StorageBuckets of a store whose state changed", "store", o.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

func interval(b *storagev1.StorageBucket) time.Duration {
	if b.Spec.HealthCheck != nil && b.Spec.HealthCheck.IntervalSeconds >= 10 {
		return time.Duration(b.Spec.HealthCheck.IntervalSeconds) * time.Second
	}
	return defaultInterval
}

// bucketObservation is what one reconcile of a StorageBucket saw.
type bucketObservation struct {
	stores.Observed
	// checked is what a check of the bucket found, or, while the bucket is
	// being created, the intent to create it; nil when no check ran (none
	// was due, or the reconcile failed first).
	checked *checkResult
	// waits says why a deletion waits (nil: it does not).
	waits *conditions.Summary
}

// Reconcile ensures one bucket exists and is ours, and checks its health
// when a check is due or the bucket is not settled.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return r.reconcile(ctx, req).Result(bucketController)
}

// reconcile is the shape every kind shares (docs/architecture.md, "One
// reconcile"): the read, the deletion or the finalizer, the check when one
// is due, then one deferred status write computed from what it observed
// and how it ended.
func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request) (out outcome.Outcome) {
	b := &storagev1.StorageBucket{}
	found, err := r.status.Get(ctx, req.NamespacedName, b)
	if err != nil {
		return outcome.Of(err) // a read that failed is no deletion
	}
	if !found {
		r.schedule.Forget(req.NamespacedName)
		r.guards.forget(req.NamespacedName)
		forgetBucketMetrics(req.NamespacedName)
		return outcome.Outcome{}
	}
	if b.DeletionTimestamp.IsZero() && operate.IsSuspended(b.Spec.Suspend) {
		// No check is due while suspended: none is scheduled.
		r.schedule.Forget(req.NamespacedName)
		// Deletion does not come here: deleting is exactly what a user
		// asked for, and the deletion policy runs as always.
		next := *b.Status.DeepCopy()
		next.ObservedGeneration = b.Generation
		operate.Suspend(&next.Conditions, b.Generation)
		_, err := r.status.Patch(ctx, b, next)
		return outcome.Of(err)
	}
	obs := &bucketObservation{}
	defer func() {
		out = stores.Finish(ctx, r.status, r.recorder, b, &obs.Observed, out,
			func(o outcome.Outcome) storagev1.StorageBucketStatus { return computeBucketStatus(b, obs, o) })
	}()
	if !b.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, b, obs)
	}
	if _, err := finalizer.Ensure(ctx, r.client, b, stores.BucketFinalizer); err != nil {
		return outcome.Of(err)
	}

	key, uid, every := req.NamespacedName, string(b.UID), interval(b)
	settled := b.Status.ObservedGeneration == b.Generation && b.Status.BucketName != "" &&
		conditions.IsTrue(b.Status.Conditions, conditions.Ready) &&
		b.Status.LastHandledReconcileAt == operate.RequestedAt(b)
	if wait := r.schedule.Wait(key, uid, every); settled && wait > 0 && !r.publicAccessChanged(ctx, b) {
		// A healthy bucket seen by a start-up listing, a resync or a store
		// event: its check is not due, and one now would bunch checks
		// together. (Buckets that are not Ready are looked at on any event:
		// a store that changed state is what they wait for; and so are all
		// of a store whose public-access fields changed.) Nothing was
		// observed, so nothing is written.
		return outcome.RequeueAfter(wait)
	}

	start := time.Now()
	res, err := r.check(ctx, b, obs)
	if err != nil {
		return outcome.Of(err)
	}
	obs.checked = &res
	r.schedule.Checked(key, uid, every)
	recordCheck(key, res.summary.Reason, res.summary.Progress == conditions.Done, time.Since(start))
	if e := res.event; e != nil {
		typ := corev1.EventTypeNormal
		if e.warning {
			typ = corev1.EventTypeWarning
		}
		obs.Did(typ, e.reason, "Check", e.format, stores.BucketName(b))
		if e.ready {
			obs.Told = append(obs.Told, conditions.Ready)
		}
	}
	if res.settings != nil {
		obs.Done = append(obs.Done, stores.GrantFixActions(stores.BucketName(b), res.settings.grantFixes)...)
		if r := res.settings.restricted; len(r) > 0 {
			obs.Did(corev1.EventTypeWarning, ReasonPublicAccessRemoved, "Revoke",
				"took %s out of the policy of bucket %s: ObjectStore %s blocks public access for this namespace, and they granted beyond its BucketAccesses' keys",
				strings.Join(r, ", "), stores.BucketName(b), b.Spec.StoreRef.Name)
		}
	}
	if res.settings != nil && len(res.settings.changed) > 0 {
		obs.Did(corev1.EventTypeNormal, "BucketSettingsApplied", "Apply", "set %s of bucket %s", strings.Join(res.settings.changed, ", "), stores.BucketName(b))
		if slices.Contains(res.settings.changed, settingPolicy) {
			if err := r.recheckAccesses(ctx, b); err != nil {
				return outcome.Of(err)
			}
		}
	}
	return outcome.RequeueAfter(r.schedule.Wait(key, uid, every))
}

// check finds out whether the bucket exists, is ours and is healthy. Store
// errors are states, not reconcile errors: the schedule and the store-level
// check decide when to try again. Errors of the API server are returned.
func (r *Reconciler) check(ctx context.Context, b *storagev1.StorageBucket, obs *bucketObservation) (checkResult, error) {
	name := stores.BucketName(b)
	other, err := r.otherClaimant(ctx, b, name)
	if err != nil {
		return checkResult{}, err
	}
	if other != nil {
		return blocked(ReasonConflict, claimedBy(name, other)), nil
	}
	store, state, err := stores.UsableStore(ctx, r.client, b.Spec.StoreRef.Name)
	if store == nil || err != nil {
		return checkResult{summary: state}, err
	}
	access, res, err := r.storeAccessOf(ctx, store, b)
	if err != nil || !access.Use {
		return res, err
	}
	// Whom the policy may grant to is read before the store is asked, so an
	// API error here leaves nothing done in the store unrecorded.
	guard := keyOf(b, store, access.Public)
	guardDue := r.guards.due(client.ObjectKeyFromObject(b), guard)
	principals, err := r.principalRuleOf(ctx, b, store, access, guardDue)
	if err != nil {
		return checkResult{}, err
	}
	c, err := r.stores.Client(ctx, store)
	if err != nil {
		reason, msg := stores.ClassifyError(err)
		return blocked(string(reason), fmt.Sprintf("ObjectStore %s: %s", store.Name, msg)), nil
	}
	claim := b.Status.Claim
	if b.Status.BucketName != name {
		claim = ""
	}
	check := bucketCheck{
		s3: c, store: store.Name, bucket: name, owner: s3.Owner{UID: string(b.UID), Namespace: b.Namespace}, claim: claim,
		namespaceUID: func(ctx context.Context) (string, error) {
			uid, err := r.namespaces.UID(ctx, b.Namespace)
			return string(uid), err
		},
		adopt: ptr.Deref(b.Spec.AdoptExisting, false), mayAdopt: access.Adopt,
		foreignName: b.Spec.BucketName != "" && !stores.OwnBucketName(b.Namespace, b.Spec.BucketName),
		probe:       b.Spec.HealthCheck != nil && ptr.Deref(b.Spec.HealthCheck.Probe, false),
		recordIntent: func(ctx context.Context) error {
			return r.recordCreating(ctx, b, obs, name, store.Name)
		},
	}
	res, err = check.run(ctx)
	if err != nil {
		return checkResult{}, err
	}
	settings := settingsOf(b)
	// Without a spec.policy, the policy is read only when the rule it is
	// held to changed (public_access.go).
	// A bucket this check created has none.
	created := res.event != nil && res.event.reason == ReasonBucketCreated
	settings.restrictOnly = principals != nil && settings.policy == "" && !created
	if res.summary.Progress == conditions.Done && (len(settings.declared()) > 0 || settings.restrictOnly) {
		settings.s3, settings.store, settings.bucket, settings.principals = c, store.Name, name, principals
		settings.lockPolicy = func() func() { return r.stores.LockPolicy(store.Name, name) }
		settings.grants = r.stores.GrantsOf(r.client, store, name)
		applied := settings.apply(ctx)
		res.settings = &applied
		res.storeDown = applied.storeDown
		if sum := applied.summary(); sum.Progress != conditions.Done {
			res.summary = sum
		}
		if !applied.restrictFailed && !applied.storeDown {
			r.guards.checked(client.ObjectKeyFromObject(b), guard)
		}
	} else if res.summary.Progress == conditions.Done {
		r.guards.checked(client.ObjectKeyFromObject(b), guard)
	}
	if res.storeDown {
		r.storeChecks.Request(ctx, store)
	}
	return res, nil
}

// storeAccessOf reads what the store lets the namespace do. A namespace the
// store is not opened to gets the bucket's state and no store request.
func (r *Reconciler) storeAccessOf(ctx context.Context, store *storagev1.ObjectStore, b *storagev1.StorageBucket) (stores.Access, checkResult, error) {
	nsLabels, err := r.namespaces.Get(ctx, b)
	if err != nil {
		return stores.Access{}, checkResult{}, err
	}
	access, err := stores.AccessOf(store, nsLabels)
	if err != nil {
		return stores.Access{}, blocked(stores.ReasonNamespaceNotAllowed, fmt.Sprintf("ObjectStore %s has an invalid %v; ask the platform team", store.Name, err)), nil
	}
	if !access.Use {
		return access, blocked(stores.ReasonNamespaceNotAllowed, fmt.Sprintf("ObjectStore %s is not open to namespace %s (its namespaceSelector does not select it); ask the platform team to open it, or use another store", store.Name, b.Namespace)), nil
	}
	return access, checkResult{}, nil
}

// principalRuleOf is whom the bucket's policy may grant to: nil (anyone)
// when the store lets the namespace grant to anyone, or when the bucket
// declares no policy and its policy is not due a check (guardDue); else the
// principals of the keys the namespace's BucketAccesses hold in the store,
// current and retiring, as their status records them.
func (r *Reconciler) principalRuleOf(ctx context.Context, b *storagev1.StorageBucket, store *storagev1.ObjectStore, access stores.Access, guardDue bool) (*principalRule, error) {
	if access.Public || b.Spec.Policy == "" && !guardDue {
		return nil, nil
	}
	list := &storagev1.BucketAccessList{}
	if err := r.client.List(ctx, list, client.InNamespace(b.Namespace)); err != nil {
		return nil, fmt.Errorf("listing the BucketAccesses of namespace %s: %w", b.Namespace, err)
	}
	rule := &principalRule{store: store.Name, namespace: b.Namespace, held: map[string]bool{},
		allowed: store.Spec.PublicAccess == storagev1.PublicAccessAllowed}
	for _, a := range list.Items {
		if a.Status.StoreName != store.Name {
			continue
		}
		// By principal: how a policy names the key (an ARN on IAM stores).
		if current, ok := stores.CurrentKey(&a.Status); ok {
			rule.held[current.PrincipalName()] = true
		}
		for _, p := range stores.PrincipalNames(a.Status.RetiringKeys) {
			rule.held[p] = true
		}
	}
	return rule, nil
}

// publicAccessChanged reports whether the public-access fields of the
// bucket's store changed since its last check (public_access.go).
func (r *Reconciler) publicAccessChanged(ctx context.Context, b *storagev1.StorageBucket) bool {
	store := &storagev1.ObjectStore{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: b.Spec.StoreRef.Name}, store); err != nil {
		return false // the check that is due sees it
	}
	return r.guards.storeChanged(b, store)
}

// recordCreating writes, before the bucket is created, that this
// StorageBucket is creating it (status claim Creating): a bucket created
// but not yet tagged is then recognised as ours, whatever happens between.
// This write cannot wait for the deferred one.
func (r *Reconciler) recordCreating(ctx context.Context, b *storagev1.StorageBucket, obs *bucketObservation, bucket, store string) error {
	obs.checked = &checkResult{claim: storagev1.BucketCreating, summary: conditions.Summary{Progress: conditions.Working, Reason: ReasonCreating,
		Message: fmt.Sprintf("creating bucket %s in %s", bucket, store)}}
	if _, err := r.status.Patch(ctx, b, computeBucketStatus(b, obs, outcome.Outcome{})); err != nil {
		obs.checked = nil // not on record: nothing is created
		return err
	}
	return nil
}

func blocked(reason, message string) checkResult {
	return checkResult{summary: conditions.Summary{Progress: conditions.Blocked, Reason: reason, Message: message}}
}

// otherClaimant returns another StorageBucket that holds, or has the first
// claim on, the same bucket in the same store: one that has already claimed it
// wins; otherwise the older one (creation time, then UID, so both sides agree).
// An unclaimed one that is Stalled (refused by the store, or in conflict
// itself) makes no move on the bucket, so it stands in no one's way: a
// namespace cannot block another's bucket by naming it first.
func (r *Reconciler) otherClaimant(ctx context.Context, b *storagev1.StorageBucket, bucket string) (*storagev1.StorageBucket, error) {
	list := &storagev1.StorageBucketList{}
	if err := r.client.List(ctx, list, client.MatchingFields{stores.StoreBucketIndex: stores.StoreBucketKey(b.Spec.StoreRef.Name, bucket)}); err != nil {
		return nil, fmt.Errorf("listing other claimants of bucket %s: %w", bucket, err)
	}
	mine := claims(b, bucket)
	for i := range list.Items {
		o := &list.Items[i]
		if o.UID == b.UID {
			continue
		}
		theirs := claims(o, bucket)
		if !theirs && o.Status.ObservedGeneration == o.Generation && conditions.IsTrue(o.Status.Conditions, conditions.Stalled) {
			continue
		}
		older := o.CreationTimestamp.Before(&b.CreationTimestamp) ||
			(o.CreationTimestamp.Equal(&b.CreationTimestamp) && o.UID < b.UID)
		if theirs && !mine || theirs == mine && older {
			return o, nil
		}
	}
	return nil, nil
}

// claimedBy says that another StorageBucket, alive, holds the bucket, and
// what follows if it is being deleted. (A bucket kept after its StorageBucket
// is gone is told by the check itself, from the bucket's ownership tags.)
func claimedBy(bucket string, other *storagev1.StorageBucket) string {
	msg := fmt.Sprintf("bucket %s is claimed by StorageBucket %s/%s", bucket, other.Namespace, other.Name)
	switch {
	case other.DeletionTimestamp.IsZero():
		return msg
	case other.Spec.DeletionPolicy == storagev1.DeletionDelete:
		return msg + ", which is being deleted with deletionPolicy: Delete: the bucket goes once it is empty, and this StorageBucket can then create it"
	default:
		return msg + fmt.Sprintf(", which is being deleted with deletionPolicy: Retain: the bucket stays, kept for namespace %s (its ownership tags), which may take it back", other.Namespace)
	}
}

// claims reports whether b's status records a claim (or a creation in
// progress) on the bucket.
func claims(b *storagev1.StorageBucket, bucket string) bool {
	return b.Status.BucketName == bucket && b.Status.Claim != ""
}

// finalize applies the deletion policy. Retain: the bucket stays. Delete: an
// empty bucket we own is deleted; a non-empty one, or a store that cannot be
// reached, holds the deletion with the reason in status.
func (r *Reconciler) finalize(ctx context.Context, b *storagev1.StorageBucket, obs *bucketObservation) outcome.Outcome {
	wait, err := r.accessesRemain(ctx, b)
	if err != nil {
		return outcome.Of(err)
	}
	if wait != nil {
		obs.waits = wait
		// The deletion of each BucketAccess is an event; this is the safety net.
		return outcome.RequeueAfter(setup.Jitter(setup.ForeignChildRetry))
	}
	if b.Spec.DeletionPolicy == storagev1.DeletionDelete {
		res, err := r.deleteBucket(ctx, b)
		if err != nil {
			return outcome.Of(err)
		}
		if !res.done {
			obs.waits = &res.summary
			return outcome.RequeueAfter(setup.Jitter(res.retry))
		}
		if res.deleted {
			log.FromContext(ctx).Info("bucket deleted", "bucket", stores.BucketName(b))
			obs.Did(corev1.EventTypeNormal, "BucketDeleted", "Delete", "deleted empty bucket %s (deletionPolicy: Delete)", stores.BucketName(b))
		}
	} else if err := r.markRetained(ctx, b, obs); err != nil {
		return outcome.Of(err)
	}
	if err := finalizer.Remove(ctx, r.client, b, stores.BucketFinalizer); err != nil {
		return outcome.Of(err)
	}
	obs.Released = true
	r.schedule.Forget(client.ObjectKeyFromObject(b))
	forgetBucketMetrics(client.ObjectKeyFromObject(b))
	return outcome.Outcome{}
}

// markRetained makes sure a bucket kept by deletionPolicy Retain carries
// its namespace's tags, name and UID, so this namespace, and no other made
// later under its name, can take it back: buckets tagged by a Trellis that
// did not record them lack them. Best effort: a store that is missing, not
// Ready or does not answer does not hold the deletion (the bucket then
// needs the store's adoption leave to be taken back), and a Warning says
// so. An error of the API server (reading the store from the cache, or the
// namespace's UID) is returned: the deletion is tried again.
func (r *Reconciler) markRetained(ctx context.Context, b *storagev1.StorageBucket, obs *bucketObservation) error {
	name := stores.BucketName(b)
	if b.Status.Claim != storagev1.BucketClaimed || b.Status.BucketName != name {
		return nil
	}
	store, state, err := stores.UsableStore(ctx, r.client, b.Spec.StoreRef.Name)
	if err != nil {
		return err
	}
	problem := state.Message
	if store != nil {
		problem = ""
		nsUID, err := r.namespaces.UID(ctx, b.Namespace)
		if err != nil {
			return err
		}
		mine := s3.Owner{UID: string(b.UID), Namespace: b.Namespace, NamespaceUID: string(nsUID)}
		c, err := r.stores.Client(ctx, store)
		if err == nil {
			var owner s3.Owner
			if owner, err = c.Owner(ctx, name); err == nil && owner.UID == mine.UID && owner != mine {
				err = c.SetOwner(ctx, name, mine)
			}
		}
		if err != nil {
			_, problem = stores.ClassifyError(err)
		}
	}
	if problem != "" {
		obs.Did(corev1.EventTypeWarning, "RetainedUntagged", "Delete",
			"bucket %s is kept, but its namespace tags could not be checked (%s): taking it back may need the store's adoption leave", name, problem)
	}
	return nil
}

// recheckAccesses has the BucketAccesses of a bucket look at their grants
// now: the policy was rewritten, maybe because someone had replaced it, and
// took their grants with it.
func (r *Reconciler) recheckAccesses(ctx context.Context, b *storagev1.StorageBucket) error {
	list := &storagev1.BucketAccessList{}
	if err := r.client.List(ctx, list, client.InNamespace(b.Namespace), client.MatchingFields{stores.AccessBucketIndex: b.Name}); err != nil {
		return fmt.Errorf("listing the BucketAccesses of StorageBucket %s: %w", b.Name, err)
	}
	for i := range list.Items {
		select {
		case r.accessEvents <- event.TypedGenericEvent[*storagev1.BucketAccess]{Object: &list.Items[i]}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// accessesRemain holds the deletion of a StorageBucket while BucketAccesses
// use it: each must first revoke its key and take its grant out of the
// bucket's policy, which needs the bucket. It returns nil when none remain.
func (r *Reconciler) accessesRemain(ctx context.Context, b *storagev1.StorageBucket) (*conditions.Summary, error) {
	list := &storagev1.BucketAccessList{}
	if err := r.client.List(ctx, list, client.InNamespace(b.Namespace), client.MatchingFields{stores.AccessBucketIndex: b.Name}); err != nil {
		return nil, fmt.Errorf("listing the BucketAccesses of StorageBucket %s: %w", b.Name, err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	names := make([]string, 0, len(list.Items))
	leaving := true
	for _, a := range list.Items {
		names = append(names, a.Name)
		leaving = leaving && !a.DeletionTimestamp.IsZero()
	}
	slices.Sort(names)
	if len(names) > 5 {
		names = append(names[:5], fmt.Sprintf("and %d more", len(list.Items)-5))
	}
	if leaving {
		return &conditions.Summary{Progress: conditions.Working, Reason: stores.ReasonInUse,
			Message: fmt.Sprintf("deletion waits for BucketAccesses %s to revoke their keys", strings.Join(names, ", "))}, nil
	}
	return &conditions.Summary{Progress: conditions.Blocked, Reason: stores.ReasonInUse,
		Message: fmt.Sprintf("deletion waits: BucketAccesses %s still use this bucket; delete them first (their keys are revoked with them)", strings.Join(names, ", "))}, nil
}

// deleteBucket deletes the bucket if it is ours and empty, or says why not.
// A store that is not Ready is not asked: its own check says when it is back,
// and that re-queues its buckets, this one included.
func (r *Reconciler) deleteBucket(ctx context.Context, b *storagev1.StorageBucket) (deletionResult, error) {
	name := stores.BucketName(b)
	if b.Status.Claim == "" || b.Status.BucketName != name {
		// Never created nor claimed by this StorageBucket: nothing of ours to delete.
		return deletionResult{done: true}, nil
	}
	store, state, err := stores.UsableStore(ctx, r.client, b.Spec.StoreRef.Name)
	if err != nil {
		return deletionResult{}, err
	}
	if store == nil {
		if state.Reason == stores.ReasonStoreNotFound {
			// The store is gone, and its buckets with it as far as Trellis can tell.
			return deletionResult{done: true}, nil
		}
		state.Message += fmt.Sprintf("; bucket %s will be deleted once the store answers, or set deletionPolicy: Retain to let the StorageBucket go", name)
		return deletionResult{summary: state, retry: time.Minute}, nil
	}
	c, err := r.stores.Client(ctx, store)
	if err != nil {
		reason, msg := stores.ClassifyError(err)
		return deletionResult{retry: time.Minute, summary: conditions.Summary{Progress: conditions.Blocked, Reason: string(reason),
			Message: fmt.Sprintf("ObjectStore %s: %s; bucket %s cannot be deleted until this is fixed, or set deletionPolicy: Retain", store.Name, msg, name)}}, nil
	}
	return bucketDeletion{s3: c, store: store.Name, bucket: name, uid: string(b.UID), claim: b.Status.Claim}.run(ctx), nil
}
