package setup

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/trellis-dev/trellis/internal/controller/apierr"
	"github.com/trellis-dev/trellis/internal/shard"
)

// ShardPredicate is the predicate of a Sharded controller's own kind: p,
// and on a shard (m, nil when the replica is none) also every event of an
// object whose drain label is set, whatever p says (the sharder's label
// change is no generation change).
func ShardPredicate(m *shard.Member, p predicate.Predicate) predicate.Predicate {
	if m == nil {
		return p
	}
	return predicate.Or(predicate.NewPredicateFuncs(func(obj client.Object) bool { return m.Draining(obj.GetLabels()) }), p)
}

// ShardReconciler wraps a Sharded controller's reconciler on a shard (m): an
// object of its kind (newObject) that carries the drain label has the shard
// and drain labels removed, conditionally on the version read, and is not
// reconciled: the sharder's webhook then gives it to its next shard, and
// this shard's cache, which selects the shard label, lets it go. If the
// webhook gives it back to this shard, r reconciles it at once. Anything
// else is reconciled by r. Off a shard it is r.
func ShardReconciler(m *shard.Member, controller string, c client.Client, newObject func() client.Object, r reconcile.Reconciler) reconcile.Reconciler {
	if m == nil {
		return r
	}
	return &drainer{member: *m, controller: controller, client: c, newObject: newObject, next: r}
}

type drainer struct {
	member     shard.Member
	controller string
	client     client.Client
	newObject  func() client.Object
	next       reconcile.Reconciler
}

func (d *drainer) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	obj := d.newObject()
	if err := d.client.Get(ctx, req.NamespacedName, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return d.next.Reconcile(ctx, req) // gone, or moved away: the controller forgets it
		}
		return ctrl.Result{}, fmt.Errorf("reading %s to see whether it is drained: %w", req.NamespacedName, err)
	}
	if !d.member.Draining(obj.GetLabels()) {
		return d.next.Reconcile(ctx, req)
	}
	patch := fmt.Sprintf(`{"metadata":{"resourceVersion":%q,"labels":{%q:null,%q:null}}}`,
		obj.GetResourceVersion(), d.member.ShardLabel(), d.member.DrainLabel())
	err := d.client.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(patch)))
	if apierrors.IsNotFound(err) {
		return ctrl.Result{}, nil
	}
	if apierr.Classify(err) == apierr.Conflict {
		return apierr.CountConflict(d.controller), nil // read stale: looked at again soon, no failure
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("handing %s on to the next shard: %w", req.NamespacedName, err)
	}
	if obj.GetLabels()[d.member.ShardLabel()] == d.member.Shard {
		// The webhook gave it straight back: the ring still hashes it here
		// (someone else set the drain label). The write that set the label
		// may have changed the spec too, and the label's removal is no
		// generation change, so no later event would bring it back.
		log.FromContext(ctx).Info("Drained, and handed back to this shard: reconciling it", "ring", d.member.Ring)
		return d.next.Reconcile(ctx, req)
	}
	log.FromContext(ctx).Info("Drained: handed on to the ring's next shard", "ring", d.member.Ring)
	return ctrl.Result{}, nil
}
