// Package view reconciles MarkdownViews into a ConfigMap of Markdown files and
// images, a viewer Deployment that renders them, a Service in front of it and,
// when asked, an Ingress or a Gateway API HTTPRoute that exposes it.
package view

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/apierr"
	"github.com/trellis-dev/trellis/internal/controller/children"
	"github.com/trellis-dev/trellis/internal/controller/operate"
	"github.com/trellis-dev/trellis/internal/controller/outcome"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/controller/status"
	"github.com/trellis-dev/trellis/internal/imagepolicy"
	"github.com/trellis-dev/trellis/internal/shard"
)

// ControllerName names the controller in flags, logs, metrics and Events.
const ControllerName = "markdownview"

// maxConfigMapBytes is the API server's limit on a ConfigMap's data.
const maxConfigMapBytes = 1 << 20

// errGone stops the sub-reconcilers when the MarkdownView turns out to be
// gone, or replaced by a new object of the same name, since the cache read
// it: nothing is left to write for it, not even its status.
var errGone = errors.New("the MarkdownView is gone")

// httpRouteGVK is the Gateway API type an exposed site may use; clusters
// without the Gateway API CRDs do not serve it.
var httpRouteGVK = schema.GroupVersionKind{Group: gatewayv1.GroupName, Version: "v1", Kind: "HTTPRoute"}

// Controller registers the MarkdownView controller with the manager.
var Controller = setup.Controller{
	Name:          ControllerName,
	Sharded:       &viewv1.MarkdownView{}, // a ring places each child with its view, by its controller reference
	Owned:         []client.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}, &corev1.Service{}, &networkingv1.Ingress{}},
	OptionalOwned: []client.Object{&gatewayv1.HTTPRoute{}},
	Recognise:     recogniseChild, // a view's own children are cached whole; other labelled objects as metadata
	// The cache keeps content hashes instead of files (content.go), so the
	// manager's memory does not grow with what the MarkdownViews hold, and
	// of each applied child the hash of what Trellis applied, its metadata
	// and the status the view's status is computed from (appliedTransforms).
	Transforms: append([]setup.Transform{
		{Object: &viewv1.MarkdownView{}, Func: trimMarkdownView},
		{Object: &corev1.ConfigMap{}, Func: trimConfigMap},
	}, appliedTransforms...),
	Setup: func(ctx context.Context, mgr ctrl.Manager, opts setup.Options) error {
		r, err := NewReconciler(mgr, opts)
		if err != nil {
			return err
		}
		return r.SetupWithManager(ctx, mgr, opts)
	},
}

// statusEvents: a site that became Ready, and one that needs a person.
// Rolling out is routine and stays out of the event stream.
var statusEvents = []status.EventRule{
	{Condition: conditions.Ready, Status: metav1.ConditionTrue, Type: corev1.EventTypeNormal},
	{Condition: conditions.Stalled, Status: metav1.ConditionTrue, Type: corev1.EventTypeWarning},
}

// Reconciler reconciles MarkdownView objects.
type Reconciler struct {
	client client.Client
	// uncached reads a MarkdownView's files, which the cache does not hold.
	uncached client.Reader
	children children.Clients
	// configMaps is children with ConfigMaps read around the cache trimmed
	// as the cache trims them.
	configMaps   children.Clients
	status       *status.Patcher[*viewv1.MarkdownView, viewv1.MarkdownViewStatus]
	viewerImage  string
	imageAllow   imagepolicy.AllowList
	routesServed bool
	// verify checks an artifact's size and digest before viewers are
	// pointed at it.
	verify verifier
	// artifactHosts are the hosts the manager fetches artifacts from.
	artifactHosts []string
	// shard is the replica's place in its ControllerRing (nil: none).
	shard *shard.Member
}

// NewReconciler builds the reconciler from the manager's clients and the options.
func NewReconciler(mgr ctrl.Manager, opts setup.Options) (*Reconciler, error) {
	allow, err := imagepolicy.Parse(opts.ViewerImageAllow, opts.ViewerImage)
	if err != nil {
		return nil, fmt.Errorf("viewer image allow-list: %w", err)
	}
	cached, uncached := mgr.GetClient(), mgr.GetAPIReader()
	return &Reconciler{
		client:     cached,
		uncached:   uncached,
		children:   children.Clients{Cached: cached, Uncached: uncached},
		configMaps: children.Clients{Cached: cached, Uncached: trimmedReader{Reader: uncached, trim: trimConfigMap}},
		status: status.NewPatcher(cached, mgr.GetEventRecorder(ControllerName),
			func(mv *viewv1.MarkdownView) *viewv1.MarkdownViewStatus { return &mv.Status }, statusEvents...),
		viewerImage:   opts.ViewerImage,
		imageAllow:    allow,
		routesServed:  opts.Serves(httpRouteGVK),
		verify:        httpVerifier(&http.Client{Timeout: artifactVerifyTimeout}),
		artifactHosts: opts.ArtifactHosts,
		shard:         opts.Shard,
	}, nil
}

// +kubebuilder:rbac:groups=view.trellis.dev,resources=markdownviews,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=view.trellis.dev,resources=markdownviews/status,verbs=get;patch
// +kubebuilder:rbac:groups=view.trellis.dev,resources=markdownviews/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=source.toolkit.fluxcd.io,resources=gitrepositories;ocirepositories;buckets;externalartifacts,verbs=get;list;watch

// SetupWithManager wires the watches: the MarkdownView itself (spec changes
// only, so our status writes do not echo back), and its children. HTTPRoutes
// are watched only where the API server served them at start-up.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts setup.Options) error {
	return r.setupWith(ctx, mgr, opts.ControllerOptions())
}

func (r *Reconciler) setupWith(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if err := r.status.FollowCache(ctx, mgr.GetCache()); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&viewv1.MarkdownView{}, builder.WithPredicates(setup.ShardPredicate(r.shard,
			predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, operate.ReconcileRequested)))).
		Owns(&corev1.ConfigMap{}).
		Owns(&appsv1.Deployment{}, builder.WithPredicates(deploymentChanged)).
		Owns(&corev1.Service{}).
		Owns(&networkingv1.Ingress{})
	if r.routesServed {
		b = b.Owns(&gatewayv1.HTTPRoute{})
	}
	// Flux is optional: a source kind is watched (its metadata only) when
	// the API server serves it at start-up; a view naming one it did not
	// serve says so, and looks again now and then.
	for _, kind := range SourceKinds {
		if _, err := mgr.GetRESTMapper().RESTMapping(sourceGVK(kind).GroupKind(), "v1"); err != nil {
			continue
		}
		b = b.WatchesMetadata(sourceMetadata(kind), handler.EnqueueRequestsFromMapFunc(r.viewsOfSource(kind)))
	}
	// On a shard, a view the sharder drains is handed on, not reconciled.
	return b.WithOptions(opts).Complete(setup.ShardReconciler(r.shard, ControllerName, r.client,
		func() client.Object { return &viewv1.MarkdownView{} }, r))
}

// deploymentChanged passes the Deployment updates that matter to us: spec or
// metadata drift, and the rollout figures our status is computed from.
var deploymentChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*appsv1.Deployment)
		n, ok2 := e.ObjectNew.(*appsv1.Deployment)
		if !ok1 || !ok2 {
			return true
		}
		return o.Generation != n.Generation ||
			!equality.Semantic.DeepEqual(o.Labels, n.Labels) ||
			!equality.Semantic.DeepEqual(o.OwnerReferences, n.OwnerReferences) ||
			o.Status.ObservedGeneration != n.Status.ObservedGeneration ||
			o.Status.Replicas != n.Status.Replicas ||
			o.Status.UpdatedReplicas != n.Status.UpdatedReplicas ||
			o.Status.AvailableReplicas != n.Status.AvailableReplicas ||
			!deploymentConditionsEqual(o.Status.Conditions, n.Status.Conditions)
	},
}

// deploymentConditionsEqual ignores the heartbeat timestamps the Deployment
// controller bumps without anything changing.
func deploymentConditionsEqual(a, b []appsv1.DeploymentCondition) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Type != b[i].Type || a[i].Status != b[i].Status || a[i].Reason != b[i].Reason {
			return false
		}
	}
	return true
}

// Reconcile brings one MarkdownView's children to the desired state and
// records what it saw. mv is the cached copy: its files are not in it,
// unless they are small (cachedContentKept).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return r.reconcile(ctx, req).Result(ControllerName)
}

// reconcile is the shape every kind shares (docs/architecture.md, "One
// reconcile"): the read, the deletion, the steps in order, then one
// deferred status write computed from what they observed and how they
// ended. A MarkdownView has no finalizer: its children go with it through
// their owner references.
func (r *Reconciler) reconcile(ctx context.Context, req ctrl.Request) (out outcome.Outcome) {
	mv := &viewv1.MarkdownView{}
	found, err := r.status.Get(ctx, req.NamespacedName, mv)
	if err != nil {
		return outcome.Of(err) // a read that failed is no deletion
	}
	if !found {
		forgetMetrics(req.NamespacedName)
		return outcome.Outcome{}
	}
	if !mv.DeletionTimestamp.IsZero() {
		// The children go with it through their owner references, suspended
		// or not: deleting is exactly what a user asked for.
		return outcome.Outcome{}
	}
	if operate.IsSuspended(mv.Spec.Suspend) {
		// Its children stay as they are; only the status says so, once.
		next := *mv.Status.DeepCopy()
		next.ObservedGeneration = mv.Generation
		operate.Suspend(&next.Conditions, mv.Generation)
		_, err := r.status.Patch(ctx, mv, next)
		return outcome.Of(err)
	}

	var obs observation
	defer func() { out = r.finish(ctx, mv, &obs, out) }()
	return r.reconcileChildren(ctx, mv, &obs)
}

// finish writes the status computed from obs and out, only when it differs
// from mv's, and returns the outcome the reconcile ends with. Nothing is
// written after a conflict (what was read is stale; the reconcile runs
// again soon), nor for a view found gone or replaced: its deletion, or its
// successor, brings a reconcile of its own, and a status written now would
// land on the successor.
func (r *Reconciler) finish(ctx context.Context, mv *viewv1.MarkdownView, obs *observation, out outcome.Outcome) outcome.Outcome {
	if obs.gone || !out.WritesStatus() {
		return out
	}
	next := computeStatus(mv, *obs, out)
	recordMetrics(mv, next)
	if wait := firstStatusWait(mv, next, time.Now()); wait > 0 {
		// A new view rolling out, which its unwritten status already says
		// (RollingOut is no error, no block). Looked at again when the
		// grace ends, in case no event comes first.
		return outcome.RequeueAfter(wait)
	}
	_, err := r.status.Patch(ctx, mv, next)
	return out.And(err)
}

// reconcileChildren runs the sub-reconcilers in order; the first error stops
// them, a block (outcome.Block: a person must act) included. The ConfigMap
// comes first: the Deployment's pods mount it.
func (r *Reconciler) reconcileChildren(ctx context.Context, mv *viewv1.MarkdownView, obs *observation) outcome.Outcome {
	for _, step := range []func(context.Context, *viewv1.MarkdownView, *observation) error{
		r.checkSpec,
		r.resolveSource,
		r.reconcileConfigMap,
		r.reconcileDeploymentAndService,
		r.reconcileIngress,
		r.reconcileHTTPRoute,
	} {
		if err := step(ctx, mv, obs); err != nil {
			if errors.Is(err, errGone) {
				obs.gone = true
				return outcome.Outcome{}
			}
			return outcomeOf(err)
		}
	}
	if obs.sourceWaiting != nil {
		return outcome.RequeueAfter(setup.Jitter(sourceRetry))
	}
	return outcome.Outcome{}
}

// outcomeOf sorts the error a step stopped on. A child name someone else
// holds, and a child the API server (or an admission policy, or a quota)
// refuses, are for a person to fix, and the message says what to change.
// Neither the foreign object (outside the cache) going away nor a policy or
// quota changing is an event, so they are looked at again later.
func outcomeOf(err error) outcome.Outcome {
	var again lookAgain
	switch {
	case errors.As(err, &again):
		return outcome.Of(err).LookAgainAfter(setup.Jitter(sourceRetry))
	case children.IsNotOwned(err):
		return outcome.Stalled(ReasonChildConflict, err.Error()).LookAgainAfter(setup.Jitter(setup.ForeignChildRetry))
	case apierr.Classify(err) == apierr.Refused:
		return outcome.Stalled(ReasonChildRejected, err.Error()).LookAgainAfter(setup.Jitter(setup.ForeignChildRetry))
	}
	return outcome.Of(err)
}

// checkSpec refuses, before anything is written, a spec the manager will not
// carry out: an image outside the allow-list (the Deployment keeps the image
// it has), files or pod settings too large for the bounds Trellis keeps.
func (r *Reconciler) checkSpec(_ context.Context, mv *viewv1.MarkdownView, _ *observation) error {
	if img := mv.Spec.ViewerImage; img != "" && !r.imageAllow.Allows(img) {
		return outcome.Block(ReasonImageNotAllowed, fmt.Sprintf("viewerImage %s is not allowed by the manager's --viewer-image-allow (%s); nothing is changed until the image or the allow-list is", img, r.imageAllow))
	}
	if n := cachedInt(mv.Annotations, cachedPodBytes); n > 0 {
		return outcome.Block(ReasonPodSettingsTooLarge, fmt.Sprintf("spec.pod takes %d bytes as JSON, over the %d Trellis accepts; nothing is changed until it is smaller", n, maxPodSettingsBytes))
	}
	if n := cachedInt(mv.Annotations, cachedContentBytes); n > maxConfigMapBytes {
		return outcome.Block(ReasonMarkdownsTooLarge, contentTooLargeMessage(n))
	}
	return nil
}

func contentTooLargeMessage(n int) string {
	return fmt.Sprintf("markdowns and assets take %d bytes, over the %d a ConfigMap can hold; the site keeps serving the last files that fit", n, maxConfigMapBytes)
}

// reconcileConfigMap keeps the ConfigMap's data exactly equal to the spec's
// files (a file dropped from the spec disappears), writing only on a
// difference. The cache holds neither side's files, only their hashes (and
// the files of a small view); other views' files are read from the API
// server only when the hashes differ. A
// ConfigMap the cache does not have is created outright: AlreadyExists is
// the check that nothing of someone else's is taken, and saves the confirming
// read on every new view.
//
// A view with a source holds in it only the address of the artifact the
// viewers serve (resolveSource), written when it changes.
func (r *Reconciler) reconcileConfigMap(ctx context.Context, mv *viewv1.MarkdownView, obs *observation) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: configMapName(mv), Namespace: mv.Namespace}}
	key := client.ObjectKeyFromObject(cm)
	exists := true
	if err := r.configMaps.Cached.Get(ctx, key, cm); apierrors.IsNotFound(err) {
		exists = false
	} else if err != nil {
		return fmt.Errorf("reading ConfigMap %s: %w", key.Name, err)
	} else if !metav1.IsControlledBy(cm, mv) {
		return &children.NotOwnedError{Kind: "ConfigMap", Name: cm.Name}
	}
	labels := childLabels(mv)
	// Up to date: the data it holds, and the hash it says it holds, are the view's.
	upToDate := func(hash string) bool {
		return exists && hash != "" && cm.Annotations[cachedContentHash] == hash && cm.Annotations[contentHashAnnotation] == hash &&
			hasLabels(cm.Labels, labels)
	}
	var data map[string]string
	var binaryData map[string][]byte
	switch {
	case mv.Spec.Source.Kind != "" && obs.artifact == nil:
		if exists {
			return nil // the viewers keep the artifact they have
		}
		data = map[string]string{} // mounted all the same: the pods start, and wait
	case mv.Spec.Source.Kind != "":
		data = artifactData(*obs.artifact)
	default:
		if upToDate(mv.Annotations[cachedContentHash]) {
			return nil
		}
		full, err := r.files(ctx, mv)
		if err != nil {
			return err
		}
		if full == nil {
			return errGone
		}
		data, binaryData = desiredContent(full)
		if size := contentSize(data, binaryData); size > maxConfigMapBytes {
			return outcome.Block(ReasonMarkdownsTooLarge, contentTooLargeMessage(size))
		}
	}
	hash := contentHash(data, binaryData)
	if upToDate(hash) {
		obs.artifactWritten = obs.artifact != nil
		return nil // the cache's copy of the MarkdownView was behind, or the artifact is the one served
	}
	if !exists {
		created := desiredConfigMap(mv, data, binaryData, hash)
		if err := controllerutil.SetControllerReference(mv, created, r.client.Scheme()); err != nil {
			return err
		}
		err := r.client.Create(ctx, created)
		if err == nil {
			log.FromContext(ctx).Info("ConfigMap created", "configmap", cm.Name)
			obs.artifactWritten = obs.artifact != nil
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating ConfigMap %s: %w", cm.Name, err)
		}
		// There after all: the cache was behind, or someone else's. The
		// uncached copy is trimmed as the cache's would be, the hash of
		// the data it holds in place of the data.
		if err := r.configMaps.Uncached.Get(ctx, key, cm); err != nil {
			return fmt.Errorf("reading ConfigMap %s: %w", cm.Name, err)
		}
		if !metav1.IsControlledBy(cm, mv) {
			return &children.NotOwnedError{Kind: "ConfigMap", Name: cm.Name}
		}
		exists = true
		if upToDate(hash) {
			obs.artifactWritten = obs.artifact != nil
			return nil
		}
	}
	// cm is the trimmed copy (no data, and the cache's own key, which the API
	// server would refuse) or the uncached one. An update replaces all of the
	// data.
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	maps.Copy(cm.Labels, labels)
	if cm.Annotations == nil {
		cm.Annotations = map[string]string{}
	}
	delete(cm.Annotations, cachedContentHash)
	cm.Annotations[contentHashAnnotation] = hash
	cm.Data, cm.BinaryData = data, binaryData
	if err := r.client.Update(ctx, cm); err != nil {
		return fmt.Errorf("updating ConfigMap %s: %w", cm.Name, err)
	}
	log.FromContext(ctx).Info("ConfigMap updated", "configmap", cm.Name)
	obs.artifactWritten = obs.artifact != nil
	return nil
}

// files returns mv with its files: mv itself when the cache kept them,
// otherwise the MarkdownView read from the API server (nil when it is gone
// or was replaced by a new object of the same name, which has its own
// reconcile coming).
func (r *Reconciler) files(ctx context.Context, mv *viewv1.MarkdownView) (*viewv1.MarkdownView, error) {
	if _, kept := mv.Annotations[cachedContentKept]; kept {
		return mv, nil
	}
	full := &viewv1.MarkdownView{}
	if err := r.uncached.Get(ctx, client.ObjectKeyFromObject(mv), full); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil // deleted since; its children go with it
		}
		return nil, fmt.Errorf("reading the files of MarkdownView %s: %w", mv.Name, err)
	}
	if full.UID != mv.UID {
		return nil, nil
	}
	return full, nil
}

// hasLabels reports whether every wanted label is set on have.
func hasLabels(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// reconcileDeploymentAndService applies the Deployment and the Service side
// by side: neither needs the other, and a new view's reconcile then waits on
// one never-adopt read and one apply instead of two of each, which is most of
// how fast a burst of new views is served (docs/performance.md). Only the
// Deployment records anything in obs. Its error comes first, and the
// Service's counts only when it has none, so the reconcile ends as when the
// two ran in order: with one error, sorted alone (outcomeOf).
func (r *Reconciler) reconcileDeploymentAndService(ctx context.Context, mv *viewv1.MarkdownView, obs *observation) error {
	service := make(chan error, 1)
	go func() { service <- r.reconcileService(ctx, mv, nil) }()
	err := r.reconcileDeployment(ctx, mv, obs)
	if serviceErr := <-service; err == nil {
		err = serviceErr
	}
	return err
}

// reconcileDeployment applies the viewer Deployment and records it for the status.
func (r *Reconciler) reconcileDeployment(ctx context.Context, mv *viewv1.MarkdownView, obs *observation) error {
	desired, err := desiredDeployment(mv, r.viewerImage)
	if err != nil {
		return err
	}
	live := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: *desired.Name, Namespace: mv.Namespace}}
	applied, err := children.ApplyOwned(ctx, r.children, mv, "Deployment", live, desired, appsv1ac.ExtractDeployment)
	if selectorImmutable(err) {
		// The new one is recorded by the reconcile its creation brings.
		return r.replaceDeployment(ctx, mv, err)
	}
	if err != nil {
		return err
	}
	if live.UID != "" {
		obs.deployment = live
	}
	if applied {
		log.FromContext(ctx).Info("Deployment applied", "deployment", *desired.Name)
	}
	return nil
}

// selectorImmutable reports whether err is the API server refusing to change
// a Deployment's selector, which it never lets change.
func selectorImmutable(err error) bool {
	var refusal apierrors.APIStatus
	if !errors.As(err, &refusal) {
		return false
	}
	s := refusal.Status()
	if s.Reason != metav1.StatusReasonInvalid || s.Details == nil {
		return false
	}
	for _, cause := range s.Details.Causes {
		if cause.Field == "spec.selector" {
			return true
		}
	}
	return false
}

// replaceDeployment deletes mv's viewer Deployment and creates it again
// with the selector Trellis wants now, when the API server refused to change
// the one it has (refused: the error it gave). Older versions selected the
// viewer pods by the view's name (app.kubernetes.io/instance), which the
// view's author chooses; now they are selected by its UID, and a
// Deployment's selector is immutable. The Deployment is Trellis' own (a
// controller reference to mv, by UID, read from the API server just
// before, and the delete is conditional on that UID and resourceVersion)
// and holds no data. The site is served by no pod from the delete until a
// pod of the new Deployment is ready: the delete and the create are sent
// one after the other, and the Service's selector follows in the same
// reconcile, so that is as long as a new pod takes to start.
func (r *Reconciler) replaceDeployment(ctx context.Context, mv *viewv1.MarkdownView, refused error) error {
	live := &appsv1.Deployment{}
	if err := r.uncached.Get(ctx, types.NamespacedName{Namespace: mv.Namespace, Name: viewerName(mv)}, live); err != nil {
		return fmt.Errorf("reading Deployment %s to replace it: %w", viewerName(mv), err)
	}
	if !metav1.IsControlledBy(live, mv) {
		return &children.NotOwnedError{Kind: "Deployment", Name: live.Name}
	}
	want := &metav1.LabelSelector{MatchLabels: selectorLabels(mv)}
	if equality.Semantic.DeepEqual(live.Spec.Selector, want) {
		return refused // its selector is ours already: something else was refused
	}
	if live.DeletionTimestamp != nil {
		return fmt.Errorf("the Deployment %s, whose selector is an older Trellis', is still being deleted", live.Name)
	}
	if err := r.client.Delete(ctx, live,
		client.Preconditions{UID: &live.UID, ResourceVersion: &live.ResourceVersion},
		client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting Deployment %s to replace its selector: %w", live.Name, err)
	}
	desired, err := desiredDeployment(mv, r.viewerImage)
	if err != nil {
		return err
	}
	if err := r.client.Apply(ctx, desired, client.FieldOwner(setup.FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("creating Deployment %s again with its new selector: %w", live.Name, err)
	}
	log.FromContext(ctx).Info("Deployment replaced: its selector, an older Trellis', picked the viewer pods by the view's name",
		"deployment", live.Name, "oldSelector", metav1.FormatLabelSelector(live.Spec.Selector))
	return nil
}

// reconcileService applies the viewer Service.
func (r *Reconciler) reconcileService(ctx context.Context, mv *viewv1.MarkdownView, _ *observation) error {
	desired := desiredService(mv)
	live := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: *desired.Name, Namespace: mv.Namespace}}
	applied, err := children.ApplyOwned(ctx, r.children, mv, "Service", live, desired, corev1ac.ExtractService)
	if err != nil {
		return err
	}
	if applied {
		log.FromContext(ctx).Info("Service applied", "service", *desired.Name)
	}
	return nil
}
