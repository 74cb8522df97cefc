package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
	"github.com/trellis-dev/trellis/internal/controller/tenancy"
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

// writeKind is one kind of write, made n times by the bench's workers.
type writeKind struct {
	name string
	// perTenant is how many writes of this kind one Tenant of 3 namespaces
	// has, without guardrails and with every one (the floor's 8 and 20, and
	// the Tenant's own 2).
	perTenant [2]float64
	tenant    bool // the Tenant's own write, not in the floor
	write     func(ctx context.Context, c client.Client, round, i int) error
	// settle, if set, says when the cluster's own follow-up of the writes
	// (beyond the controller-manager's writes into new namespaces, which
	// every kind waits for) is done; its cost is part of the write's.
	settle func(ctx context.Context, round int) (bool, error)
}

func (b *bench) writeCostScenario() error {
	ctx := context.Background()
	b.mgr.stop()
	if err := b.installAdmissionPolicy(); err != nil {
		return err
	}
	n := b.cfg.tenants
	const rounds = 3
	name := func(prefix string, round, i int) string { return fmt.Sprintf("%s%s%d", prefix, roundName(round), i) }
	// A namespace for the RoleBindings of each round, made before it.
	bindingsIn := func(round int) string { return "writecost-" + roundName(round) }
	// The Tenants each round creates, kept for their status patches, so that
	// a patch is sent from the object in hand, as the controller sends it
	// from its cache, and no read is counted as part of the write.
	var mu sync.Mutex
	made := map[string]*tenancyv1.Tenant{}
	tenantName := func(variant, round, i int) string { return name(fmt.Sprintf("wc%d-", variant), round, i) }
	tenantCreate := func(what string, variant int) writeKind {
		k := writeKind{name: "Tenant create, " + what, tenant: true, write: func(ctx context.Context, c client.Client, round, i int) error {
			t := benchTenant(tenantVariants[variant], 0, i)
			t.ObjectMeta = metav1.ObjectMeta{Name: tenantName(variant, round, i)}
			t.Spec.NamespacePrefix = ptr.To(t.Name + "-")
			if err := c.Create(ctx, t); err != nil {
				return err
			}
			mu.Lock()
			defer mu.Unlock()
			made[t.Name] = t
			return nil
		}}
		k.perTenant[variant] = 1
		return k
	}
	tenantStatusPatch := func(what string, variant int) writeKind {
		k := writeKind{name: "Tenant status patch, " + what, tenant: true, write: func(ctx context.Context, c client.Client, round, i int) error {
			mu.Lock()
			t := made[tenantName(variant, round, i)]
			mu.Unlock()
			if t == nil {
				return fmt.Errorf("tenant %s was not created", tenantName(variant, round, i))
			}
			base := t.DeepCopy()
			t.Status = readyTenantStatus(t)
			return c.Status().Patch(ctx, t, client.MergeFrom(base))
		}}
		k.perTenant[variant] = 1
		return k
	}
	kinds := []writeKind{
		{name: "Namespace create", perTenant: [2]float64{3, 3}, write: func(ctx context.Context, c client.Client, round, i int) error {
			return c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name("wcns-", round, i),
				Labels: map[string]string{"app.kubernetes.io/managed-by": "bench"}}})
		}},
		{name: "RoleBinding create", perTenant: [2]float64{3, 6}, write: func(ctx context.Context, c client.Client, round, i int) error {
			return c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: bindingsIn(round), Name: name("wcrb-", round, i)},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
				Subjects: []rbacv1.Subject{{Kind: "Group", Name: name("wc-", round, i) + "-admins", APIGroup: rbacv1.GroupName}}})
		}},
		{name: "ClusterRole create", perTenant: [2]float64{1, 1}, write: func(ctx context.Context, c client.Client, round, i int) error {
			n := name("wccr-", round, i)
			return c.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: n}, Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"tenancy.trellis.dev"}, Resources: []string{"tenants"}, ResourceNames: []string{n}, Verbs: []string{"get", "watch"}},
				{APIGroups: []string{""}, Resources: []string{"namespaces"}, ResourceNames: []string{n + "-dev", n + "-stg", n + "-prod"}, Verbs: []string{"get", "watch"}},
			}})
		}},
		{name: "ClusterRoleBinding create", perTenant: [2]float64{1, 1}, write: func(ctx context.Context, c client.Client, round, i int) error {
			n := name("wccr-", round, i)
			return c.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: n},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: n},
				Subjects: []rbacv1.Subject{{Kind: "Group", Name: n + "-admins", APIGroup: rbacv1.GroupName}}})
		}},
		{name: "ResourceQuota create", perTenant: [2]float64{0, 3}, settle: func(ctx context.Context, round int) (bool, error) {
			quotas := &corev1.ResourceQuotaList{}
			if err := b.c.List(ctx, quotas, client.InNamespace(bindingsIn(round))); err != nil {
				return false, err
			}
			for _, q := range quotas.Items {
				if len(q.Status.Hard) == 0 {
					return false, nil
				}
			}
			return true, nil
		}, write: func(ctx context.Context, c client.Client, round, i int) error {
			q := benchTenant(tenantVariants[1], 0, i).Spec.Quota.Hard
			return c.Create(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: bindingsIn(round), Name: name("wcrq-", round, i)},
				Spec: corev1.ResourceQuotaSpec{Hard: q}})
		}},
		{name: "LimitRange create", perTenant: [2]float64{0, 3}, write: func(ctx context.Context, c client.Client, round, i int) error {
			l := benchTenant(tenantVariants[1], 0, i).Spec.LimitRange.Limits[0]
			return c.Create(ctx, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: bindingsIn(round), Name: name("wclr-", round, i)},
				Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: l.Type, Max: l.Max, Min: l.Min, Default: l.Default, DefaultRequest: l.DefaultRequest}}}})
		}},
		{name: "NetworkPolicy create", perTenant: [2]float64{0, 3}, write: func(ctx context.Context, c client.Client, round, i int) error {
			return c.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: bindingsIn(round), Name: name("wcnp-", round, i)},
				Spec: networkingv1.NetworkPolicySpec{
					PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
					Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
						{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tenancy.trellis.dev/tenant": name("wc-", round, i)}}},
						{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
							Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{"ingress-nginx"}}}}},
					}}},
				}})
		}},
		tenantCreate("no guardrails", 0), tenantStatusPatch("no guardrails", 0),
		tenantCreate("every guardrail", 1), tenantStatusPatch("every guardrail", 1),
	}
	// perWrite[k] holds the API server CPU per write of kind k, one per round.
	perWrite := make([][]float64, len(kinds))
	for round := range rounds {
		if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: bindingsIn(round)}}); err != nil {
			return err
		}
		for k, kind := range kinds {
			if err := b.waitControllerManagerCaughtUp(ctx); err != nil {
				return err
			}
			idle, err := b.apiServerIdle()
			if err != nil {
				return err
			}
			cpu0, err := b.cpu()
			if err != nil {
				return err
			}
			start := time.Now()
			if err := parallel(n, b.cfg.workers, func(i int) error { return kind.write(ctx, b.c, round, i) }); err != nil {
				return fmt.Errorf("%s: %w", kind.name, err)
			}
			// A namespace's cost includes what the controller-manager writes
			// into it (its ServiceAccount and root-CA ConfigMap), a quota's
			// the quota controller's status.
			if err := b.waitControllerManagerCaughtUp(ctx); err != nil {
				return err
			}
			if kind.settle != nil {
				if err := waitFor(10*time.Minute, func() (bool, error) { return kind.settle(ctx, round) }, 200*time.Millisecond); err != nil {
					return fmt.Errorf("%s: %w", kind.name, err)
				}
			}
			took := time.Since(start)
			cpu1, err := b.cpu()
			if err != nil {
				return err
			}
			busy := cpu1.minus(cpu0)["kube-apiserver"] - idle*took.Seconds()
			perWrite[k] = append(perWrite[k], busy/float64(n)*1000)
			log("write cost, round %s: %d × %s: %s, API server %.2f ms of CPU each (idle %.2f cores subtracted)",
				roundName(round), n, kind.name, took.Round(time.Millisecond), busy/float64(n)*1000, idle)
		}
	}
	var floor, tenant [2]float64
	for k, kind := range kinds {
		ms := median(perWrite[k])
		b.add(row{Scenario: fmt.Sprintf("writes with the manager stopped, %d of each, median of %d rounds", n, rounds),
			Figure: "API server CPU per " + kind.name, Value: ms, Unit: "ms", Target: "report", Met: true})
		for v := range floor {
			if kind.tenant {
				tenant[v] += kind.perTenant[v] * ms
			} else {
				floor[v] += kind.perTenant[v] * ms
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
		Type: conditions.Ready, Status: metav1.ConditionTrue, Reason: tenancy.ReasonReady, ObservedGeneration: t.Generation,
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
