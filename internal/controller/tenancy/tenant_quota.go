// The tenant-wide quota (spec.quota.tenant): each namespace's ResourceQuota
// gets a share of the tenant's limits, moved as usage changes, so that the
// API server's own quota admission never admits more than the limits in all
// (internal/tenantquota says how and why that holds).

package tenancy

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/apierr"
	"github.com/trellis-dev/trellis/internal/controller/setup"
	"github.com/trellis-dev/trellis/internal/tenantquota"
)

// ConditionQuotaWithinLimit is False while the tenant's namespaces together
// use more than quota.tenant allows; present only with quota.tenant.
const ConditionQuotaWithinLimit = "QuotaWithinLimit"

// Reasons of QuotaWithinLimit, and of Ready while a new namespace's quota
// is not yet counted.
const (
	ReasonWithinLimit    = "WithinLimit"
	ReasonUsageOverLimit = "UsageOverLimit"
	ReasonQuotaPending   = "QuotaPending"
	// ReasonQuotaFrozen: a namespace of the tenant is being deleted, and no
	// quota goes up until it is gone (quotaPlan.going).
	ReasonQuotaFrozen = "FrozenWhileNamespaceDeleted"
	// ReasonReleaseUnrecorded: a quota labelled as the tenant's is in a
	// namespace labelled released by a Tenant of its name, without the UID
	// that says which (releaseUnrecorded): it is not counted, and a cluster
	// admin must say whose it is.
	ReasonReleaseUnrecorded = "ReleaseUnrecorded"
)

// quotaPlan is the tenant-wide quota of one reconcile: the quotas it was
// planned from (the cache, or the API server when a quota goes up) and the
// spec.hard each namespace's quota gets.
type quotaPlan struct {
	// seen is each ready namespace's quota as planned from; nil for none.
	seen map[string]*corev1.ResourceQuota
	// foreign are namespaces whose quota name someone else's object holds.
	foreign map[string]bool
	out     tenantquota.Outcome
	// live says the plan was made from a live read.
	live bool
	// going are the namespaces marked as this Tenant's that are being
	// deleted: while one exists, the plan is frozen (no quota goes up).
	going []string
	// unrecorded are the namespaces labelled released by a Tenant of this
	// name, without its UID, that hold a quota labelled as this tenant's:
	// not counted (releaseUnrecorded).
	unrecorded []string
}

// admits says whether the tenant's admins and viewers may be bound in ns:
// always without quota.tenant; with it, once the namespace's quota is
// counted by the quota controller (a quota not yet counted enforces
// nothing, so a new namespace stays empty until its quota holds).
func (p *quotaPlan) admits(ns string, limit corev1.ResourceList) bool {
	if p == nil {
		return true
	}
	return quotaNamespace(ns, p.seen[ns]).Counted(limit)
}

// planTenantQuota plans every ready namespace's share of quota.tenant, from
// the cache. When a share goes up (or a quota is created), the cache may
// not hold Trellis' own latest writes, which would count budget twice: the
// quotas are read again from the API server and the plan made again from
// that. An unchanged tenant thus costs cache reads only (and one list of
// the namespaces it released, when it left quotas outside its own).
//
// While a namespace of the tenant is being deleted, no quota goes up
// (Outcome.Freeze): the namespace controller deletes its quota in the same
// sweep as everything else, without waiting for what finalizers hold (a
// volume claim the team put a finalizer on stays, and its volume with it),
// so from then on nothing counts what the namespace still holds. Its
// namespaces are read after its quotas, so a quota found gone is one whose
// namespace is found being deleted, or gone with all it held. The Tenant
// is reconciled when it goes: the namespace keeps its marks to the end
// (release deletes it as it is), and its deletion maps to the Tenant.
func (r *Reconciler) planTenantQuota(ctx context.Context, s *scope, ready []string) error {
	limit := s.t.Spec.Quota.Tenant.Hard
	if len(limit) == 0 {
		s.quota = nil
		return nil
	}
	p := &quotaPlan{}
	plan := func(reader client.Reader) error {
		if err := r.readQuotas(ctx, s.t, ready, reader, p); err != nil {
			return err
		}
		left, marked, unrecorded, err := r.leftQuotas(ctx, s.t, ready, reader)
		if err != nil {
			return err
		}
		p.unrecorded = unrecorded
		nss := p.namespaces(ready)
		p.out = tenantquota.Plan(tenantquota.Remaining(limit, left), s.t.Spec.Quota.Hard, nss)
		p.going = nil
		for _, ns := range marked {
			if !ns.DeletionTimestamp.IsZero() {
				p.going = append(p.going, ns.Name)
			}
		}
		if len(p.going) > 0 {
			slices.Sort(p.going)
			p.out.Freeze(limit, nss)
		}
		return nil
	}
	if err := plan(r.client); err != nil {
		return err
	}
	if p.out.Raises {
		p.live = true
		if err := plan(r.apiReader); err != nil {
			return err
		}
	}
	s.quota = p
	return nil
}

// readQuotas reads each namespace's quota through reader, in parallel.
func (r *Reconciler) readQuotas(ctx context.Context, t *tenancyv1.Tenant, namespaces []string, reader client.Reader, p *quotaPlan) error {
	got := make([]*corev1.ResourceQuota, len(namespaces))
	foreign := make([]bool, len(namespaces))
	var g errgroup.Group
	g.SetLimit(maxParallelRequests)
	for i, ns := range namespaces {
		g.Go(func() error {
			q := &corev1.ResourceQuota{}
			err := reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: quotaName}, q)
			if apierrors.IsNotFound(err) {
				return nil
			}
			if err != nil {
				return fmt.Errorf("reading ResourceQuota %s/%s: %w", ns, quotaName, err)
			}
			ours, err := r.ownsChild(ctx, q, t)
			if err != nil {
				return err
			}
			if ours {
				got[i] = q
			} else {
				foreign[i] = true
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	p.seen, p.foreign = map[string]*corev1.ResourceQuota{}, map[string]bool{}
	for i, ns := range namespaces {
		p.seen[ns] = got[i]
		if foreign[i] {
			p.foreign[ns] = true
		}
	}
	return nil
}

// leftQuotas are the tenant's quotas outside its ready namespaces: in a
// namespace it released (Retain keeps the quota, and the team may still
// reach the namespace through credentials it made there) or one being
// deleted (its pods run until they are gone). They still count against
// quota.tenant, until a cluster admin removes them or the namespace is gone.
//
// A quota counts only where its namespace says it was this Tenant object's:
// still marked with its UID (dropped and not yet released, or being
// deleted), or released by it (releasedBy). The quota's own labels prove
// nothing: anyone who may write ResourceQuotas in some namespace can copy
// them, and a quota counted on its labels would shrink the tenant's budget
// to nothing. Nor does a released-from label without the releasing
// Tenant's UID: such namespaces are returned as unrecorded, for a cluster
// admin to settle. marked are the namespaces carrying t's marks, read after
// the quotas; the namespaces t released are outside the cache (the release
// took the managed-by label off), so they are listed from the API server,
// once, and only when a quota is in none of marked.
func (r *Reconciler) leftQuotas(ctx context.Context, t *tenancyv1.Tenant, ready []string, reader client.Reader) (
	left []tenantquota.Namespace, marked []corev1.Namespace, unrecorded []string, err error) {
	list := &corev1.ResourceQuotaList{}
	if err := reader.List(ctx, list, client.MatchingLabels{TenantLabel: t.Name, setup.ManagedByLabel: setup.ManagedByValue}); err != nil {
		return nil, nil, nil, fmt.Errorf("listing the ResourceQuotas of Tenant %s: %w", t.Name, err)
	}
	marked, err = markedNamespaces(ctx, t, reader)
	if err != nil {
		return nil, nil, nil, err
	}
	ours := map[string]bool{}
	for _, ns := range marked {
		ours[ns.Name] = true
	}
	candidates := make([]*corev1.ResourceQuota, 0, len(list.Items))
	releasedNeeded := false
	for i := range list.Items {
		q := &list.Items[i]
		if q.Name != quotaName || slices.Contains(ready, q.Namespace) {
			continue
		}
		candidates = append(candidates, q)
		releasedNeeded = releasedNeeded || !ours[q.Namespace]
	}
	unsure := map[string]bool{}
	if releasedNeeded {
		released := &corev1.NamespaceList{}
		if err := r.apiReader.List(ctx, released, client.MatchingLabels{ReleasedFromLabel: t.Name}); err != nil {
			return nil, nil, nil, fmt.Errorf("listing the namespaces Tenant %s released: %w", t.Name, err)
		}
		for i := range released.Items {
			ns := &released.Items[i]
			switch {
			case releasedBy(ns, t):
				ours[ns.Name] = true
			case releaseUnrecorded(ns, t):
				unsure[ns.Name] = true
			}
		}
	}
	for _, q := range candidates {
		switch {
		case ours[q.Namespace]:
			left = append(left, quotaNamespace(q.Namespace, q))
		case unsure[q.Namespace]:
			unrecorded = append(unrecorded, q.Namespace)
		}
	}
	slices.Sort(unrecorded)
	return left, marked, unrecorded, nil
}

// markedNamespaces lists the namespaces carrying t's marks through reader
// (the cache, or the API server), by the tenant label and the UID mark.
func markedNamespaces(ctx context.Context, t *tenancyv1.Tenant, reader client.Reader) ([]corev1.Namespace, error) {
	list := &corev1.NamespaceList{}
	if err := reader.List(ctx, list, client.MatchingLabels{TenantLabel: t.Name}); err != nil {
		return nil, fmt.Errorf("listing the namespaces of Tenant %s: %w", t.Name, err)
	}
	return slices.DeleteFunc(list.Items, func(ns corev1.Namespace) bool { return !isMarkedBy(ns.Annotations, t) }), nil
}

func (p *quotaPlan) namespaces(names []string) []tenantquota.Namespace {
	out := make([]tenantquota.Namespace, 0, len(names))
	for _, ns := range names {
		out = append(out, quotaNamespace(ns, p.seen[ns]))
	}
	return out
}

func quotaNamespace(ns string, q *corev1.ResourceQuota) tenantquota.Namespace {
	if q == nil {
		return tenantquota.Namespace{Name: ns}
	}
	return tenantquota.Namespace{Name: ns, Exists: true, Spec: q.Spec.Hard, Status: q.Status.Hard, Used: q.Status.Used}
}

// tenantQuotaWrite keeps one namespace's quota at its planned share. Every
// change is written against the quota as planned from: created only if
// there was none, patched only if it is unchanged since (a resourceVersion
// precondition). A quota that moved in between (usage counted, a status
// synced) loses the race, and the reconcile is made again from fresh reads.
func (r *Reconciler) tenantQuotaWrite(s *scope, ns string) write {
	return func(ctx context.Context) (found, error) {
		f := found{namespace: ns}
		desired := &corev1.ResourceQuota{
			ObjectMeta: childMeta(s.t, ns, quotaName),
			Spec:       corev1.ResourceQuotaSpec{Hard: s.quota.out.Hard[ns]},
		}
		seen := s.quota.seen[ns]
		if s.quota.foreign[ns] {
			f.conflict = fmt.Sprintf("ResourceQuota %s/%s exists and was not created by this Tenant; it is left untouched", ns, quotaName)
			return f, nil
		}
		if seen == nil {
			return r.createTenantQuota(ctx, s, desired)
		}
		live := seen.DeepCopy()
		changed := syncMarks(live, s.t)
		if !equality.Semantic.DeepEqual(live.Spec, desired.Spec) {
			live.Spec = desired.Spec
			changed = true
		}
		if !changed {
			f.quota = seen
			return f, nil
		}
		err := r.client.Patch(ctx, live, client.MergeFromWithOptions(seen, client.MergeFromWithOptimisticLock{}))
		switch {
		case err == nil:
			log.FromContext(ctx).V(1).Info("tenant quota moved", "namespace", ns, "hard", live.Spec.Hard)
			f.quota = live
		case apierrors.IsNotFound(err) || apierr.Classify(err) == apierr.Conflict:
			f.raced = err
		case apierr.Classify(err) == apierr.Refused:
			f.refused = []string{fmt.Sprintf("the API server refused ResourceQuota %s/%s: %s", ns, quotaName, apierr.Message(err))}
		default:
			return f, fmt.Errorf("updating ResourceQuota %s/%s: %w", ns, quotaName, err)
		}
		return f, nil
	}
}

// createTenantQuota creates a namespace's quota with its first share. A
// create refused because the name is taken is someone else's object (a
// conflict) or one of ours the plan did not see (a race).
func (r *Reconciler) createTenantQuota(ctx context.Context, s *scope, desired *corev1.ResourceQuota) (found, error) {
	f := found{namespace: desired.Namespace}
	err := r.client.Create(ctx, desired)
	switch {
	case err == nil:
		f.quota = desired
		return f, nil
	case apierrors.IsAlreadyExists(err):
		live := &corev1.ResourceQuota{}
		if gerr := r.apiReader.Get(ctx, client.ObjectKeyFromObject(desired), live); gerr != nil {
			return f, fmt.Errorf("reading ResourceQuota %s/%s after a create refused as existing: %w", desired.Namespace, quotaName, gerr)
		}
		ours, oerr := r.ownsChild(ctx, live, s.t)
		switch {
		case oerr != nil:
			return f, oerr
		case ours:
			f.raced = err
		default:
			f.conflict = fmt.Sprintf("ResourceQuota %s/%s exists and was not created by this Tenant; it is left untouched", desired.Namespace, quotaName)
		}
		return f, nil
	case apierr.Classify(err) == apierr.Refused:
		f.refused = []string{fmt.Sprintf("the API server refused ResourceQuota %s/%s: %s", desired.Namespace, quotaName, apierr.Message(err))}
		return f, nil
	}
	return f, fmt.Errorf("creating ResourceQuota %s/%s: %w", desired.Namespace, quotaName, err)
}

// quotaKeys are the resources the status sums: those of quota.hard and of
// quota.tenant.
func quotaKeys(t *tenancyv1.Tenant) corev1.ResourceList {
	keys := t.Spec.Quota.Hard.DeepCopy()
	for r, q := range t.Spec.Quota.Tenant.Hard {
		if keys == nil {
			keys = corev1.ResourceList{}
		}
		if _, ok := keys[r]; !ok {
			keys[r] = q
		}
	}
	return keys
}

// report puts what the plan found in the observation: the tenant's limits
// as the status' hard (the per-namespace limits summed, where smaller), the
// namespaces whose quota is not yet counted, usage over a limit, and the
// released namespaces whose quota cannot be told this tenant's.
func (p *quotaPlan) report(obs *observation, t *tenancyv1.Tenant, ready []string) {
	if p == nil {
		return
	}
	obs.tenantQuota = true
	obs.unrecorded = p.unrecorded
	limit := t.Spec.Quota.Tenant.Hard
	if obs.quotaHard != nil {
		for r, l := range limit {
			h := l.DeepCopy()
			if c, ok := t.Spec.Quota.Hard[r]; ok {
				sum := c.DeepCopy()
				sum.Mul(int64(len(ready)))
				if sum.Cmp(h) < 0 {
					h = sum
				}
			}
			obs.quotaHard[r] = h
		}
	}
	for _, ns := range ready {
		if !p.foreign[ns] && !p.admits(ns, limit) {
			obs.quotaPending = append(obs.quotaPending, ns)
		}
	}
	if len(p.out.Over) > 0 {
		parts := make([]string, 0, len(p.out.Over))
		for _, r := range p.out.Over {
			used, l := p.out.Used[r], limit[r]
			parts = append(parts, fmt.Sprintf("%s %s of %s", r, used.String(), l.String()))
		}
		obs.quotaOver = "the namespaces together use more than the tenant's limit (" + strings.Join(parts, ", ") +
			"): every namespace's quota is held at its usage, so nothing more is admitted until usage falls under the limit; nothing is deleted"
	}
	switch len(p.going) {
	case 0:
	case 1:
		obs.quotaFrozen = "namespace " + p.going[0] + " of this tenant is being deleted, and what it still holds " +
			"(objects kept by finalizers) is no longer counted by its quota: no namespace's quota goes up until it is gone"
	default:
		obs.quotaFrozen = "namespaces " + strings.Join(p.going, ", ") + " of this tenant are being deleted, and what they still hold " +
			"(objects kept by finalizers) is no longer counted by their quotas: no namespace's quota goes up until they are gone"
	}
}

// setQuotaCondition sets QuotaWithinLimit with quota.tenant, and removes it
// without; a reconcile that stopped before the plan leaves it as it was.
func setQuotaCondition(st *tenancyv1.TenantStatus, t *tenancyv1.Tenant, obs *observation) {
	gen := t.Generation
	switch {
	case len(t.Spec.Quota.Tenant.Hard) == 0:
		meta.RemoveStatusCondition(&st.Conditions, ConditionQuotaWithinLimit)
	case !obs.tenantQuota:
	case obs.quotaOver != "" && obs.quotaFrozen != "":
		conditions.Set(&st.Conditions, gen, ConditionQuotaWithinLimit, false, ReasonUsageOverLimit, obs.quotaOver+"; "+obs.quotaFrozen)
	case obs.quotaOver != "":
		conditions.Set(&st.Conditions, gen, ConditionQuotaWithinLimit, false, ReasonUsageOverLimit, obs.quotaOver)
	case obs.quotaFrozen != "":
		conditions.Set(&st.Conditions, gen, ConditionQuotaWithinLimit, true, ReasonQuotaFrozen,
			"the namespaces together use no more than the tenant's limit; "+obs.quotaFrozen)
	default:
		conditions.Set(&st.Conditions, gen, ConditionQuotaWithinLimit, true, ReasonWithinLimit,
			"the namespaces together use no more than the tenant's limit")
	}
}

// quotaPendingSummary is Ready's word while a namespace's quota is not
// counted yet: its admins and viewers are bound once it is.
func quotaPendingSummary(pending []string) conditions.Summary {
	return conditions.Summary{Progress: conditions.Working, Reason: ReasonQuotaPending,
		Message: "waiting for the quota controller to count the ResourceQuota of " + strings.Join(pending, ", ") +
			": admins and viewers are bound there once it enforces the tenant's limit"}
}
