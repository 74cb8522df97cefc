// Package leaderpod labels the pod of the replica that holds the
// leader-election lease, so that a Service selecting the label (the
// bucket-event receiver's) reaches the leader alone, and moves the label
// when the lease changes hands.
//
// It reads pods straight from the API server, one by name or a label-selected
// list in the manager's namespace, so the manager caches no pods.
package leaderpod

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/trellis-dev/trellis/internal/jitter"
)

// Label marks the leader's pod; its value is "true".
const Label = "trellis.dev/leader"

// Defaults of Labeller's timings.
const (
	DefaultInterval   = 30 * time.Second
	DefaultMinBackoff = time.Second
)

var labelled = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "trellis_leader_pod_labelled",
	Help: "1 while this replica leads and its pod alone carries the trellis.dev/leader label; 0 otherwise (a standby, or the label write failing).",
})

func init() { metrics.Registry.MustRegister(labelled) }

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;patch,namespace=system

// Labeller keeps Label on Pod while this replica leads, and off it otherwise.
// Add both of its Runnables to the manager (SetupWithManager): Startup runs on
// every replica, Leader only on the one holding the lease.
type Labeller struct {
	// Pod is this replica's own pod (the downward API's POD_NAME and POD_NAMESPACE).
	Pod types.NamespacedName
	// Reader reads pods uncached (the manager's APIReader).
	Reader client.Reader
	// Writer patches pods.
	Writer client.Writer
	// Interval is how often (±10%) the leader checks the labels again, which
	// undoes a stale or hand-made label; DefaultInterval when 0.
	Interval time.Duration
	// MinBackoff is the first wait after a failed write, doubling up to
	// Interval; DefaultMinBackoff when 0.
	MinBackoff time.Duration

	once    sync.Once
	cleared chan struct{} // closed once Startup has taken the label off Pod
}

// SetupWithManager adds the Labeller's two Runnables to mgr.
func (l *Labeller) SetupWithManager(mgr manager.Manager) error {
	return errors.Join(mgr.Add(l.Startup()), mgr.Add(l.Leader()))
}

// Startup takes the label off this replica's own pod, on every replica and
// whether or not it will lead: a container restarted in the same pod keeps
// the pod's labels. Leader waits for it, so it never undoes the leader's own
// label.
func (l *Labeller) Startup() manager.Runnable { return startup{l} }

// Leader puts the label on this replica's pod and takes it off every other
// pod of the namespace, then checks again every Interval until leadership
// ends, when it takes its own label off (best effort: a replica that starts
// in this pod again, or the next leader, does it too).
func (l *Labeller) Leader() manager.Runnable { return leader{l} }

type startup struct{ l *Labeller }

func (startup) NeedLeaderElection() bool { return false }

func (s startup) Start(ctx context.Context) error {
	l := s.l
	log := l.log()
	l.retry(ctx, func() error { return l.setOwn(ctx, false) }, func(err error) {
		log.Error(err, "taking the leader label off this replica's pod; retrying", "pod", l.Pod)
	}, func() bool { return false })
	if ctx.Err() == nil {
		close(l.clearedChan())
	}
	return nil
}

type leader struct{ l *Labeller }

func (leader) NeedLeaderElection() bool { return true }

func (r leader) Start(ctx context.Context) error {
	l := r.l
	log := l.log()
	select {
	case <-l.clearedChan():
	case <-ctx.Done():
		return nil
	}
	l.retry(ctx, func() error { return l.ensure(ctx) }, func(err error) {
		labelled.Set(0)
		log.Error(err, "labelling the leader's pod; the bucket-events Service may reach no replica until this succeeds", "pod", l.Pod)
	}, func() bool {
		labelled.Set(1)
		return true
	})
	labelled.Set(0)
	stop, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := l.setOwn(stop, false); err != nil {
		log.Error(err, "taking the leader label off this pod on the way out", "pod", l.Pod)
	}
	return nil
}

// retry runs step until ctx ends: after a failure it calls failed and waits
// MinBackoff, doubling up to Interval; after a success it calls done, and
// waits Interval if done returns true, else returns.
func (l *Labeller) retry(ctx context.Context, step func() error, failed func(error), done func() bool) {
	interval, backoff := l.interval(), l.minBackoff()
	wait := backoff
	for {
		var next time.Duration
		if err := step(); err != nil {
			if ctx.Err() != nil {
				return
			}
			failed(err)
			next, wait = wait, min(2*wait, interval)
		} else {
			if !done() {
				return
			}
			next, wait = jitter.Duration(interval, 0.1), backoff
		}
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// ensure puts the label on Pod, then takes it off any other pod of Pod's
// namespace that carries it. Reads first: a pass that finds the labels as
// they should be writes nothing.
func (l *Labeller) ensure(ctx context.Context) error {
	if err := l.setOwn(ctx, true); err != nil {
		return err
	}
	pods := &corev1.PodList{}
	if err := l.Reader.List(ctx, pods, client.InNamespace(l.Pod.Namespace), client.MatchingLabels{Label: "true"}); err != nil {
		return fmt.Errorf("listing pods labelled %s: %w", Label, err)
	}
	var errs []error
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.Name == l.Pod.Name {
			continue
		}
		if err := l.patch(ctx, p, false); client.IgnoreNotFound(err) != nil {
			errs = append(errs, err)
		} else if err == nil {
			l.log().Info("took the leader label off a pod that no longer leads", "pod", client.ObjectKeyFromObject(p))
		}
	}
	return errors.Join(errs...)
}

// setOwn puts the label on Pod (on) or takes it off, if it is not so already.
func (l *Labeller) setOwn(ctx context.Context, on bool) error {
	pod := &corev1.Pod{}
	if err := l.Reader.Get(ctx, l.Pod, pod); err != nil {
		return fmt.Errorf("reading this replica's pod %s: %w", l.Pod, err)
	}
	if v, present := pod.Labels[Label]; (on && v == "true") || (!on && !present) {
		return nil
	}
	if err := l.patch(ctx, pod, on); err != nil {
		return err
	}
	if on {
		l.log().Info("labelled this replica's pod as the leader's", "pod", l.Pod, "label", Label)
	}
	return nil
}

// patch sets (on) or removes the label with a merge patch of the labels alone.
func (l *Labeller) patch(ctx context.Context, pod *corev1.Pod, on bool) error {
	value := "null"
	if on {
		value = `"true"`
	}
	p := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"labels":{%q:%s}}}`, Label, value))
	target := &corev1.Pod{}
	target.Namespace, target.Name = pod.Namespace, pod.Name
	if err := l.Writer.Patch(ctx, target, p); err != nil {
		return fmt.Errorf("patching the %s label of pod %s/%s: %w", Label, pod.Namespace, pod.Name, err)
	}
	return nil
}

func (l *Labeller) clearedChan() chan struct{} {
	l.once.Do(func() { l.cleared = make(chan struct{}) })
	return l.cleared
}

func (l *Labeller) interval() time.Duration {
	if l.Interval > 0 {
		return l.Interval
	}
	return DefaultInterval
}

func (l *Labeller) minBackoff() time.Duration {
	if l.MinBackoff > 0 {
		return l.MinBackoff
	}
	return DefaultMinBackoff
}

func (l *Labeller) log() logr.Logger { return ctrl.Log.WithName("leader-pod") }
