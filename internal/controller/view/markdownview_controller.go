// Package view reconciles MarkdownViews into a ConfigMap of Markdown files, a
// viewer Deployment that renders them, and a Service in front of it.
package view

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

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
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	viewv1 "github.com/trellis-dev/trellis/api/view/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/children"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/controller/statusmemo"
)

// ControllerName names the controller in flags, logs, metrics and Events.
const ControllerName = "markdownview"

// conflictRetry is how often a MarkdownView blocked by a child it does not own
// looks again: the foreign object is outside our cache, so its deletion is no event.
const conflictRetry = 2 * time.Minute

// maxConfigMapBytes is the API server's limit on a ConfigMap's data.
const maxConfigMapBytes = 1 << 20

// errBlocked stops the sub-reconcilers when only a person can fix what is
// wrong; the reason is in the observation and ends up in status.
var errBlocked = errors.New("blocked")

// Controller registers the MarkdownView controller with the manager.
var Controller = setup.Controller{
	Name:  ControllerName,
	Owned: []client.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}, &corev1.Service{}},
	Setup: func(_ context.Context, mgr ctrl.Manager, opts setup.Options) error {
		r := &Reconciler{
			Client:      mgr.GetClient(),
			APIReader:   mgr.GetAPIReader(),
			Recorder:    mgr.GetEventRecorder(ControllerName),
			ViewerImage: opts.ViewerImage,
		}
		return r.SetupWithManager(mgr, opts)
	},
}

// Reconciler reconciles MarkdownView objects.
type Reconciler struct {
	Client client.Client
	// APIReader reads past the cache, which holds only children Trellis labelled:
	// it tells "missing" from "exists but not ours" before anything is created.
	APIReader   client.Reader
	Recorder    recorder.EventRecorder
	ViewerImage string
	// written avoids re-sending a status the cache has not caught up with yet.
	written statusmemo.Memo
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
	if err := r.Client.Get(ctx, req.NamespacedName, mv); err != nil {
		if apierrors.IsNotFound(err) {
			forgetMetrics(req.NamespacedName)
			r.written.Forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !mv.DeletionTimestamp.IsZero() {
		// The children go with it through their owner references.
		return ctrl.Result{}, nil
	}

	var obs observation
	var result ctrl.Result
	err := r.reconcileChildren(ctx, mv, &obs)
	if errors.Is(err, errBlocked) {
		if obs.blockedReason == ReasonChildConflict {
			result.RequeueAfter = conflictRetry
		}
		err = nil
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.updateStatus(ctx, mv, obs); err != nil {
		return ctrl.Result{}, err
	}
	return result, nil
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
	exists, err := r.lookupOwned(ctx, mv, "ConfigMap", cm, obs)
	if err != nil {
		return err
	}
	data := desiredConfigMapData(mv)
	if size := dataSize(data); size > maxConfigMapBytes {
		obs.blockedReason = ReasonMarkdownsTooLarge
		obs.blockedMessage = fmt.Sprintf("markdowns take %d bytes, over the %d a ConfigMap can hold; the site keeps serving the last files that fit", size, maxConfigMapBytes)
		return errBlocked
	}
	labels := childLabels(mv)
	if !exists {
		cm.Labels = labels
		cm.Data = data
		if err := controllerutil.SetControllerReference(mv, cm, r.Client.Scheme()); err != nil {
			return err
		}
		if err := r.Client.Create(ctx, cm); err != nil {
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
	if err := r.Client.Update(ctx, cm); err != nil {
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

// reconcileDeployment applies the viewer Deployment, skipping the request when
// the fields we own already hold the desired values.
func (r *Reconciler) reconcileDeployment(ctx context.Context, mv *viewv1.MarkdownView, obs *observation) error {
	desired := desiredDeployment(mv, r.ViewerImage)
	live := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: *desired.Name, Namespace: mv.Namespace}}
	exists, err := r.lookupOwned(ctx, mv, "Deployment", live, obs)
	if err != nil {
		return err
	}
	var current *appsv1ac.DeploymentApplyConfiguration
	if exists {
		obs.deployment = live
		if current, err = appsv1ac.ExtractDeployment(live, setup.FieldManager); err != nil {
			return err
		}
	}
	applied, err := children.ApplyIfChanged(ctx, r.Client, desired, current, exists)
	if err != nil {
		return fmt.Errorf("applying Deployment %s: %w", *desired.Name, err)
	}
	if applied {
		log.FromContext(ctx).Info("Deployment applied", "deployment", *desired.Name)
	}
	return nil
}

// reconcileService applies the viewer Service, skipping unchanged ones like the Deployment.
func (r *Reconciler) reconcileService(ctx context.Context, mv *viewv1.MarkdownView, obs *observation) error {
	desired := desiredService(mv)
	live := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: *desired.Name, Namespace: mv.Namespace}}
	exists, err := r.lookupOwned(ctx, mv, "Service", live, obs)
	if err != nil {
		return err
	}
	var current *corev1ac.ServiceApplyConfiguration
	if exists {
		if current, err = corev1ac.ExtractService(live, setup.FieldManager); err != nil {
			return err
		}
	}
	applied, err := children.ApplyIfChanged(ctx, r.Client, desired, current, exists)
	if err != nil {
		return fmt.Errorf("applying Service %s: %w", *desired.Name, err)
	}
	if applied {
		log.FromContext(ctx).Info("Service applied", "service", *desired.Name)
	}
	return nil
}

// lookupOwned loads a child and refuses it when it exists but is not
// controlled by mv: Trellis never adopts an object it did not create.
func (r *Reconciler) lookupOwned(ctx context.Context, mv *viewv1.MarkdownView, kind string, obj client.Object, obs *observation) (bool, error) {
	exists, err := children.Lookup(ctx, r.Client, r.APIReader, obj)
	if err != nil || !exists {
		return exists, err
	}
	if !metav1.IsControlledBy(obj, mv) {
		return true, childConflict(obs, kind, obj.GetName())
	}
	return true, nil
}

func childConflict(obs *observation, kind, name string) error {
	obs.blockedReason = ReasonChildConflict
	obs.blockedMessage = fmt.Sprintf("%s %s already exists and is not controlled by this MarkdownView; delete or rename it", kind, name)
	return errBlocked
}

// updateStatus writes the status only when it differs from what is stored,
// and emits an Event when Ready flips.
func (r *Reconciler) updateStatus(ctx context.Context, mv *viewv1.MarkdownView, obs observation) error {
	if latest, ok := r.written.Latest(client.ObjectKeyFromObject(mv), mv.ResourceVersion); ok {
		st := latest.(viewv1.MarkdownViewStatus)
		mv.Status = *st.DeepCopy() // the cache has not seen our last write yet
	}
	next := computeStatus(mv, obs)
	recordMetrics(mv, next)
	if equality.Semantic.DeepEqual(mv.Status, next) {
		return nil
	}
	before := conditions.Get(mv.Status.Conditions, conditions.Ready)
	rvBefore := mv.ResourceVersion
	patch := client.MergeFrom(mv.DeepCopy())
	mv.Status = next
	if err := r.Client.Status().Patch(ctx, mv, patch); err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	r.written.Wrote(client.ObjectKeyFromObject(mv), rvBefore, *next.DeepCopy())
	log.FromContext(ctx).V(1).Info("status written", "conditions", summarize(next.Conditions), "availableReplicas", next.AvailableReplicas)
	// Events mark what a person may want to know: the site became Ready, or
	// something needs them. Rolling out is routine and stays out of the stream.
	after := conditions.Get(next.Conditions, conditions.Ready)
	changed := before == nil || before.Status != after.Status || before.Reason != after.Reason
	switch {
	case !changed:
	case after.Status == metav1.ConditionTrue:
		r.Recorder.Eventf(mv, nil, corev1.EventTypeNormal, after.Reason, "Reconcile", "%s", readyMessage(after))
	case conditions.IsTrue(next.Conditions, conditions.Degraded):
		r.Recorder.Eventf(mv, nil, corev1.EventTypeWarning, after.Reason, "Reconcile", "%s", readyMessage(after))
	}
	return nil
}

// summarize renders conditions compactly for debug logs.
func summarize(conds []metav1.Condition) string {
	var b strings.Builder
	for _, c := range conds {
		fmt.Fprintf(&b, "%s=%s/%s(%s) ", c.Type, c.Status, c.Reason, c.Message)
	}
	return b.String()
}

func readyMessage(c *metav1.Condition) string {
	if c.Message != "" {
		return c.Message
	}
	return "Ready is " + string(c.Status)
}
