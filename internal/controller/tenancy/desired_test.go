package tenancy

import (
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/controller/setup"
)

// asTyped turns an apply configuration into the typed object the API server
// would store, through the JSON a server-side apply sends.
func asTyped[T any](g Gomega, ac any) *T {
	raw, err := json.Marshal(ac)
	g.Expect(err).NotTo(HaveOccurred())
	out := new(T)
	g.Expect(json.Unmarshal(raw, out)).To(Succeed())
	return out
}

// adminTenants are the three kinds of admin a Tenant may name.
func adminTenants() map[string]struct {
	tenant *tenancyv1.Tenant
	want   rbacv1.Subject
} {
	group := unitTenant("acme", "uid-acme", "acme-", "dev", "prod")
	user := unitTenant("acme", "uid-acme", "acme-", "dev", "prod")
	user.Spec.Admin = tenancyv1.AdminSubject{Kind: rbacv1.UserKind, Name: "alice", APIGroup: rbacv1.GroupName}
	sa := unitTenant("acme", "uid-acme", "acme-", "dev", "prod")
	sa.Spec.Admin = tenancyv1.AdminSubject{Kind: rbacv1.ServiceAccountKind, Name: "ci", Namespace: "acme-dev"}
	return map[string]struct {
		tenant *tenancyv1.Tenant
		want   rbacv1.Subject
	}{
		"group":           {group, rbacv1.Subject{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: "acme-admins"}},
		"user":            {user, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}},
		"service account": {sa, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "ci", Namespace: "acme-dev"}},
	}
}

func expectTenantChild(g Gomega, om metav1.ObjectMeta, t *tenancyv1.Tenant) {
	g.Expect(om.Labels).To(HaveKeyWithValue(setup.ManagedByLabel, setup.ManagedByValue))
	g.Expect(om.Labels).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "trellis"))
	g.Expect(om.Labels).To(HaveKeyWithValue(TenantLabel, t.Name))
	g.Expect(om.OwnerReferences).To(HaveLen(1))
	ref := om.OwnerReferences[0]
	g.Expect(ref.APIVersion).To(Equal("tenancy.trellis.dev/v1"))
	g.Expect(ref.Kind).To(Equal("Tenant"))
	g.Expect(ref.Name).To(Equal(t.Name))
	g.Expect(ref.UID).To(Equal(t.UID))
	g.Expect(ref.Controller).To(HaveValue(BeTrue()))
	g.Expect(ref.BlockOwnerDeletion).To(HaveValue(BeTrue()))
}

func expectNoWildcards(g Gomega, rules []rbacv1.PolicyRule) {
	for _, r := range rules {
		g.Expect(r.Verbs).NotTo(ContainElement(rbacv1.VerbAll), "rule %+v", r)
		g.Expect(r.Resources).NotTo(ContainElement(rbacv1.ResourceAll), "rule %+v", r)
		g.Expect(r.APIGroups).NotTo(ContainElement(rbacv1.APIGroupAll), "rule %+v", r)
		g.Expect(r.NonResourceURLs).To(BeEmpty(), "rule %+v", r)
		g.Expect(r.ResourceNames).NotTo(BeEmpty(), "every rule is limited to named objects: %+v", r)
	}
}

func TestDesiredAdminRoleBinding(t *testing.T) {
	for name, tc := range adminTenants() {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ac := desiredAdminRoleBinding(tc.tenant, "acme-prod")
			g.Expect(ac.Kind).To(HaveValue(Equal("RoleBinding")))
			g.Expect(ac.APIVersion).To(HaveValue(Equal("rbac.authorization.k8s.io/v1")))

			rb := asTyped[rbacv1.RoleBinding](g, ac)
			g.Expect(rb.Name).To(Equal("trellis-tenant-admin"))
			g.Expect(rb.Namespace).To(Equal("acme-prod"))
			g.Expect(rb.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"}))
			g.Expect(rb.Subjects).To(Equal([]rbacv1.Subject{tc.want}))
			expectTenantChild(g, rb.ObjectMeta, tc.tenant)
		})
	}
}

func TestDesiredAdminRoleBindingFollowsNamespace(t *testing.T) {
	g := NewWithT(t)
	tenant := unitTenant("acme", "uid-acme", "acme-", "dev", "prod")
	for _, ns := range namespaceNames(tenant) {
		rb := asTyped[rbacv1.RoleBinding](g, desiredAdminRoleBinding(tenant, ns))
		g.Expect(rb.Namespace).To(Equal(ns))
		g.Expect(rb.Name).To(Equal(adminRoleBindingName))
	}
}

func TestDesiredTenantRole(t *testing.T) {
	g := NewWithT(t)
	tenant := unitTenant("acme", "uid-acme", "acme-", "dev", "prod")
	ac := desiredTenantRole(tenant, []string{"acme-dev", "acme-prod"})
	g.Expect(ac.Kind).To(HaveValue(Equal("ClusterRole")))

	cr := asTyped[rbacv1.ClusterRole](g, ac)
	g.Expect(cr.Name).To(Equal("trellis:tenant:acme"))
	g.Expect(cr.Namespace).To(BeEmpty())
	g.Expect(cr.AggregationRule).To(BeNil())
	expectTenantChild(g, cr.ObjectMeta, tenant)
	g.Expect(cr.Rules).To(Equal([]rbacv1.PolicyRule{
		{APIGroups: []string{"tenancy.trellis.dev"}, Resources: []string{"tenants"}, ResourceNames: []string{"acme"}, Verbs: []string{"get", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, ResourceNames: []string{"acme-dev", "acme-prod"}, Verbs: []string{"get", "watch"}},
	}))
	expectNoWildcards(g, cr.Rules)
}

func TestDesiredTenantRoleWithoutNamespaces(t *testing.T) {
	for name, namespaces := range map[string][]string{"nil": nil, "empty": {}} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			tenant := unitTenant("acme", "uid-acme", "acme-", "dev")
			cr := asTyped[rbacv1.ClusterRole](g, desiredTenantRole(tenant, namespaces))
			g.Expect(cr.Rules).To(Equal([]rbacv1.PolicyRule{
				{APIGroups: []string{"tenancy.trellis.dev"}, Resources: []string{"tenants"}, ResourceNames: []string{"acme"}, Verbs: []string{"get", "watch"}},
			}))
			for _, r := range cr.Rules {
				g.Expect(r.Resources).NotTo(ContainElement("namespaces"))
			}
			expectNoWildcards(g, cr.Rules)
		})
	}
}

func TestDesiredTenantRoleGrantsOnlyReads(t *testing.T) {
	g := NewWithT(t)
	tenant := unitTenant("acme", "uid-acme", "acme-", "dev", "prod")
	cr := asTyped[rbacv1.ClusterRole](g, desiredTenantRole(tenant, namespaceNames(tenant)))
	g.Expect(cr.Rules).NotTo(BeEmpty())
	for _, r := range cr.Rules {
		g.Expect(r.Verbs).To(ConsistOf("get", "watch"), "rule %+v", r)
	}
}

func TestDesiredTenantRoleBinding(t *testing.T) {
	for name, tc := range adminTenants() {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			ac := desiredTenantRoleBinding(tc.tenant)
			g.Expect(ac.Kind).To(HaveValue(Equal("ClusterRoleBinding")))

			crb := asTyped[rbacv1.ClusterRoleBinding](g, ac)
			g.Expect(crb.Name).To(Equal("trellis:tenant:acme"))
			g.Expect(crb.Namespace).To(BeEmpty())
			g.Expect(crb.RoleRef).To(Equal(rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "trellis:tenant:acme"}))
			g.Expect(crb.Subjects).To(Equal([]rbacv1.Subject{tc.want}))
			expectTenantChild(g, crb.ObjectMeta, tc.tenant)

			// It binds exactly the ClusterRole desiredTenantRole builds.
			cr := asTyped[rbacv1.ClusterRole](g, desiredTenantRole(tc.tenant, namespaceNames(tc.tenant)))
			g.Expect(crb.RoleRef.Name).To(Equal(cr.Name))
		})
	}
}

func TestDesiredIsDeterministic(t *testing.T) {
	g := NewWithT(t)
	build := func() []any {
		tenant := unitTenant("acme", "uid-acme", "acme-", "dev", "prod", "ci")
		return []any{
			desiredAdminRoleBinding(tenant, "acme-dev"),
			desiredTenantRole(tenant, namespaceNames(tenant)),
			desiredTenantRoleBinding(tenant),
		}
	}
	first, second := build(), build()
	for i := range first {
		g.Expect(equality.Semantic.DeepEqual(first[i], second[i])).To(BeTrue(), "object %d differs:\n%#v\n%#v", i, first[i], second[i])
		a, err := json.Marshal(first[i])
		g.Expect(err).NotTo(HaveOccurred())
		b, err := json.Marshal(second[i])
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(a)).To(Equal(string(b)))
	}
}

func TestDesiredDiffersPerTenant(t *testing.T) {
	g := NewWithT(t)
	a := unitTenant("acme", "uid-acme", "acme-", "dev")
	b := unitTenant("bolt", "uid-bolt", "bolt-", "dev")
	crA := asTyped[rbacv1.ClusterRole](g, desiredTenantRole(a, namespaceNames(a)))
	crB := asTyped[rbacv1.ClusterRole](g, desiredTenantRole(b, namespaceNames(b)))
	g.Expect(crA.Name).NotTo(Equal(crB.Name))
	g.Expect(crB.Rules[0].ResourceNames).To(Equal([]string{"bolt"}))
	g.Expect(crB.Rules[1].ResourceNames).To(Equal([]string{"bolt-dev"}))
	g.Expect(crB.OwnerReferences[0].UID).To(Equal(types.UID("uid-bolt")))
}
