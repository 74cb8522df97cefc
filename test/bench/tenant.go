package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
)

// The Tenant scenario: N Tenants of 3 namespaces each against a floor that
// creates the same namespaces and RoleBindings directly.

func (b *bench) tenantScenario() error {
	ctx := context.Background()
	n := b.cfg.tenants
	log("floor: %d × 3 namespaces + RoleBindings created directly", n)
	start := time.Now()
	if err := parallel(n, b.cfg.workers, func(i int) error {
		for _, env := range []string{"dev", "stg", "prod"} {
			ns := fmt.Sprintf("floor-t%d-%s", i, env)
			if err := b.c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				return err
			}
			if err := b.c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-admin"},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
				Subjects: []rbacv1.Subject{{Kind: "Group", Name: fmt.Sprintf("t%d-admins", i), APIGroup: rbacv1.GroupName}}}); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		return err
	}
	floor := time.Since(start)

	before, _ := b.mgr.writes()
	log("trellis: %d Tenants", n)
	start = time.Now()
	if err := parallel(n, b.cfg.workers, func(i int) error {
		return b.c.Create(ctx, &tenancyv1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("t%d", i)}, Spec: tenancyv1.TenantSpec{
			Namespaces: []string{"dev", "stg", "prod"}, NamespacePrefix: ptr.To(fmt.Sprintf("t%d-", i)),
			Admins: []tenancyv1.Subject{{Kind: "Group", Name: fmt.Sprintf("t%d-admins", i), APIGroup: rbacv1.GroupName}}}})
	}); err != nil {
		return err
	}
	if err := waitFor(30*time.Minute, func() (bool, error) {
		list := &tenancyv1.TenantList{}
		if err := b.c.List(ctx, list); err != nil {
			return false, err
		}
		ok := 0
		for _, t := range list.Items {
			if meta.IsStatusConditionTrue(t.Status.Conditions, conditions.Ready) {
				ok++
			}
		}
		return ok >= n, nil
	}); err != nil {
		return fmt.Errorf("tenants: %w", err)
	}
	took := time.Since(start)
	time.Sleep(2 * time.Second)
	after, _ := b.mgr.writes()
	b.add(row{Scenario: fmt.Sprintf("%d Tenants × 3 namespaces", n), Figure: "time until all Ready", Value: took.Seconds(), Unit: "s",
		Floor: floor.Seconds(), Ratio: took.Seconds() / floor.Seconds(), Target: "≤ 1.2× floor", Met: took.Seconds() <= 1.2*floor.Seconds()})
	log("writes by resource: %s", after.minus(before))
	perTenant := (after.withoutEvents() - before.withoutEvents()) / float64(n)
	b.add(row{Scenario: "same", Figure: "API writes per tenant (Events excluded)", Value: perTenant, Unit: "writes",
		Target: "= 10 (docs/tenant.md)", Met: perTenant <= 10.05})
	return nil
}
