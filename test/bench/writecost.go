package main

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
)

// The write-cost scenario (writecost):
// what one write of each kind a Tenant involves costs the API server, with
// the manager stopped, so that nothing but the bench writes. It answers how
// close to the Tenant floor any operator with a Tenant object can come: the
// floor sends a tenant's eight child writes, an operator also has the user's
// create of the Tenant and its status patch, and a write of a custom
// resource costs the API server more than one of a built-in kind (JSON,
// schema, CEL validation, admission policies). It runs last: it stops the
// manager.

// writeBatch is one kind of write: the objects of that kind of n Tenants'
// floors, or one of the Tenant's own writes for n Tenants.
type writeBatch struct {
	kind string
	// perTenant is how many writes of this kind one Tenant has, without
	// guardrails and with every one.
	perTenant [2]float64
	tenant    bool // the Tenant's own write, not in the floor
	writes    []func(ctx context.Context) error
}

func (b *bench) writeCostScenario() error {
	ctx := context.Background()
	b.mgr.stop()
	if err := b.installAdmissionPolicy(); err != nil {
		return err
	}
	n := b.cfg.tenants
	const rounds = 3
	perWrite := map[string][]float64{} // by kind, one per round
	var kinds []writeBatch             // every round has the same kinds and counts
	for round := range rounds {
		kinds = b.writeBatches(n, round)
		for _, batch := range kinds {
			ms, err := b.measureWrites(ctx, batch, round)
			if err != nil {
				return err
			}
			perWrite[batch.kind] = append(perWrite[batch.kind], ms)
		}
	}
	var floor, tenant [2]float64
	for _, batch := range kinds {
		ms := median(perWrite[batch.kind])
		b.add(row{Scenario: fmt.Sprintf("writes of %d Tenants with the manager stopped, median of %d rounds", n, rounds),
			Figure: "API server CPU per " + batch.kind, Value: ms, Unit: "ms", Target: "report", Met: true})
		for v := range floor {
			if batch.tenant {
				tenant[v] += batch.perTenant[v] * ms
			} else {
				floor[v] += batch.perTenant[v] * ms
			}
		}
	}
	for v, what := range []string{"no guardrails: its 8 child writes and the Tenant's own 2 (create, status), against the 8",
		"every guardrail: its 20 child writes and the Tenant's own 2, against the 20"} {
		b.add(row{Scenario: "same", Figure: "API server CPU per Tenant, " + what,
			Value: floor[v] + tenant[v], Unit: "ms", Floor: floor[v], Ratio: (floor[v] + tenant[v]) / floor[v],
			Target: "report (the least ratio any operator with a Tenant object can have)", Met: true})
	}
	return nil
}

// writeBatches are round's writes, by kind, in an order that can be created:
// the objects of n Tenants' floors with every guardrail (floorTenantObjects,
// so the same objects, labels and admission as the Tenant floor), grouped
// by kind, namespaces first; then, for each variant, n Tenants created and
// their statuses patched. A status patch is sent from the Tenant the create
// returned, as the controller sends it from its cache: no read is counted.
func (b *bench) writeBatches(n, round int) []writeBatch {
	// How many objects of each kind one Tenant's floor has, per variant.
	var counts [2]map[string]float64
	for v := range counts {
		counts[v] = map[string]float64{}
		for _, o := range floorTenantObjects(tenantVariants[v], "count", 0).all() {
			counts[v][createKind(o)]++
		}
	}
	batches := make([]writeBatch, 0, len(counts[1])+4) // the floor's kinds, the Tenant's 2 writes × 2 variants
	byKind := map[string]int{}
	for i := range n {
		for _, o := range floorTenantObjects(tenantVariants[1], fmt.Sprintf("wc%s%d", roundName(round), i), i).all() {
			kind := createKind(o)
			k, ok := byKind[kind]
			if !ok {
				k = len(batches)
				byKind[kind] = k
				batches = append(batches, writeBatch{kind: kind, perTenant: [2]float64{counts[0][kind], counts[1][kind]}})
			}
			batches[k].writes = append(batches[k].writes, func(ctx context.Context) error { return b.c.Create(ctx, o) })
		}
	}
	for v, what := range []string{"no guardrails", "every guardrail"} {
		create := writeBatch{kind: "Tenant create, " + what, tenant: true}
		patch := writeBatch{kind: "Tenant status patch, " + what, tenant: true}
		create.perTenant[v], patch.perTenant[v] = 1, 1
		for i := range n {
			t := benchTenant(tenantVariants[v], 0, i)
			t.ObjectMeta = metav1.ObjectMeta{Name: fmt.Sprintf("wc%d-%s%d", v, roundName(round), i)}
			t.Spec.NamespacePrefix = ptr.To(t.Name + "-")
			create.writes = append(create.writes, func(ctx context.Context) error { return b.c.Create(ctx, t) })
			patch.writes = append(patch.writes, func(ctx context.Context) error {
				base := t.DeepCopy()
				t.Status = readyTenantStatus(t)
				return b.c.Status().Patch(ctx, t, client.MergeFrom(base))
			})
		}
		batches = append(batches, create, patch)
	}
	return batches
}

// createKind names the write that creates o, by its Go type: "RoleBinding create".
func createKind(o client.Object) string { return reflect.TypeOf(o).Elem().Name() + " create" }

// measureWrites sends a batch's writes and returns the API server's CPU per
// write, its idle use subtracted. The window closes when the cluster's own
// follow-up is done: the controller-manager's ServiceAccount and root-CA
// ConfigMap in every new namespace, the quota controller's status of every
// ResourceQuota.
func (b *bench) measureWrites(ctx context.Context, batch writeBatch, round int) (float64, error) {
	if err := b.waitControllerManagerCaughtUp(ctx); err != nil {
		return 0, err
	}
	idle, err := b.apiServerIdle()
	if err != nil {
		return 0, err
	}
	cpu0, err := b.cpu()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	if err := parallel(len(batch.writes), b.cfg.workers, func(i int) error { return batch.writes[i](ctx) }); err != nil {
		return 0, fmt.Errorf("%s: %w", batch.kind, err)
	}
	if err := b.waitControllerManagerCaughtUp(ctx); err != nil {
		return 0, err
	}
	if err := waitFor(10*time.Minute, func() (bool, error) { return b.quotasSettled(ctx) }, 200*time.Millisecond); err != nil {
		return 0, fmt.Errorf("%s: %w", batch.kind, err)
	}
	took := time.Since(start)
	cpu1, err := b.cpu()
	if err != nil {
		return 0, err
	}
	ms := (cpu1.minus(cpu0)["kube-apiserver"] - idle*took.Seconds()) / float64(len(batch.writes)) * 1000
	log("write cost, round %s: %d × %s: %s, API server %.2f ms of CPU each (idle %.2f cores subtracted)",
		roundName(round), len(batch.writes), batch.kind, took.Round(time.Millisecond), ms, idle)
	return ms, nil
}

// quotasSettled says whether the quota controller has written the status of
// every ResourceQuota.
func (b *bench) quotasSettled(ctx context.Context) (bool, error) {
	quotas := &corev1.ResourceQuotaList{}
	if err := b.c.List(ctx, quotas); err != nil {
		return false, err
	}
	for _, q := range quotas.Items {
		if len(q.Status.Hard) == 0 {
			return false, nil
		}
	}
	return true, nil
}

// apiServerIdle is the API server's CPU use, in cores, over a quiet second.
func (b *bench) apiServerIdle() (float64, error) {
	cpu0, err := b.cpu()
	if err != nil {
		return 0, err
	}
	time.Sleep(time.Second)
	cpu1, err := b.cpu()
	if err != nil {
		return 0, err
	}
	return cpu1.minus(cpu0)["kube-apiserver"], nil
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// readyTenantStatus is the status the Tenant controller writes for a Tenant
// of three Ready namespaces (its condition message, namespace list and, with
// a quota, the tenant-wide quota summed over its namespaces, none used yet).
func readyTenantStatus(t *tenancyv1.Tenant) tenancyv1.TenantStatus {
	st := tenancyv1.TenantStatus{ObservedGeneration: t.Generation, Conditions: []metav1.Condition{{
		Type: conditions.Ready, Status: metav1.ConditionTrue, Reason: conditions.ReasonReady, ObservedGeneration: t.Generation,
		LastTransitionTime: metav1.Now(),
		Message:            fmt.Sprintf("%d namespaces ready, administered by Group %s", len(t.Spec.Namespaces), t.Spec.Admins[0].Name),
	}}}
	for _, env := range t.Spec.Namespaces {
		st.Namespaces = append(st.Namespaces, tenancyv1.TenantNamespaceStatus{Name: *t.Spec.NamespacePrefix + env, State: tenancyv1.NamespaceReady})
	}
	if len(t.Spec.Quota.Hard) > 0 {
		st.Quota = tenancyv1.TenantQuotaStatus{Hard: corev1.ResourceList{}, Used: corev1.ResourceList{}}
		for r, q := range t.Spec.Quota.Hard {
			sum := q.DeepCopy()
			for range len(t.Spec.Namespaces) - 1 {
				sum.Add(q)
			}
			st.Quota.Hard[r] = sum
			st.Quota.Used[r] = resource.Quantity{Format: q.Format}
		}
	}
	return st
}
