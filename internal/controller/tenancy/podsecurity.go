// Pod Security that holds whatever ran before it. Pod Security admission
// judges a pod only when it is admitted: pods admitted under a looser level
// (before the spec raised it, in a namespace handed over, under a label
// someone else changed) keep running. The controller judges the pods of the
// tenant's namespaces with the checks the API server runs (the same library,
// k8s.io/pod-security-admission), reports those that do not meet the enforce
// level, and never touches them. Pods are not cached: they are listed, live
// and a page at a time, only where the level may have changed under them,
// and while some are known not to meet it.

package tenancy

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/children"
)

// ConditionPodsMeetPodSecurity is False while pods run in the tenant's
// namespaces that their enforce level would refuse; present only with a
// level above privileged. It does not hold Ready back: the level is in
// place, and every pod admitted since is held to it.
const ConditionPodsMeetPodSecurity = "PodsMeetPodSecurity"

// Reasons of PodsMeetPodSecurity.
const (
	ReasonPodsMeetLevel    = "AllPodsMeetLevel"
	ReasonPodsViolateLevel = "PodsViolateLevel"
)

const (
	// podPage is how many pods one list request returns: a namespace's
	// pods are judged a page at a time, never held all at once.
	podPage = 100
	// tenantMessagePods is how many pods the message names.
	tenantMessagePods = 5
)

// +kubebuilder:rbac:groups="",resources=pods,verbs=list

// podChecks are Pod Security admission's checks, at the versions of the
// Kubernetes release Trellis is built with.
var podChecks = func() policy.Evaluator {
	e, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		panic(fmt.Sprintf("the Pod Security library's own checks: %v", err))
	}
	return e
}()

// levelWrite is what the write of a namespace did to its enforce label.
type levelWrite int

const (
	// levelKept: the label is as it was (or the namespace was not written).
	levelKept levelWrite = iota
	// levelCreated: the namespace was created with it, so every pod in it
	// was admitted under it.
	levelCreated
	// levelChanged: the label was changed (the spec raised it, or it is put
	// back after someone else changed it): pods in the namespace were
	// admitted under another level.
	levelChanged
)

// levelWritten tells what a namespace's write did to its enforce label:
// before is the label as the write found it.
func levelWritten(outcome children.Outcome, before string, live *corev1.Namespace) levelWrite {
	switch {
	case outcome == children.Created:
		return levelCreated
	case outcome == children.Updated && live.Labels[podSecurityEnforceLabel] != before:
		return levelChanged
	}
	return levelKept
}

// podsObservation is what one reconcile found of the pods in the tenant's
// namespaces.
type podsObservation struct {
	// levels is what each namespace's write did to its enforce level.
	levels map[string]levelWrite
	// judged says the check ran; violating lists, per namespace judged, the
	// pods that do not meet the level.
	judged    bool
	violating map[string]violatingPods
}

// violatingPods are the pods of one namespace that do not meet its level:
// how many, and the first few by name with what they fail.
type violatingPods struct {
	count int
	first []violatingPod
}

type violatingPod struct{ name, fails string }

func (p *podsObservation) record(f found) {
	if f.level == levelKept {
		return
	}
	if p.levels == nil {
		p.levels = map[string]levelWrite{}
	}
	p.levels[f.namespace] = f.level
}

// judgedLevel is the enforce level the tenant's pods are judged against:
// baseline or restricted; "" when every pod meets it (privileged, or no
// podSecurity).
func judgedLevel(t *tenancyv1.Tenant) tenancyv1.PodSecurityLevel {
	if l := t.Spec.PodSecurity.Enforce; l == tenancyv1.PodSecurityBaseline || l == tenancyv1.PodSecurityRestricted {
		return l
	}
	return ""
}

// namespacesToJudge are the ready namespaces whose pods may have been
// admitted under another level, or are known not to meet it: all of them
// for a spec whose pods were not judged yet (the level raised, with the
// manager running or not, or a reconcile that stopped before the status)
// and while some pods were found not to meet it (so the report clears when
// they go); else those that became the tenant's since the last status
// (handed over, reclaimed) and those whose level this reconcile changed. A
// namespace this reconcile created holds no pod from before. An unchanged
// Tenant whose pods met its level judges none.
func namespacesToJudge(t *tenancyv1.Tenant, ready []string, wasReady map[string]bool, levels map[string]levelWrite) []string {
	c := conditions.Get(t.Status.Conditions, ConditionPodsMeetPodSecurity)
	all := c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != t.Generation
	var judge []string
	for _, ns := range ready {
		switch l := levels[ns]; {
		case l == levelCreated:
		case all, l == levelChanged, !wasReady[ns]:
			judge = append(judge, ns)
		}
	}
	return judge
}

// checkPodSecurity judges the pods of the namespaces namespacesToJudge
// names, side by side (at most maxParallelRequests at a time).
func (r *Reconciler) checkPodSecurity(ctx context.Context, s *scope) error {
	level := judgedLevel(s.t)
	if level == "" {
		return nil
	}
	judge := namespacesToJudge(s.t, s.obs.ready(), s.wasReady, s.obs.pods.levels)
	found := make([]violatingPods, len(judge))
	var g errgroup.Group
	g.SetLimit(maxParallelRequests)
	for i, ns := range judge {
		g.Go(func() (err error) {
			found[i], err = r.judgePods(ctx, ns, level)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	s.obs.pods.judged = true
	for i, ns := range judge {
		if found[i].count > 0 {
			if s.obs.pods.violating == nil {
				s.obs.pods.violating = map[string]violatingPods{}
			}
			s.obs.pods.violating[ns] = found[i]
		}
	}
	return nil
}

// judgePods lists the pods of a namespace from the API server, a page at a
// time, and judges every one that has not finished against the level, at
// the version the namespace pins (pod-security.kubernetes.io/enforce-version,
// a cluster admin's label: Trellis writes none), else the latest: as Pod
// Security admission judges a pod it admits.
func (r *Reconciler) judgePods(ctx context.Context, ns string, level tenancyv1.PodSecurityLevel) (violatingPods, error) {
	var out violatingPods
	version, err := r.enforceVersion(ctx, ns)
	if err != nil {
		return out, err
	}
	lv := api.LevelVersion{Level: api.Level(level), Version: version}
	next := ""
	for {
		page := &corev1.PodList{}
		if err := r.apiReader.List(ctx, page, client.InNamespace(ns), client.Limit(podPage), client.Continue(next)); err != nil {
			return out, fmt.Errorf("listing the pods of namespace %s: %w", ns, err)
		}
		for i := range page.Items {
			if fails, ok := violates(lv, &page.Items[i]); ok {
				out.count++
				out.first = append(out.first, violatingPod{name: page.Items[i].Name, fails: fails})
			}
		}
		// The first few by name, whatever order the pages come in.
		slices.SortFunc(out.first, func(a, b violatingPod) int { return strings.Compare(a.name, b.name) })
		out.first = out.first[:min(len(out.first), tenantMessagePods)]
		if next = page.Continue; next == "" {
			return out, nil
		}
	}
}

// violates reports whether a pod that still runs does not meet the level,
// and what it fails (the checks' short reasons, as the API server names
// them when it judges the pods of a namespace). A pod that has finished
// (Succeeded, Failed) runs nothing.
func violates(lv api.LevelVersion, pod *corev1.Pod) (string, bool) {
	if pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
		return "", false
	}
	res := policy.AggregateCheckResults(podChecks.EvaluatePod(lv, &pod.ObjectMeta, &pod.Spec))
	return res.ForbiddenReason(), !res.Allowed
}

// enforceVersion is the Pod Security version the namespace pins, from the
// cache; latest when it pins none, or the cache does not hold it yet (a
// namespace just handed over).
func (r *Reconciler) enforceVersion(ctx context.Context, ns string) (api.Version, error) {
	n := &corev1.Namespace{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
		if apierrors.IsNotFound(err) {
			return api.LatestVersion(), nil
		}
		return api.Version{}, fmt.Errorf("reading namespace %s: %w", ns, err)
	}
	v, _ := api.ParseVersion(n.Labels[api.EnforceVersionLabel]) // latest when unset or not a version
	return v, nil
}

// setPodSecurityCondition sets PodsMeetPodSecurity when the pods were
// judged, and removes it when no level above privileged is enforced; a
// reconcile that judged nothing leaves the last verdict.
func setPodSecurityCondition(st *tenancyv1.TenantStatus, t *tenancyv1.Tenant, obs *observation) {
	level := judgedLevel(t)
	switch {
	case level == "":
		meta.RemoveStatusCondition(&st.Conditions, ConditionPodsMeetPodSecurity)
	case !obs.pods.judged:
	case len(obs.pods.violating) > 0:
		conditions.Set(&st.Conditions, t.Generation, ConditionPodsMeetPodSecurity, false, ReasonPodsViolateLevel,
			podSecurityMessage(level, obs.namespaces, obs.pods.violating))
	default:
		conditions.Set(&st.Conditions, t.Generation, ConditionPodsMeetPodSecurity, true, ReasonPodsMeetLevel,
			fmt.Sprintf("every pod in the tenant's namespaces meets the Pod Security level %s", level))
	}
}

// podSecurityMessage names the first pods that do not meet the level
// (namespace/name and what they fail, in the order of the namespaces),
// counts them, and says what to do.
func podSecurityMessage(level tenancyv1.PodSecurityLevel, namespaces []tenancyv1.TenantNamespaceStatus, violating map[string]violatingPods) string {
	var named []string
	count := 0
	for _, ns := range namespaces {
		v := violating[ns.Name]
		count += v.count
		for _, p := range v.first {
			if len(named) < tenantMessagePods {
				named = append(named, fmt.Sprintf("%s/%s (%s)", ns.Name, p.name, p.fails))
			}
		}
	}
	if count == 1 {
		return fmt.Sprintf("pod %s does not meet the Pod Security level %s its namespace enforces: admission judges a pod "+
			"only when it is admitted, so it keeps running. New pods are held to the level; Trellis deletes none: "+
			"replace it with a pod that meets the level", named[0], level)
	}
	list := strings.Join(named, ", ")
	if more := count - len(named); more > 0 {
		list += fmt.Sprintf(" and %d more", more)
	}
	return fmt.Sprintf("%d pods do not meet the Pod Security level %s their namespaces enforce: %s. Admission judges a pod "+
		"only when it is admitted, so they keep running. New pods are held to the level; Trellis deletes none: "+
		"replace them with pods that meet the level", count, level, list)
}
