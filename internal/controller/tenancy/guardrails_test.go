package tenancy

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/conditions"
)

// expectGuardrails checks that namespace ns holds exactly what tenant t declares.
func expectGuardrails(g Gomega, t *tenancyv1.Tenant, ns string) {
	ctx := context.Background()
	q := &corev1.ResourceQuota{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: quotaName}, q)).To(Succeed())
	g.Expect(equality.Semantic.DeepEqual(q.Spec, desiredQuota(t, ns).Spec)).To(BeTrue(), "quota %+v", q.Spec)
	lr := &corev1.LimitRange{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: limitRangeName}, lr)).To(Succeed())
	g.Expect(equality.Semantic.DeepEqual(lr.Spec, desiredLimitRange(t, ns).Spec)).To(BeTrue(), "limit range %+v", lr.Spec)
	np := &networkingv1.NetworkPolicy{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: networkPolicyName}, np)).To(Succeed())
	g.Expect(equality.Semantic.DeepEqual(np.Spec, desiredNetworkPolicy(t, ns).Spec)).To(BeTrue(), "network policy %+v", np.Spec)
	viewers := &rbacv1.RoleBinding{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: viewerRoleBindingName}, viewers)).To(Succeed())
	g.Expect(viewers.RoleRef.Name).To(Equal("view"))
	g.Expect(viewers.Subjects).To(Equal(viewerSubjects(t)))
	got := getNamespace(g, ns)
	g.Expect(got.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", string(t.Spec.PodSecurity.Enforce)))
	g.Expect(got.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/warn", string(t.Spec.PodSecurity.Warn)))
	g.Expect(got.Labels).To(HaveKeyWithValue(NetworkIsolationLabel, "true"))
	g.Expect(got.Labels).To(HaveKeyWithValue("cost-center", "42"))
	g.Expect(got.Annotations).To(HaveKeyWithValue("example.com/owner", t.Name))
}

// TestGuardrailsDriftIsRestored: every guardrail is created as declared;
// edited or deleted by a cluster admin, it is put back.
func TestGuardrailsDriftIsRestored(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tenant := newGuardedTenant("guard", "guard-", "a", "b")
	tenant.Spec.Viewers = []tenancyv1.Subject{subjectGroup("auditors")}
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	tenant = eventuallyReady(g, "guard")
	for _, ns := range []string{"guard-a", "guard-b"} {
		expectGuardrails(g, tenant, ns)
	}
	g.Eventually(func(g Gomega) {
		g.Expect(canI(g, "auditors", "list", "pods", "", "guard-a", "")).To(BeFalse(), "envtest aggregates no roles: view is empty here")
		g.Expect(canI(g, "auditors", "get", "tenants", "tenancy.trellis.dev", "", "guard")).To(BeTrue(), "viewers may read their Tenant")
		g.Expect(canI(g, "auditors", "get", "namespaces", "", "", "guard-b")).To(BeTrue(), "and its namespaces")
	}, timeout, interval).Should(Succeed())

	drifts := map[string]func(g Gomega){
		"quota loosened and extended": func(g Gomega) {
			q := &corev1.ResourceQuota{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "guard-a", Name: quotaName}, q)).To(Succeed())
			q.Spec.Hard["pods"] = resource.MustParse("1000")
			q.Spec.Hard["services"] = resource.MustParse("5")
			g.Expect(k8s.Update(ctx, q)).To(Succeed())
		},
		"quota deleted": func(g Gomega) {
			g.Expect(k8s.Delete(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "guard-a", Name: quotaName}})).To(Succeed())
		},
		"limit range loosened": func(g Gomega) {
			lr := &corev1.LimitRange{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "guard-b", Name: limitRangeName}, lr)).To(Succeed())
			lr.Spec.Limits[0].Max = corev1.ResourceList{"cpu": resource.MustParse("64")}
			lr.Spec.Limits[0].Default = corev1.ResourceList{"cpu": resource.MustParse("64")}
			g.Expect(k8s.Update(ctx, lr)).To(Succeed())
		},
		"limit range deleted": func(g Gomega) {
			g.Expect(k8s.Delete(ctx, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: "guard-b", Name: limitRangeName}})).To(Succeed())
		},
		"network policy opened to every namespace": func(g Gomega) {
			np := &networkingv1.NetworkPolicy{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "guard-a", Name: networkPolicyName}, np)).To(Succeed())
			np.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}}}
			g.Expect(k8s.Update(ctx, np)).To(Succeed())
		},
		"network policy deleted": func(g Gomega) {
			g.Expect(k8s.Delete(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "guard-b", Name: networkPolicyName}})).To(Succeed())
		},
		"viewers binding deleted": func(g Gomega) {
			g.Expect(k8s.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "guard-a", Name: viewerRoleBindingName}})).To(Succeed())
		},
		"Pod Security loosened": func(g Gomega) {
			ns := getNamespace(g, "guard-a")
			ns.Labels["pod-security.kubernetes.io/enforce"] = "privileged"
			g.Expect(k8s.Update(ctx, ns)).To(Succeed())
		},
		"Pod Security and metadata labels removed": func(g Gomega) {
			ns := getNamespace(g, "guard-b")
			delete(ns.Labels, "pod-security.kubernetes.io/enforce")
			delete(ns.Labels, "pod-security.kubernetes.io/warn")
			delete(ns.Labels, NetworkIsolationLabel)
			delete(ns.Labels, "cost-center")
			delete(ns.Annotations, "example.com/owner")
			g.Expect(k8s.Update(ctx, ns)).To(Succeed())
		},
	}
	for name, drift := range drifts {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			drift(g)
			g.Eventually(func(g Gomega) {
				for _, ns := range []string{"guard-a", "guard-b"} {
					expectGuardrails(g, tenant, ns)
				}
			}, timeout, interval).Should(Succeed())
		})
	}
	deleteTenant(g, "guard")
}

// TestGuardrailsRemovedFromTheSpecLeaveTheNamespaces is capsule#465 the
// other way round: what the spec no longer asks for does not stay behind.
func TestGuardrailsRemovedFromTheSpecLeaveTheNamespaces(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tenant := newGuardedTenant("shed", "shed-", "a", "b")
	tenant.Spec.Viewers = []tenancyv1.Subject{subjectGroup("auditors")}
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	eventuallyReady(g, "shed")
	// A label a cluster admin put on the namespace stays whatever happens.
	ns := getNamespace(g, "shed-a")
	ns.Labels["owner"] = "platform"
	g.Expect(k8s.Update(ctx, ns)).To(Succeed())

	gone := func(g Gomega, obj client.Object, name string) {
		for _, n := range []string{"shed-a", "shed-b"} {
			err := k8s.Get(ctx, client.ObjectKey{Namespace: n, Name: name}, obj)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s/%s: %v", obj, n, name, err)
		}
	}
	steps := []struct {
		name   string
		change func(*tenancyv1.Tenant)
		check  func(g Gomega)
	}{
		{"quota", func(t *tenancyv1.Tenant) { t.Spec.Quota = tenancyv1.TenantQuota{} }, func(g Gomega) {
			gone(g, &corev1.ResourceQuota{}, quotaName)
			g.Expect(getTenant(g, "shed").Status.Quota).To(Equal(tenancyv1.TenantQuotaStatus{}), "no quota, no tenant-wide sum")
		}},
		{"limitRange", func(t *tenancyv1.Tenant) { t.Spec.LimitRange = tenancyv1.TenantLimitRange{} }, func(g Gomega) {
			gone(g, &corev1.LimitRange{}, limitRangeName)
		}},
		{"networkIsolation", func(t *tenancyv1.Tenant) { t.Spec.NetworkIsolation = nil }, func(g Gomega) {
			gone(g, &networkingv1.NetworkPolicy{}, networkPolicyName)
			g.Expect(getNamespace(g, "shed-b").Labels).NotTo(HaveKey(NetworkIsolationLabel))
		}},
		{"viewers", func(t *tenancyv1.Tenant) { t.Spec.Viewers = nil }, func(g Gomega) {
			gone(g, &rbacv1.RoleBinding{}, viewerRoleBindingName)
			g.Expect(canI(g, "auditors", "get", "tenants", "tenancy.trellis.dev", "", "shed")).To(BeFalse())
		}},
		{"podSecurity", func(t *tenancyv1.Tenant) { t.Spec.PodSecurity = tenancyv1.PodSecurity{} }, func(g Gomega) {
			for _, n := range []string{"shed-a", "shed-b"} {
				g.Expect(getNamespace(g, n).Labels).NotTo(HaveKey("pod-security.kubernetes.io/enforce"))
				g.Expect(getNamespace(g, n).Labels).NotTo(HaveKey("pod-security.kubernetes.io/warn"))
			}
		}},
		{"namespaceMetadata", func(t *tenancyv1.Tenant) { t.Spec.NamespaceMetadata = tenancyv1.NamespaceMetadata{} }, func(g Gomega) {
			for _, n := range []string{"shed-a", "shed-b"} {
				g.Expect(getNamespace(g, n).Labels).NotTo(HaveKey("cost-center"))
				g.Expect(getNamespace(g, n).Annotations).NotTo(HaveKey("example.com/owner"))
			}
		}},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			g := NewWithT(t)
			current := getTenant(g, "shed")
			step.change(current)
			g.Expect(k8s.Update(ctx, current)).To(Succeed())
			g.Eventually(step.check, timeout, interval).Should(Succeed())
			eventuallyReady(g, "shed")
		})
	}
	// What is left is the tenant itself: marks and the admins' binding.
	for _, n := range []string{"shed-a", "shed-b"} {
		got := getNamespace(g, n)
		g.Expect(got.Labels).To(HaveKeyWithValue(TenantLabel, "shed"))
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: n, Name: adminRoleBindingName}, &rbacv1.RoleBinding{})).To(Succeed())
	}
	g.Expect(getNamespace(g, "shed-a").Labels).To(HaveKeyWithValue("owner", "platform"))
	deleteTenant(g, "shed")
}

// TestRetainedNamespaceKeepsItsRestrictionsNotItsAccess: a namespace that
// leaves the spec under Retain keeps everything the team put in it, every
// label someone else set, and every restriction Trellis put there (Pod
// Security labels, quota, limit range, network policy: releasing never
// loosens anything); what gave the tenant access goes (its bindings, marks
// and namespaceMetadata), and the namespace is marked released (by the
// Tenant's name and UID).
func TestRetainedNamespaceKeepsItsRestrictionsNotItsAccess(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tenant := newGuardedTenant("ret", "ret-", "a", "b")
	tenant.Spec.Viewers = []tenancyv1.Subject{subjectGroup("auditors")}
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	tenant = eventuallyReady(g, "ret")
	// The team's own things, and a cluster admin's label.
	g.Expect(k8s.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ret-b", Name: "data"}})).To(Succeed())
	g.Expect(k8s.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "ret-b", Name: "team-ci"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "ci", Namespace: "ret-b"}}})).To(Succeed())
	g.Expect(k8s.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "ret-b", Name: "team-deny-egress"},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}}})).To(Succeed())
	ns := getNamespace(g, "ret-b")
	ns.Labels["owner"] = "platform"
	g.Expect(k8s.Update(ctx, ns)).To(Succeed())
	kept := map[string]client.Object{
		quotaName: &corev1.ResourceQuota{}, limitRangeName: &corev1.LimitRange{}, networkPolicyName: &networkingv1.NetworkPolicy{},
	}
	uids := map[string]types.UID{}
	for name, obj := range kept {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "ret-b", Name: name}, obj)).To(Succeed())
		uids[name] = obj.GetUID()
	}

	current := getTenant(g, "ret")
	current.Spec.Namespaces = []string{"a"}
	g.Expect(k8s.Update(ctx, current)).To(Succeed())

	g.Eventually(func(g Gomega) {
		got := getNamespace(g, "ret-b")
		g.Expect(got.Labels).To(Equal(map[string]string{
			"kubernetes.io/metadata.name": "ret-b", "owner": "platform",
			"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted",
			NetworkIsolationLabel: "true", ReleasedFromLabel: "ret",
		}))
		g.Expect(got.Annotations).To(Equal(map[string]string{ReleasedFromUIDAnnotation: string(tenant.UID)}),
			"the release records which Tenant object made it")
		for _, name := range []string{adminRoleBindingName, viewerRoleBindingName} {
			err := k8s.Get(ctx, client.ObjectKey{Namespace: "ret-b", Name: name}, &rbacv1.RoleBinding{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "RoleBinding %s: %v", name, err)
		}
	}, timeout, interval).Should(Succeed())
	eventuallyReady(g, "ret")
	// The restrictions stayed, as they were: the same objects, unchanged.
	g.Expect(getNamespace(g, "ret-b").DeletionTimestamp).To(BeNil())
	q := &corev1.ResourceQuota{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "ret-b", Name: quotaName}, q)).To(Succeed())
	g.Expect(equality.Semantic.DeepEqual(q.Spec, desiredQuota(tenant, "ret-b").Spec)).To(BeTrue(), "quota %+v", q.Spec)
	lr := &corev1.LimitRange{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "ret-b", Name: limitRangeName}, lr)).To(Succeed())
	g.Expect(equality.Semantic.DeepEqual(lr.Spec, desiredLimitRange(tenant, "ret-b").Spec)).To(BeTrue(), "limit range %+v", lr.Spec)
	np := &networkingv1.NetworkPolicy{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "ret-b", Name: networkPolicyName}, np)).To(Succeed())
	g.Expect(equality.Semantic.DeepEqual(np.Spec, desiredNetworkPolicy(tenant, "ret-b").Spec)).To(BeTrue(), "network policy %+v", np.Spec)
	for name, obj := range kept {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "ret-b", Name: name}, obj)).To(Succeed())
		g.Expect(obj.GetUID()).To(Equal(uids[name]), "%s kept, not re-created", name)
	}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "ret-b", Name: "data"}, &corev1.ConfigMap{})).To(Succeed())
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "ret-b", Name: "team-ci"}, &rbacv1.RoleBinding{})).To(Succeed())
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "ret-b", Name: "team-deny-egress"}, &networkingv1.NetworkPolicy{})).To(Succeed())
	// The namespace that stayed keeps everything.
	expectGuardrails(g, getTenant(g, "ret"), "ret-a")
	deleteTenant(g, "ret")
	// Deleting the Tenant leaves the released namespace's restrictions alone.
	for name, obj := range kept {
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "ret-b", Name: name}, obj)).To(Succeed())
		g.Expect(obj.GetUID()).To(Equal(uids[name]))
	}
}

// TestQuotaUsageIsSummedOverTheNamespaces: status and metric give the
// tenant-wide figures. envtest runs no quota controller, so the test writes
// the usage it would count.
func TestQuotaUsageIsSummedOverTheNamespaces(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, newGuardedTenant("sum", "sum-", "a", "b", "c"))).To(Succeed())
	tenant := eventuallyReady(g, "sum")
	g.Expect(tenant.Status.Quota.Hard).To(HaveKeyWithValue(corev1.ResourceName("pods"), resource.MustParse("30")))
	g.Expect(tenant.Status.Quota.Hard).To(HaveKeyWithValue(corev1.ResourceName("requests.cpu"), resource.MustParse("6")))
	g.Expect(tenant.Status.Quota.Used).To(HaveKeyWithValue(corev1.ResourceName("pods"), resource.MustParse("0")))

	for ns, used := range map[string]corev1.ResourceList{
		"sum-a": {"pods": resource.MustParse("3"), "requests.cpu": resource.MustParse("500m")},
		"sum-b": {"pods": resource.MustParse("2"), "requests.cpu": resource.MustParse("1")},
	} {
		q := &corev1.ResourceQuota{}
		g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: quotaName}, q)).To(Succeed())
		q.Status = corev1.ResourceQuotaStatus{Hard: q.Spec.Hard, Used: used}
		g.Expect(k8s.Status().Update(ctx, q)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		used := getTenant(g, "sum").Status.Quota.Used
		g.Expect(used.Pods().Value()).To(Equal(int64(5)))
		g.Expect(used.Name("requests.cpu", resource.DecimalSI).MilliValue()).To(Equal(int64(1500)))
	}, timeout, interval).Should(Succeed())
	g.Expect(gauge(g, "trellis_tenant_quota_used", "sum", "pods")).To(Equal(5.0))
	g.Expect(gauge(g, "trellis_tenant_quota_used", "sum", "requests.cpu")).To(Equal(1.5))
	g.Expect(gauge(g, "trellis_tenant_quota_hard", "sum", "pods")).To(Equal(30.0))
	deleteTenant(g, "sum")
}

// gauge reads one series of a gauge from the manager's metrics registry.
func gauge(g Gomega, name, tenant, res string) float64 {
	families, err := metrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.Metric {
			if label(m, "tenant") == tenant && label(m, "resource") == res {
				return m.GetGauge().GetValue()
			}
		}
	}
	g.Expect(fmt.Sprintf("%s{tenant=%q,resource=%q}", name, tenant, res)).To(BeEmpty(), "no such series")
	return 0
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.Label {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestServiceAccountInAMissingNamespaceIsReported: the binding is made as
// declared (Ready), and SubjectsFound says it grants nothing yet, with a
// Warning Event; once the namespace exists, the verdict clears.
func TestServiceAccountInAMissingNamespaceIsReported(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tenant := newTenant("subj", "subj-", "a")
	tenant.Spec.Admins = append(tenant.Spec.Admins, tenancyv1.Subject{Kind: "ServiceAccount", Name: "deployer", Namespace: "ci-later"})
	tenant.Spec.Viewers = []tenancyv1.Subject{{Kind: "ServiceAccount", Name: "reader", Namespace: "subj-a"}} // one of its own: fine
	g.Expect(k8s.Create(ctx, tenant)).To(Succeed())
	g.Eventually(func(g Gomega) {
		st := eventuallyReady(g, "subj").Status
		c := conditions.Get(st.Conditions, ConditionSubjectsFound)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(ReasonSubjectNamespaceMissing))
		g.Expect(c.Message).To(ContainSubstring("ServiceAccount ci-later/deployer"))
		g.Expect(c.Message).NotTo(ContainSubstring("reader"))
	}, timeout, interval).Should(Succeed())
	rb := &rbacv1.RoleBinding{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: "subj-a", Name: adminRoleBindingName}, rb)).To(Succeed())
	g.Expect(rb.Subjects).To(ContainElement(rbacv1.Subject{Kind: "ServiceAccount", Name: "deployer", Namespace: "ci-later"}))
	g.Eventually(func(g Gomega) {
		g.Expect(tenantEventReasons(g, "subj")).To(ContainElement(ReasonSubjectNamespaceMissing))
	}, timeout, interval).Should(Succeed())

	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ci-later"}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(conditions.IsTrue(getTenant(g, "subj").Status.Conditions, ConditionSubjectsFound)).To(BeTrue())
	}, timeout, interval).Should(Succeed())
	deleteTenant(g, "subj")
}
