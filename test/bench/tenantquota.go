package main

import (
	"context"
	"fmt"
	"regexp"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
)

// The tenantquota scenario: what quota.tenant costs when usage changes.
// N Tenants of 10 namespaces, each with a tenant-wide limit on pods and
// requests.cpu; once all are Ready, one pod is created in one namespace of
// every Tenant, then deleted, and the manager's ResourceQuota writes (and
// live reads) are counted until every quota is settled again. A CPU share
// is counted in milli-CPUs, so a usage change moves every namespace's
// share: about one write per namespace per change is the equal split's
// price.

const quotaTenantNamespaces = 10

var quotaBenchNamespace = regexp.MustCompile(`^q[0-9]+-n[0-9]+$`)

func quotaBenchTenant(i int) *tenancyv1.Tenant {
	name := fmt.Sprintf("q%d", i)
	nss := make([]string, quotaTenantNamespaces)
	for k := range nss {
		nss[k] = fmt.Sprintf("n%d", k)
	}
	return &tenancyv1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"bench.trellis.dev/variant": "quota"}},
		Spec: tenancyv1.TenantSpec{
			Namespaces:      nss,
			NamespacePrefix: ptr.To(name + "-"),
			Admins:          []tenancyv1.Subject{{Kind: "Group", Name: name + "-admins", APIGroup: rbacv1.GroupName}},
			Quota: tenancyv1.TenantQuota{Tenant: tenancyv1.TenantWideQuota{Hard: corev1.ResourceList{
				"pods": resource.MustParse("100"), "requests.cpu": resource.MustParse("20")}}},
		},
	}
}

func (b *bench) tenantQuotaScenario() error {
	ctx := context.Background()
	n := b.cfg.tenants
	if err := b.restartManagerSettled(b.tenantCount()); err != nil {
		return err
	}
	if err := b.installAdmissionPolicy(); err != nil {
		return err
	}
	start := time.Now()
	if err := parallel(n, b.cfg.workers, func(i int) error { return b.c.Create(ctx, quotaBenchTenant(i)) }); err != nil {
		return err
	}
	if _, err := waitTenantsReady(ctx, b.wc, client.MatchingLabels{"bench.trellis.dev/variant": "quota"}, n, 30*time.Minute); err != nil {
		return err
	}
	log("tenantquota: %d Tenants × %d namespaces Ready in %s", n, quotaTenantNamespaces, time.Since(start).Round(time.Second))
	if err := b.waitQuotasSettled(ctx, n); err != nil {
		return err
	}
	pod := func(i int) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("q%d-n%d", i, i%quotaTenantNamespaces), Name: "usage"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example.com/app:1",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{"cpu": resource.MustParse("250m")}}}}},
		}
	}
	changes := []struct {
		name string
		do   func(i int) error
	}{
		{"a pod created", func(i int) error { return b.c.Create(ctx, pod(i)) }},
		{"a pod deleted", func(i int) error {
			return b.c.Delete(ctx, pod(i), client.GracePeriodSeconds(0))
		}},
	}
	for _, change := range changes {
		w0, err := b.mgr.requests()
		if err != nil {
			return err
		}
		r0, err := b.mgr.reconciles("tenant")
		if err != nil {
			return err
		}
		began := time.Now()
		if err := parallel(n, b.cfg.workers, change.do); err != nil {
			return fmt.Errorf("%s: %w", change.name, err)
		}
		if err := b.waitQuotasSettled(ctx, n); err != nil {
			return err
		}
		w1, err := b.mgr.requests()
		if err != nil {
			return err
		}
		r1, err := b.mgr.reconciles("tenant")
		if err != nil {
			return err
		}
		d := w1.sub(w0)
		writes := d["PATCH resourcequotas"] + d["POST resourcequotas"] + d["PUT resourcequotas"]
		log("tenantquota, %s in each of %d Tenants: settled in %s; requests %v", change.name, n, time.Since(began).Round(time.Second), d)
		scenario := fmt.Sprintf("%d Tenants × %d namespaces, quota.tenant on pods and CPU, %s in each", n, quotaTenantNamespaces, change.name)
		b.add(row{Scenario: scenario, Figure: "ResourceQuota writes per usage change", Value: writes / float64(n), Unit: "writes",
			Target: fmt.Sprintf("report (≈ %d: one per namespace)", quotaTenantNamespaces), Met: true})
		b.add(row{Scenario: "same", Figure: "live ResourceQuota reads per usage change", Value: d["GET resourcequotas"] / float64(n), Unit: "reads",
			Target: "report", Met: true})
		b.add(row{Scenario: "same", Figure: "Tenant reconciles per usage change", Value: (r1 - r0) / float64(n), Unit: "reconciles",
			Target: "report", Met: true})
	}
	return nil
}

// waitQuotasSettled waits until the quota controller has counted every
// quota of the scenario's Tenants as Trellis last wrote it, and the manager
// has written no quota for three seconds.
func (b *bench) waitQuotasSettled(ctx context.Context, n int) error {
	last, stable := -1.0, 0
	return waitFor(30*time.Minute, func() (bool, error) {
		time.Sleep(time.Second)
		w, err := b.mgr.writes()
		if err != nil {
			return false, err
		}
		if w["resourcequotas"] != last {
			last, stable = w["resourcequotas"], 0
			return false, nil
		}
		list := &corev1.ResourceQuotaList{}
		if err := b.c.List(ctx, list, client.MatchingLabels{"app.kubernetes.io/managed-by": "trellis"}); err != nil {
			return false, err
		}
		counted := 0
		for _, q := range list.Items {
			if !quotaBenchNamespace.MatchString(q.Namespace) {
				continue
			}
			if !equality.Semantic.DeepEqual(q.Spec.Hard, q.Status.Hard) {
				stable = 0
				return false, nil
			}
			counted++
		}
		if counted < n*quotaTenantNamespaces {
			return false, nil
		}
		stable++
		return stable >= 3, nil
	})
}
