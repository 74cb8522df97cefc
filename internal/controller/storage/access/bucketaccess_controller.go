// Package access reconciles BucketAccesses: a key of its own to one
// StorageBucket's bucket, for a workload, granted in the bucket's policy,
// written to a Secret, rotated, and revoked with the BucketAccess.
// storage.Controller registers it beside the ObjectStore and StorageBucket
// controllers.
package access

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
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
	"github.com/trellis-dev/trellis/internal/controller/apierr"
	"github.com/trellis-dev/trellis/internal/controller/children"
	"github.com/trellis-dev/trellis/internal/controller/finalizer"
	"github.com/trellis-dev/trellis/internal/controller/operate"
	"github.com/trellis-dev/trellis/internal/controller/outcome"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/controller/status"
	"github.com/trellis-dev/trellis/internal/controller/storage/stores"
	"github.com/trellis-dev/trellis/internal/s3"
)

// Reasons of a BucketAccess's conditions besides the store's (StoreNotReady,
// StoreUnreachable, AccessDenied, NamespaceNotAllowed, ...).
const (
	ReasonGranted = "Granted"
	// ReasonIssuing: the key is being made (a routine step).
	ReasonIssuing = "Issuing"
	// ReasonBucketNotFound: no StorageBucket of that name in the namespace.
	ReasonBucketNotFound = "BucketNotFound"
	// ReasonBucketNotReady: the StorageBucket has not claimed its bucket yet.
	ReasonBucketNotReady = "BucketNotReady"
	// ReasonBucketDeleting: the StorageBucket is being deleted.
	ReasonBucketDeleting = "BucketDeleting"
	// ReasonAccessNotSupported: the store's type has no account driver.
	ReasonAccessNotSupported = "AccessNotSupported"
	// ReasonSecretConflict: a Secret of that name exists and is not ours.
	ReasonSecretConflict = "SecretConflict"
	// ReasonSecretRejected: the API server refuses to write (or delete) the
	// Secret: invalid, or forbidden by an admission policy, a quota or RBAC.
	ReasonSecretRejected = "SecretRejected"
	// ReasonRevoking: the key is being revoked (deletion).
	ReasonRevoking = "Revoking"
	// ReasonGrantWidened: the store gives the key's account more than its
	// grant, by something Trellis did not make (a MinIO group).
	ReasonGrantWidened = "GrantWidened"
)

// accessController names the controller: the controller label of
// controller-runtime's metrics and trellis_reconcile_conflicts_total.
const accessController = "bucketaccess"

// defaultGracePeriod is how long a replaced key keeps working by default.
const defaultGracePeriod = time.Hour

// accessVerifyInterval is how often a Ready BucketAccess checks that its
// Secret and its grant are still there (neither is watched: the manager has
// no cluster-wide watch on Secrets, and stores send no events for policies).
const accessVerifyInterval = 10 * time.Minute

// accessStoreRetry is how soon an access tries again after a store error.
const accessStoreRetry = 10 * time.Second

// accessStatusEvents: Ready, a person needed, and trouble that heals;
// issuing a key, waiting for the bucket or the store, and revoking are routine.
var accessStatusEvents = []status.EventRule{
	{Condition: conditions.Ready, Status: metav1.ConditionTrue, Type: corev1.EventTypeNormal},
	{Condition: conditions.Stalled, Status: metav1.ConditionTrue, Type: corev1.EventTypeWarning},
	{Condition: conditions.Reconciling, Status: metav1.ConditionTrue, Type: corev1.EventTypeWarning,
		Except: []string{ReasonIssuing, ReasonBucketNotReady, stores.ReasonStoreNotReady, ReasonRevoking}},
}

// Reconciler reconciles BucketAccesses.
type Reconciler struct {
	client     client.Client
	recorder   recorder.EventRecorder
	children   children.Clients
	status     *status.Patcher[*storagev1.BucketAccess, storagev1.BucketAccessStatus]
	stores     *stores.Clients
	namespaces *stores.NamespaceLabels
	// storeChecks asks the ObjectStore controller to check a store an access found down.
	storeChecks stores.StoreChecks
	// accessEvents carries requests to look now (a bucket policy rewritten).
	accessEvents <-chan event.TypedGenericEvent[*storagev1.BucketAccess]
	// trustChanges carries stores whose CA bundle changed, for the Secrets.
	trustChanges <-chan event.TypedGenericEvent[*storagev1.ObjectStore]
	now          func() time.Time
}

// Config is what the BucketAccess reconciler shares with the other storage
// controllers.
type Config struct {
	Stores     *stores.Clients
	Namespaces *stores.NamespaceLabels
	// StoreChecks asks the ObjectStore controller to check a store an access found down.
	StoreChecks stores.StoreChecks
	// AccessEvents carries the StorageBucket controller's requests to look
	// now (a bucket policy rewritten).
	AccessEvents <-chan event.TypedGenericEvent[*storagev1.BucketAccess]
	// TrustChanges carries the ObjectStore controller's stores whose
	// clients trust a new CA bundle, which their accesses' Secrets carry.
	TrustChanges <-chan event.TypedGenericEvent[*storagev1.ObjectStore]
}

// New is the BucketAccess reconciler; uncached reads Secrets past the cache.
func New(c client.Client, uncached client.Reader, rec recorder.EventRecorder, cfg Config) *Reconciler {
	return &Reconciler{
		client: c, recorder: rec, children: children.Clients{Cached: c, Uncached: uncached},
		status: status.NewPatcher(c, rec, func(a *storagev1.BucketAccess) *storagev1.BucketAccessStatus { return &a.Status }, accessStatusEvents...),
		stores: cfg.Stores, namespaces: cfg.Namespaces, storeChecks: cfg.StoreChecks, accessEvents: cfg.AccessEvents, trustChanges: cfg.TrustChanges, now: time.Now,
	}
}

// Status is the reconciler's status patcher, which follows the cache
// (status.Patcher.FollowCache).
func (r *Reconciler) Status() *status.Patcher[*storagev1.BucketAccess, storagev1.BucketAccessStatus] {
	return r.status
}

// +kubebuilder:rbac:groups=storage.trellis.dev,resources=bucketaccesses,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=storage.trellis.dev,resources=bucketaccesses/status,verbs=get;patch
// +kubebuilder:rbac:groups=storage.trellis.dev,resources=bucketaccesses/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create;patch;delete

// SetupWithManager watches BucketAccesses (spec changes and the start of a
// deletion), their StorageBucket's state (claimed, being deleted, gone), their
// store's Ready condition and CA bundle (trustChanges), and requests from
// the StorageBucket controller when it rewrote a bucket's policy. Secrets
// are not watched: that needs a cluster-wide watch on Secrets; a periodic
// check stands in for it.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts setup.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(accessController).
		For(&storagev1.BucketAccess{}, builder.WithPredicates(predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, operate.ReconcileRequested))).
		Watches(&storagev1.StorageBucket{}, handler.EnqueueRequestsFromMapFunc(r.accessesOfBucket), builder.WithPredicates(bucketStateChanged)).
		Watches(&storagev1.ObjectStore{}, handler.EnqueueRequestsFromMapFunc(r.accessesOfStore), builder.WithPredicates(stores.StoreReadyChanged)).
		WatchesRawSource(source.Channel(r.accessEvents, &handler.TypedEnqueueRequestForObject[*storagev1.BucketAccess]{})).
		WatchesRawSource(source.Channel(r.trustChanges, handler.TypedEnqueueRequestsFromMapFunc(
			func(ctx context.Context, store *storagev1.ObjectStore) []reconcile.Request {
				return r.accessesOfStore(ctx, store)
			}))).
		WithOptions(opts.ControllerOptions()).
		Complete(r)
}

// bucketStateChanged passes what a BucketAccess waits for in its
// StorageBucket: its creation and deletion, its claim, the start of its
// deletion, and whether it is Stalled.
var bucketStateChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*storagev1.StorageBucket)
		n, ok2 := e.ObjectNew.(*storagev1.StorageBucket)
		if !ok1 || !ok2 {
			return true
		}
		return o.Status.Claim != n.Status.Claim || o.Status.BucketName != n.Status.BucketName ||
			o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() ||
			conditions.IsTrue(o.Status.Conditions, conditions.Stalled) != conditions.IsTrue(n.Status.Conditions, conditions.Stalled)
	},
}

func (r *Reconciler) accessesOfBucket(ctx context.Context, o client.Object) []reconcile.Request {
	return r.listed(ctx, client.InNamespace(o.GetNamespace()), client.MatchingFields{stores.AccessBucketIndex: o.GetName()})
}

func (r *Reconciler) accessesOfStore(ctx context.Context, o client.Object) []reconcile.Request {
	return r.listed(ctx, client.MatchingFields{stores.AccessStoreIndex: o.GetName()})
}

func (r *Reconciler) listed(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
	list := &storagev1.BucketAccessList{}
	if err := r.client.List(ctx, list, opts...); err != nil {
		// A map function cannot return an error; the periodic check still comes.
		log.FromContext(ctx).Error(err, "listing BucketAccesses")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// Reconcile makes sure the BucketAccess's key exists, is granted on its
// bucket and nothing else, and is in its Secret; rotates it when
// keyVersion rises; revokes replaced keys after their grace period, and
// everything when the BucketAccess is deleted.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return r.reconcile(ctx, req).Result(accessController)
}

// reconcile is the shape every kind shares (docs/architecture.md, "One
// reconcile"): the read, the deletion or the finalizer, the key brought in
// line, then one deferred status write computed from what it observed and
// how it ended.
func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request) (out outcome.Outcome) {
	a := &storagev1.BucketAccess{}
	found, err := r.status.Get(ctx, req.NamespacedName, a)
	if err != nil {
		return outcome.Of(err) // a read that failed is no deletion
	}
	if !found {
		return outcome.Outcome{}
	}
	if a.DeletionTimestamp.IsZero() && operate.IsSuspended(a.Spec.Suspend) {
		// Deletion does not come here: deleting is exactly what a user
		// asked for, and the deletion policy runs as always.
		next := *a.Status.DeepCopy()
		next.ObservedGeneration = a.Generation
		operate.Suspend(&next.Conditions, a.Generation)
		_, err := r.status.Patch(ctx, a, next)
		return outcome.Of(err)
	}
	obs := &accessObservation{}
	defer func() {
		out = stores.Finish(ctx, r.status, r.recorder, a, &obs.Observed, out,
			func(o outcome.Outcome) storagev1.BucketAccessStatus { return computeAccessStatus(a, obs, o) })
	}()
	if !a.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, a, obs)
	}
	if _, err := finalizer.Ensure(ctx, r.client, a, stores.AccessFinalizer); err != nil {
		return outcome.Of(err)
	}
	res, err := r.sync(ctx, a, obs)
	// What was done before an error stays true (replaced keys revoked);
	// a key the Secret does not hold is not in res.
	obs.synced = &res
	if res.issued != nil {
		obs.Did(corev1.EventTypeNormal, "KeyIssued", "Issue", "issued key %s (keyVersion %d) and wrote it to Secret %s", res.issued.AccessKeyID, a.Spec.KeyVersion, a.Spec.SecretName)
	}
	for _, id := range res.revoked {
		obs.Did(corev1.EventTypeNormal, "KeyRevoked", "Revoke", "revoked replaced key %s", id)
	}
	if err != nil {
		return outcome.Of(err)
	}
	return r.requeue(res)
}

func (r *Reconciler) requeue(res accessResult) outcome.Outcome {
	wait := accessVerifyInterval
	switch {
	case res.summary.Progress == conditions.Blocked && (res.summary.Reason == ReasonSecretConflict || res.summary.Reason == ReasonSecretRejected):
		// Someone else's Secret, or a policy or quota, can go without an event.
		wait = setup.ForeignChildRetry
	case res.storeDown:
		// A store that is really down turns its Ready condition within a
		// second (storeChecks), and the next try sends it nothing; one
		// that failed a single request is tried again soon.
		wait = accessStoreRetry
	case res.summary.Progress != conditions.Done:
		wait = time.Minute
	}
	if !res.next.IsZero() {
		if until := res.next.Sub(r.now()); until < wait {
			// Exactly at the deadline, not before: revoking early breaks
			// workloads that were promised the grace period.
			return outcome.RequeueAfter(max(until, 0) + time.Second)
		}
	}
	return outcome.RequeueAfter(setup.Jitter(wait))
}

// sync brings the key, its grant and its Secret to what the spec says.
// Problems a person must fix, and store errors, are states; API errors are
// returned (with what was done before them: a key the Secret does not hold
// is never returned as issued).
func (r *Reconciler) sync(ctx context.Context, a *storagev1.BucketAccess, obs *accessObservation) (accessResult, error) {
	sb, res, err := r.bucketOf(ctx, a)
	if err != nil || sb == nil {
		return res, err
	}
	bucket := sb.Status.BucketName
	store, checked, err := stores.UsableStore(ctx, r.client, sb.Spec.StoreRef.Name)
	if err != nil || store == nil {
		return accessResult{summary: checked}, err
	}
	nsLabels, err := r.namespaces.Get(ctx, a)
	if err != nil {
		return accessResult{}, err
	}
	if access, err := stores.AccessOf(store, nsLabels); err != nil || !access.Use {
		return accessResult{summary: conditions.Summary{Progress: conditions.Blocked, Reason: stores.ReasonNamespaceNotAllowed,
			Message: fmt.Sprintf("ObjectStore %s is not open to namespace %s (its namespaceSelector); ask the platform team", store.Name, a.Namespace)}}, nil
	}
	accounts, err := r.stores.Accounts(ctx, store)
	if errors.Is(err, s3.ErrAccessNotSupported) {
		return accessResult{summary: conditions.Summary{Progress: conditions.Blocked, Reason: ReasonAccessNotSupported,
			Message: fmt.Sprintf("ObjectStore %s is of type %s: %s; BucketAccesses need a store of type %s", store.Name, store.Spec.Type, s3.ErrAccessNotSupported, stores.AccountStoreTypes())}}, nil
	}
	if err != nil {
		return accessResult{summary: storeProblem(store.Name, "building its clients", err)}, nil
	}
	c, err := r.stores.Client(ctx, store)
	if err != nil {
		return accessResult{summary: storeProblem(store.Name, "building its clients", err)}, nil
	}

	// A Secret of that name that is not ours stops everything, before any
	// account exists.
	live := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: a.Spec.SecretName}}
	exists, err := children.LookupOwned(ctx, r.children, a, "Secret", live)
	if children.IsNotOwned(err) {
		return accessResult{summary: conditions.Summary{Progress: conditions.Blocked, Reason: ReasonSecretConflict, Message: err.Error()}}, nil
	}
	if err != nil {
		return accessResult{}, err
	}
	secretKey := ""
	if exists && a.Status.AccessKeyID != "" && string(live.Data[envAccessKeyID]) == a.Status.AccessKeyID {
		secretKey = string(live.Data[envSecretAccessKey])
	}

	// Where the accounts will live is on record before the first exists.
	if a.Status.StoreName != store.Name || a.Status.BucketName != bucket {
		if err := r.recordTarget(ctx, a, obs, store.Name, bucket); err != nil {
			return accessResult{}, err
		}
	}

	current, _ := stores.CurrentKey(&a.Status)
	sync := accessSync{
		accounts: accounts, s3: c, store: store.Name, bucket: bucket,
		lockPolicy: func() func() { return r.stores.LockPolicy(store.Name, bucket) },
		grants:     r.stores.GrantsOf(r.client, store, bucket),
		grant:      s3.Grant{ID: stores.GrantID(a.UID), Mode: string(a.Spec.Mode)},
		current:    current, want: stores.AccountName(store.UID, a.UID, a.Spec.KeyVersion),
		haveSecret: secretKey != "", retiring: a.Status.RetiringKeys,
		now: r.now(), grace: gracePeriod(a),
	}
	res = sync.run(ctx)
	// Other grants of the bucket's policy put right concern the bucket.
	stores.Raise(r.recorder, sb, stores.GrantFixActions(bucket, res.grantFixes))
	if res.storeDown {
		r.storeChecks.Request(ctx, store)
	}
	var secretErr error
	switch {
	case res.issued != nil:
		secretErr = r.applySecret(ctx, a, store, bucket, res.issued.AccessKeyID, res.issued.secretKey, live)
	case res.summary.Progress == conditions.Done:
		// Keep the secret key; bring the rest (endpoint, region, labels) in line.
		secretErr = r.applySecret(ctx, a, store, bucket, a.Status.AccessKeyID, secretKey, live)
	}
	if secretErr == nil {
		return res, nil
	}
	if res.issued != nil {
		// The new key is not in the Secret: nothing of it goes on record,
		// and the next reconcile issues it again (the same account).
		res.issued, res.keysKnown, res.retiring = nil, false, nil
	}
	if apierr.Classify(secretErr) == apierr.Refused {
		res.summary = conditions.Summary{Progress: conditions.Blocked, Reason: ReasonSecretRejected,
			Message: fmt.Sprintf("the API server refused Secret %s: %s", a.Spec.SecretName, apierr.Message(secretErr))}
		return res, nil
	}
	return res, secretErr
}

// bucketOf reads the StorageBucket the access names, in its own namespace.
// It returns nil and the access's state when the bucket cannot be granted yet.
func (r *Reconciler) bucketOf(ctx context.Context, a *storagev1.BucketAccess) (*storagev1.StorageBucket, accessResult, error) {
	sb := &storagev1.StorageBucket{}
	err := r.client.Get(ctx, client.ObjectKey{Namespace: a.Namespace, Name: a.Spec.BucketRef.Name}, sb)
	switch {
	case apierrors.IsNotFound(err):
		return nil, accessResult{summary: conditions.Summary{Progress: conditions.Blocked, Reason: ReasonBucketNotFound,
			Message: fmt.Sprintf("StorageBucket %s does not exist in namespace %s", a.Spec.BucketRef.Name, a.Namespace)}}, nil
	case err != nil:
		return nil, accessResult{}, fmt.Errorf("reading StorageBucket %s: %w", a.Spec.BucketRef.Name, err)
	case !sb.DeletionTimestamp.IsZero():
		return nil, accessResult{summary: conditions.Summary{Progress: conditions.Blocked, Reason: ReasonBucketDeleting,
			Message: fmt.Sprintf("StorageBucket %s is being deleted and waits for this BucketAccess: delete it too", sb.Name)}}, nil
	case sb.Status.Claim != storagev1.BucketClaimed || sb.Status.BucketName == "":
		progress, msg := conditions.Working, fmt.Sprintf("waiting for StorageBucket %s to create its bucket", sb.Name)
		if c := conditions.Get(sb.Status.Conditions, conditions.Stalled); c != nil && c.Status == metav1.ConditionTrue {
			progress, msg = conditions.Blocked, fmt.Sprintf("StorageBucket %s is stalled: %s", sb.Name, c.Message)
		}
		return nil, accessResult{summary: conditions.Summary{Progress: progress, Reason: ReasonBucketNotReady, Message: msg}}, nil
	}
	return sb, accessResult{}, nil
}

func gracePeriod(a *storagev1.BucketAccess) time.Duration {
	if a.Spec.RotationGracePeriodSeconds == nil {
		return defaultGracePeriod
	}
	return time.Duration(*a.Spec.RotationGracePeriodSeconds) * time.Second
}

// recordTarget writes, before any account is made, which store and bucket
// the access's accounts belong to: the deletion revokes them from there,
// even if the StorageBucket is gone by then. This write cannot wait for the
// deferred one.
func (r *Reconciler) recordTarget(ctx context.Context, a *storagev1.BucketAccess, obs *accessObservation, store, bucket string) error {
	obs.target = &accessTarget{store: store, bucket: bucket}
	obs.synced = &accessResult{summary: conditions.Summary{Progress: conditions.Working, Reason: ReasonIssuing,
		Message: fmt.Sprintf("issuing a %s key to bucket %s in %s", a.Spec.Mode, bucket, store)}}
	if _, err := r.status.Patch(ctx, a, computeAccessStatus(a, obs, outcome.Outcome{})); err != nil {
		obs.target, obs.synced = nil, nil // not on record: no account is made
		return err
	}
	return nil
}

// applySecret brings the Secret to the given key, creating it if needed
// (Server-Side Apply, skipped when nothing differs).
func (r *Reconciler) applySecret(ctx context.Context, a *storagev1.BucketAccess, store *storagev1.ObjectStore, bucket, accessKeyID, secretKey string, live *corev1.Secret) error {
	// The bundle the store's clients were built with: the one its last
	// check read.
	caBundle, err := r.stores.CABundle(ctx, store)
	if err != nil {
		return err
	}
	desired := desiredSecret(a, store, bucket, accessKeyID, secretKey, caBundle)
	_, err = children.ApplyOwned(ctx, r.children, a, "Secret", live, desired, corev1ac.ExtractSecret)
	return err
}

// finalize revokes the access's key in the store, then lets it go. A store
// that cannot be reached holds the deletion, with the reason.
func (r *Reconciler) finalize(ctx context.Context, a *storagev1.BucketAccess, obs *accessObservation) outcome.Outcome {
	if a.Status.StoreName != "" {
		res, err := r.revoke(ctx, a, obs)
		if err != nil {
			return outcome.Of(err)
		}
		if res.storeDown && res.store != nil {
			r.storeChecks.Request(ctx, res.store)
		}
		for _, id := range res.revoked {
			obs.Did(corev1.EventTypeNormal, "KeyRevoked", "Revoke", "revoked key %s", id)
		}
		if !res.done {
			obs.waits = &res.summary
			return outcome.RequeueAfter(setup.Jitter(time.Minute))
		}
	}
	if err := r.deleteSecret(ctx, a); err != nil {
		if apierr.Classify(err) != apierr.Refused {
			return outcome.Of(err)
		}
		obs.waits = &conditions.Summary{Progress: conditions.Blocked, Reason: ReasonSecretRejected,
			Message: fmt.Sprintf("no key of it is left in the store, but the API server refused to delete Secret %s: %s", a.Spec.SecretName, apierr.Message(err))}
		return outcome.RequeueAfter(setup.Jitter(setup.ForeignChildRetry))
	}
	if err := finalizer.Remove(ctx, r.client, a, stores.AccessFinalizer); err != nil {
		return outcome.Of(err)
	}
	obs.Released = true
	return outcome.Outcome{}
}

func (r *Reconciler) revoke(ctx context.Context, a *storagev1.BucketAccess, obs *accessObservation) (revocationResult, error) {
	store, state, err := stores.UsableStore(ctx, r.client, a.Status.StoreName)
	if err != nil {
		return revocationResult{}, err
	}
	if store == nil {
		if state.Reason == stores.ReasonStoreNotFound {
			// The store is gone from the cluster; nothing of it can be reached.
			obs.Did(corev1.EventTypeWarning, "StoreGone", "Revoke", "ObjectStore %s no longer exists: the key's account could not be revoked there", a.Status.StoreName)
			return revocationResult{done: true}, nil
		}
		s := state
		if s.Progress == conditions.Working {
			s.Reason = ReasonRevoking
		}
		s.Message += "; the key is revoked once the store answers (removing the finalizer by hand leaves the account to the store sweep)"
		return revocationResult{summary: s}, nil
	}
	accounts, err := r.stores.Accounts(ctx, store)
	if errors.Is(err, s3.ErrAccessNotSupported) {
		// The store had an account driver when the accounts were made (the
		// target is recorded only then): its type was changed since.
		return revocationResult{summary: conditions.Summary{Progress: conditions.Blocked, Reason: ReasonAccessNotSupported,
			Message: fmt.Sprintf("ObjectStore %s is now of type %s, so the key's accounts made there cannot be revoked; set its type back to the one they were made with (%s), or remove the finalizer by hand (the accounts then stay in the store)",
				store.Name, store.Spec.Type, stores.AccountStoreTypes())}}, nil
	}
	if err != nil {
		return revocationResult{summary: storeProblem(store.Name, "building its clients", err)}, nil
	}
	c, err := r.stores.Client(ctx, store)
	if err != nil {
		return revocationResult{summary: storeProblem(store.Name, "building its clients", err)}, nil
	}
	bucket := a.Status.BucketName
	res := accessRevocation{
		accounts: accounts, s3: c, store: store.Name, bucket: bucket, prefix: stores.AccountPrefix(store.UID, a.UID),
		recorded:   recordedAccounts(&a.Status),
		lockPolicy: func() func() { return r.stores.LockPolicy(store.Name, bucket) },
		grants:     r.stores.GrantsOf(r.client, store, bucket),
		grant:      s3.Grant{ID: stores.GrantID(a.UID), Mode: string(a.Spec.Mode)},
	}.run(ctx)
	res.store = store
	if len(res.grantFixes) > 0 {
		// Said on the StorageBucket that claims the bucket, if any is left,
		// else on the store.
		var about client.Object = store
		claims := &storagev1.StorageBucketList{}
		if err := r.client.List(ctx, claims, client.MatchingFields{stores.BucketClaimIndex: stores.StoreBucketKey(store.Name, bucket)}); err == nil && len(claims.Items) > 0 {
			about = &claims.Items[0]
		}
		stores.Raise(r.recorder, about, stores.GrantFixActions(bucket, res.grantFixes))
	}
	return res, nil
}

// recordedAccounts are the accounts of the keys the status records.
func recordedAccounts(st *storagev1.BucketAccessStatus) []string {
	out := stores.AccountNames(st.RetiringKeys)
	if current, ok := stores.CurrentKey(st); ok {
		out = append(out, current.AccountName())
	}
	return out
}

// deleteSecret deletes the access's Secret, only if it is ours: the UID
// precondition makes sure it is the one just seen.
func (r *Reconciler) deleteSecret(ctx context.Context, a *storagev1.BucketAccess) error {
	live := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: a.Namespace, Name: a.Spec.SecretName}}
	exists, err := children.LookupOwned(ctx, r.children, a, "Secret", live)
	if children.IsNotOwned(err) || !exists {
		return nil
	}
	if err != nil {
		return err
	}
	err = r.client.Delete(ctx, live, client.Preconditions{UID: ptr.To(live.UID)})
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting Secret %s: %w", live.Name, err)
	}
	return nil
}
