package tenancy

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/testenv"
)

// clientAs is an API client impersonating user in groups.
func clientAs(g Gomega, user string, groups ...string) client.Client {
	cfg := rest.CopyConfig(adminCfg)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	c, err := client.New(cfg, client.Options{Scheme: k8s.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

func ingressFrom(peers ...networkingv1.NetworkPolicyPeer) networkingv1.NetworkPolicySpec {
	return networkingv1.NetworkPolicySpec{
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: peers}},
	}
}

// TestAdmissionPolicyKeepsTenantAdminsFromLooseningGuardrails runs
// config/admission's policy in the API server. envtest aggregates no
// ClusterRoles, so the built-in admin role is empty here; the tenant admins
// get, explicitly, the powers admin has on a real cluster (write
// NetworkPolicies and RoleBindings) and more (quotas, limit ranges), so
// that what refuses them below is the policy, not RBAC. The e2e suite
// checks the same with the real admin role.
func TestAdmissionPolicyKeepsTenantAdminsFromLooseningGuardrails(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	g.Expect(k8s.Create(ctx, newGuardedTenant("vap", "vap-", "a"))).To(Succeed())
	g.Expect(k8s.Create(ctx, newTenant("vap-other", "vap-other-", "a"))).To(Succeed())
	eventuallyReady(g, "vap")
	eventuallyReady(g, "vap-other")
	g.Expect(k8s.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "vap-free"}})).To(Succeed())
	g.Expect(k8s.Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "test-namespace-powers"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"resourcequotas", "limitranges", "configmaps"}, Verbs: []string{"*"}},
			{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: []string{"*"}},
			{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"rolebindings"}, Verbs: []string{"*"}},
		},
	})).To(Succeed())
	for _, ns := range []string{"vap-a", "vap-free"} {
		g.Expect(k8s.Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "test-namespace-powers"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "test-namespace-powers"},
			Subjects:   []rbacv1.Subject{{Kind: "Group", Name: "vap-admins", APIGroup: rbacv1.GroupName}},
		})).To(Succeed())
	}
	alice := clientAs(g, "alice", "vap-admins")
	const kept, isolated = "a guardrail or binding Trellis keeps", "the namespace's Tenant is network-isolated"

	refused := map[string]struct {
		do   func() error
		want string
	}{
		"delete the quota": {func() error {
			return alice.Delete(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "vap-a", Name: quotaName}})
		}, kept},
		"raise the quota": {func() error {
			q := &corev1.ResourceQuota{}
			if err := alice.Get(ctx, client.ObjectKey{Namespace: "vap-a", Name: quotaName}, q); err != nil {
				return err
			}
			q.Spec.Hard["pods"] = resource.MustParse("1000")
			return alice.Update(ctx, q)
		}, kept},
		"delete the limit range": {func() error {
			return alice.Delete(ctx, &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Namespace: "vap-a", Name: limitRangeName}})
		}, kept},
		"delete the network policy": {func() error {
			return alice.Delete(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "vap-a", Name: networkPolicyName}})
		}, kept},
		"open the network policy": {func() error {
			np := &networkingv1.NetworkPolicy{}
			if err := alice.Get(ctx, client.ObjectKey{Namespace: "vap-a", Name: networkPolicyName}, np); err != nil {
				return err
			}
			np.Spec = ingressFrom(networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}})
			return alice.Update(ctx, np)
		}, kept},
		"delete the admins' binding": {func() error {
			return alice.Delete(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "vap-a", Name: adminRoleBindingName}})
		}, kept},
		"forge a Trellis object": {func() error {
			return alice.Create(ctx, &networkingv1.NetworkPolicy{
				ObjectMeta: metav1.ObjectMeta{Namespace: "vap-a", Name: "mine", Labels: map[string]string{TenantLabel: "vap"}},
				Spec:       networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}},
			})
		}, kept},
		"admit every namespace": {func() error {
			return alice.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "vap-a", Name: "all-ns"},
				Spec: ingressFrom(networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}})})
		}, isolated},
		"admit everything (no from)": {func() error {
			return alice.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "vap-a", Name: "all"},
				Spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{}}}})
		}, isolated},
		"admit an IP block": {func() error {
			return alice.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "vap-a", Name: "cidr"},
				Spec: ingressFrom(networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0"}})})
		}, isolated},
		"admit another tenant": {func() error {
			return alice.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "vap-a", Name: "other"},
				Spec: ingressFrom(networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{TenantLabel: "vap-other"}}})})
		}, isolated},
	}
	for name, tc := range refused {
		t.Run("refused: "+name, func(t *testing.T) {
			g := NewWithT(t)
			err := tc.do()
			g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "got %v", err)
			g.Expect(err.Error()).To(ContainSubstring(tc.want))
		})
	}

	allowed := map[string]func() error{
		"a policy admitting this namespace's pods": func() error {
			return alice.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "vap-a", Name: "same-ns"},
				Spec: ingressFrom(networkingv1.NetworkPolicyPeer{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}})})
		},
		"a policy admitting the tenant's own namespaces": func() error {
			return alice.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "vap-a", Name: "own-tenant"},
				Spec: ingressFrom(networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{TenantLabel: "vap"}}})})
		},
		"an egress policy": func() error {
			return alice.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "vap-a", Name: "no-egress"},
				Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}}})
		},
		"a binding of the team's own": func() error {
			return alice.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "vap-a", Name: "team"},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "test-namespace-powers"},
				Subjects: []rbacv1.Subject{{Kind: "User", Name: "bob", APIGroup: rbacv1.GroupName}}})
		},
		"anything in a namespace no Tenant holds": func() error {
			return alice.Create(ctx, &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "vap-free", Name: "all-ns"},
				Spec: ingressFrom(networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{}})})
		},
	}
	for name, do := range allowed {
		t.Run("allowed: "+name, func(t *testing.T) {
			NewWithT(t).Expect(do()).To(Succeed())
		})
	}

	t.Run("those who may change Tenants may change what they declare", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(k8s.Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "test-platform-operator"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "test-platform-operator"},
			Subjects:   []rbacv1.Subject{{Kind: "User", Name: "platform", APIGroup: rbacv1.GroupName}},
		})).To(Succeed())
		g.Expect(k8s.Create(ctx, &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: "test-platform-operator"},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{"tenancy.trellis.dev"}, Resources: []string{"tenants"}, Verbs: []string{"get", "patch"}},
				{APIGroups: []string{""}, Resources: []string{"resourcequotas"}, Verbs: []string{"get", "delete"}},
			},
		})).To(Succeed())
		platform := clientAs(g, "platform")
		g.Eventually(func() error {
			return platform.Delete(ctx, &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: "vap-a", Name: quotaName}})
		}, timeout, interval).Should(Succeed())
		// ... and Trellis puts it back, as declared.
		g.Eventually(func() error {
			return k8s.Get(ctx, client.ObjectKey{Namespace: "vap-a", Name: quotaName}, &corev1.ResourceQuota{})
		}, timeout, interval).Should(Succeed())
	})
	deleteTenant(g, "vap")
	deleteTenant(g, "vap-other")
}

// TestTenantsAreCreatedWithTheFinalizer: config/admission's
// MutatingAdmissionPolicy puts the finalizer on a Tenant as the API server
// creates it (the answer to the create already has it, so the controller has
// no patch to send), and, set after the request's managed fields are
// computed, it belongs to no field manager: a GitOps tool that applies the
// Tenant again without it does not take it away. Where the API server serves
// no MutatingAdmissionPolicy (before 1.36), the controller adds it, and the
// apply keeps it all the same.
func TestTenantsAreCreatedWithTheFinalizer(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	apply := func(team string) *tenancyv1.Tenant {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": tenancyv1.GroupVersion.String(), "kind": "Tenant",
			"metadata": map[string]any{"name": "admitted", "labels": map[string]any{"team": team}},
			"spec": map[string]any{
				"namespacePrefix": "admitted-", "namespaces": []any{"a"},
				"admins": []any{map[string]any{"kind": "Group", "name": "admitted-admins", "apiGroup": rbacv1.GroupName}},
			},
		}}
		g.Expect(k8s.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("gitops"), client.ForceOwnership)).To(Succeed())
		t := &tenancyv1.Tenant{}
		g.Expect(runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, t)).To(Succeed())
		return t
	}
	noOneOwnsTheFinalizer := func(t *tenancyv1.Tenant) {
		for _, e := range t.ManagedFields {
			g.Expect(e.FieldsV1.GetRawString()).NotTo(ContainSubstring("finalizers"), "manager %s", e.Manager)
		}
	}

	mutating, err := testenv.ServesMutatingPolicies(k8s)
	g.Expect(err).NotTo(HaveOccurred())
	created := apply("one")
	if mutating {
		g.Expect(created.Finalizers).To(ConsistOf(Finalizer), "in the answer to the create")
		noOneOwnsTheFinalizer(created)
	} else {
		// Before Kubernetes 1.36 no MutatingAdmissionPolicy is installed:
		// the controller adds the finalizer itself, as its first write.
		g.Eventually(func(g Gomega) {
			live := &tenancyv1.Tenant{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: "admitted"}, live)).To(Succeed())
			g.Expect(live.Finalizers).To(ConsistOf(Finalizer))
		}, timeout, interval).Should(Succeed())
	}
	eventuallyReady(g, "admitted")

	again := apply("two")
	g.Expect(again.Labels).To(HaveKeyWithValue("team", "two"))
	g.Expect(again.Finalizers).To(ConsistOf(Finalizer), "a second apply without it keeps it")
	if mutating {
		noOneOwnsTheFinalizer(again)
	}
	deleteTenant(g, "admitted")
}
