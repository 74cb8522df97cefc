package tenancy

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func markedNamespace() *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:        "acme-dev",
		Labels:      map[string]string{TenantLabel: "acme", "app.kubernetes.io/managed-by": "trellis", "team": "x"},
		Annotations: map[string]string{TenantUIDAnnotation: "uid-acme", "note": "y"},
	}}
}

func TestNamespaceChanged(t *testing.T) {
	cases := map[string]struct {
		change func(*corev1.Namespace)
		want   bool
	}{
		"nothing":    {change: func(*corev1.Namespace) {}, want: false},
		"phase":      {change: func(ns *corev1.Namespace) { ns.Status.Phase = corev1.NamespaceActive }, want: false},
		"finalizers": {change: func(ns *corev1.Namespace) { ns.Spec.Finalizers = []corev1.FinalizerName{"kubernetes"} }, want: false},
		// Labels and annotations may be guardrails (Pod Security levels, the
		// tenant's metadata) or a hand-over: any change of them is looked at.
		"a label":               {change: func(ns *corev1.Namespace) { ns.Labels["team"] = "z" }, want: true},
		"an annotation":         {change: func(ns *corev1.Namespace) { ns.Annotations["note"] = "z" }, want: true},
		"a Pod Security label":  {change: func(ns *corev1.Namespace) { ns.Labels[podSecurityEnforceLabel] = "privileged" }, want: true},
		"a hand-over":           {change: func(ns *corev1.Namespace) { ns.Annotations[HandOverAnnotation] = "acme" }, want: true},
		"tenant label":          {change: func(ns *corev1.Namespace) { delete(ns.Labels, TenantLabel) }, want: true},
		"managed-by label":      {change: func(ns *corev1.Namespace) { ns.Labels["app.kubernetes.io/managed-by"] = "me" }, want: true},
		"tenant UID annotation": {change: func(ns *corev1.Namespace) { ns.Annotations[TenantUIDAnnotation] = "other" }, want: true},
		"deletion started":      {change: func(ns *corev1.Namespace) { now := metav1.Now(); ns.DeletionTimestamp = &now }, want: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			old, updated := markedNamespace(), markedNamespace()
			tc.change(updated)
			g.Expect(namespaceChanged.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: updated})).To(Equal(tc.want))
		})
	}
}

func TestChildToTenant(t *testing.T) {
	g := NewWithT(t)
	g.Expect(childToTenant(context.Background(), markedNamespace())).To(Equal([]reconcile.Request{{NamespacedName: client.ObjectKey{Name: "acme"}}}))
	g.Expect(childToTenant(context.Background(), &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{
		Namespace: "acme-dev", Name: quotaName, Labels: map[string]string{TenantLabel: "acme"}}})).
		To(Equal([]reconcile.Request{{NamespacedName: client.ObjectKey{Name: "acme"}}}), "namespaced children map to their cluster-scoped Tenant")
	g.Expect(childToTenant(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}})).To(BeEmpty())

	// A namespace being handed over also wakes the Tenant it is handed to.
	handed := markedNamespace()
	handed.Annotations[HandOverAnnotation] = "bolt"
	g.Expect(childToTenant(context.Background(), handed)).To(Equal([]reconcile.Request{
		{NamespacedName: client.ObjectKey{Name: "acme"}}, {NamespacedName: client.ObjectKey{Name: "bolt"}},
	}))
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{HandOverAnnotation: "bolt"}}}
	g.Expect(childToTenant(context.Background(), quota)).To(BeEmpty(), "only namespaces are handed over")
}

// TestNamespaceGoneWakesItsTenant: a namespace deleted under Delete keeps
// its marks to the end, and its disappearance reaches its Tenant, whose
// quotas are frozen until then (tenant_quota.go).
func TestNamespaceGoneWakesItsTenant(t *testing.T) {
	g := NewWithT(t)
	ns := markedNamespace()
	now := metav1.Now()
	ns.DeletionTimestamp = &now
	g.Expect(namespaceChanged.Delete(event.DeleteEvent{Object: ns})).To(BeTrue())
	g.Expect(childToTenant(context.Background(), ns)).To(Equal([]reconcile.Request{{NamespacedName: client.ObjectKey{Name: "acme"}}}))
}
