// Package view reconciles MarkdownViews into a ConfigMap of Markdown files, a
// viewer Deployment that renders them, and a Service in front of it.
package view

import (
	"context"
	"errors"
	"fmt"
	"maps"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/children"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/controller/status"
)

// ControllerName names the controller in flags, logs, metrics and Events.
const ControllerName = "markdownview"

// maxConfigMapBytes is the API server's limit on a ConfigMap's data.
const maxConfigMapBytes = 1 << 20

// errTooLarge stops the sub-reconcilers when the files cannot fit a ConfigMap.
var errTooLarge = errors.New("markdowns too large for a ConfigMap")

// Controller registers the MarkdownView controller with the manager.
var Controller = setup.Controller{
	Name:  ControllerName,
	Owned: []client.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}, &corev1.Service{}},
	Setup: func(_ context.Context, mgr ctrl.Manager, opts setup.Options) error {
		return NewReconciler(mgr, opts).SetupWithManager(mgr, opts)
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
	client      client.Client
	children    children.Clients
	status      *status.Patcher[*viewv1.MarkdownView, viewv1.MarkdownViewStatus]
	viewerImage string
}

// NewReconciler builds the reconciler from the manager's clients and the options.
func NewReconciler(mgr ctrl.Manager, opts setup.Options) *Reconciler {
	return &Reconciler{
		client:   mgr.GetClient(),
		children: children.Clients{Cached: mgr.GetClient(), Uncached: mgr.GetAPIReader()},
		status: status.NewPatcher(mgr.GetClient(), mgr.GetEventRecorder(ControllerName),
			func(mv *viewv1.MarkdownView) *viewv1.MarkdownViewStatus { return &mv.Status }, statusEvents...),
		viewerImage: opts.ViewerImage,
	}
}

// +kubebuilder:rbac:groups=view.trellis.dev,resources=markdownviews,verbs=get;list;watch
// +kubebuilder:rbac:groups=view.trellis.dev,resources=markdownviews/status,verbs=get;patch
// +kubebuilder:rbac:groups=view.trellis.dev,resources=markdownviews/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;patch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager wires the watches: the MarkdownView itself (spec changes
// only, so our status writes do not echo back), and its three children.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts setup.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&viewv1.MarkdownView{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.ConfigMap{}).
		Owns(&appsv1.Deployment{}, builder.WithPredicates(deploymentChanged)).
		Owns(&corev1.Service{}).
		WithOptions(opts.ControllerOptions()).
		Complete(r)
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

// Reconcile brings one MarkdownView's children to the desired state and records what it saw.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	mv := &viewv1.MarkdownView{}
	found, err := r.status.Get(ctx, req.NamespacedName, mv)
	if err != nil || !found {
		if !found {
			forgetMetrics(req.NamespacedName)
		}
		return ctrl.Result{}, err
	}
	if !mv.DeletionTimestamp.IsZero() {
		// The children go with it through their owner references.
		return ctrl.Result{}, nil
	}

	var obs observation
	err = r.reconcileChildren(ctx, mv, &obs)
	var result ctrl.Result
	switch {
	case children.IsNotOwned(err):
		obs.blocked(ReasonChildConflict, err.Error())
		result = setup.RequeueAfter(setup.ForeignChildRetry)
		err = nil
	case errors.Is(err, errTooLarge):
		err = nil // recorded in obs; only a smaller spec helps
	case apierrors.IsConflict(err):
		// Someone wrote the child since our cache saw it: try again at once,
		// without telling the world about it.
		return ctrl.Result{}, err
	case err != nil:
		obs.failed = err
	}

	next := computeStatus(mv, obs)
	recordMetrics(mv, next)
	if _, perr := r.status.Patch(ctx, mv, next); perr != nil {
		return ctrl.Result{}, errors.Join(err, perr)
	}
	return result, err
}

// reconcileChildren runs the sub-reconcilers in order; the first error stops them.
func (r *Reconciler) reconcileChildren(ctx context.Context, mv *viewv1.MarkdownView, obs *observation) error {
	for _, step := range []func(context.Context, *viewv1.MarkdownView, *observation) error{
		r.reconcileConfigMap,
		r.reconcileDeployment,
		r.reconcileService,
	} {
		if err := step(ctx, mv, obs); err != nil {
			return err
		}
	}
	return nil
}

// reconcileConfigMap keeps the ConfigMap's data exactly equal to the spec's
// files (a file dropped from the spec disappears), writing only on a difference.
func (r *Reconciler) reconcileConfigMap(ctx context.Context, mv *viewv1.MarkdownView, obs *observation) error {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: configMapName(mv), Namespace: mv.Namespace}}
	exists, err := children.LookupOwned(ctx, r.children, mv, "ConfigMap", cm)
	if err != nil {
		return err
	}
	data := desiredConfigMapData(mv)
	if size := dataSize(data); size > maxConfigMapBytes {
		obs.blocked(ReasonMarkdownsTooLarge, fmt.Sprintf("markdowns take %d bytes, over the %d a ConfigMap can hold; the site keeps serving the last files that fit", size, maxConfigMapBytes))
		return errTooLarge
	}
	labels := childLabels(mv)
	if !exists {
		cm.Labels = labels
		cm.Data = data
		if err := controllerutil.SetControllerReference(mv, cm, r.client.Scheme()); err != nil {
			return err
		}
		if err := r.client.Create(ctx, cm); err != nil {
			return fmt.Errorf("creating ConfigMap %s: %w", cm.Name, err)
		}
		log.FromContext(ctx).Info("ConfigMap created", "configmap", cm.Name)
		return nil
	}
	if equality.Semantic.DeepEqual(cm.Data, data) && len(cm.BinaryData) == 0 && hasLabels(cm.Labels, labels) {
		return nil
	}
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	maps.Copy(cm.Labels, labels)
	cm.Data = data
	cm.BinaryData = nil
	if err := r.client.Update(ctx, cm); err != nil {
		return fmt.Errorf("updating ConfigMap %s: %w", cm.Name, err)
	}
	log.FromContext(ctx).Info("ConfigMap updated", "configmap", cm.Name)
	return nil
}

// dataSize counts a ConfigMap's data as the API server does: keys and values, in bytes.
func dataSize(data map[string]string) int {
	n := 0
	for k, v := range data {
		n += len(k) + len(v)
	}
	return n
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

// reconcileDeployment applies the viewer Deployment and records it for the status.
func (r *Reconciler) reconcileDeployment(ctx context.Context, mv *viewv1.MarkdownView, obs *observation) error {
	desired := desiredDeployment(mv, r.viewerImage)
	live := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: *desired.Name, Namespace: mv.Namespace}}
	applied, err := children.ApplyOwned(ctx, r.children, mv, "Deployment", live, desired, appsv1ac.ExtractDeployment)
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
