package tenancy

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/controller/children"
	"github.com/trellis-dev/trellis/internal/controller/setup"
)

// childLabels go on every object Trellis creates for a tenant; managed-by also
// scopes the manager's cache, the tenant label feeds the namespace index.
func childLabels(t *tenancyv1.Tenant) map[string]string {
	return map[string]string{
		setup.ManagedByLabel:        setup.ManagedByValue,
		"app.kubernetes.io/part-of": "trellis",
		TenantLabel:                 t.Name,
	}
}

func ownerReference(t *tenancyv1.Tenant) *metav1ac.OwnerReferenceApplyConfiguration {
	return children.OwnerReference(t, tenancyv1.GroupVersion.WithKind("Tenant"))
}

func adminSubject(t *tenancyv1.Tenant) *rbacv1ac.SubjectApplyConfiguration {
	s := rbacv1ac.Subject().WithKind(t.Spec.Admin.Kind).WithName(t.Spec.Admin.Name)
	if t.Spec.Admin.Kind == rbacv1.ServiceAccountKind {
		return s.WithNamespace(t.Spec.Admin.Namespace)
	}
	return s.WithAPIGroup(rbacv1.GroupName)
}

// desiredAdminRoleBinding grants the tenant admin the built-in admin role in one namespace.
func desiredAdminRoleBinding(t *tenancyv1.Tenant, namespace string) *rbacv1ac.RoleBindingApplyConfiguration {
	return rbacv1ac.RoleBinding(adminRoleBindingName, namespace).
		WithLabels(childLabels(t)).
		WithOwnerReferences(ownerReference(t)).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName(builtinAdminRole)).
		WithSubjects(adminSubject(t))
}

// desiredTenantRole lets the admin read their own Tenant and namespaces, and
// nothing else cluster-wide (both are cluster-scoped, so a Role cannot do it).
func desiredTenantRole(t *tenancyv1.Tenant, namespaces []string) *rbacv1ac.ClusterRoleApplyConfiguration {
	rules := []*rbacv1ac.PolicyRuleApplyConfiguration{
		rbacv1ac.PolicyRule().
			WithAPIGroups(tenancyv1.GroupVersion.Group).
			WithResources("tenants").
			WithResourceNames(t.Name).
			WithVerbs("get", "watch"),
	}
	if len(namespaces) > 0 {
		rules = append(rules, rbacv1ac.PolicyRule().
			WithAPIGroups("").
			WithResources("namespaces").
			WithResourceNames(namespaces...).
			WithVerbs("get", "watch"))
	}
	return rbacv1ac.ClusterRole(tenantRoleName(t)).
		WithLabels(childLabels(t)).
		WithOwnerReferences(ownerReference(t)).
		WithRules(rules...)
}

// desiredTenantRoleBinding binds the admin to the per-tenant ClusterRole.
func desiredTenantRoleBinding(t *tenancyv1.Tenant) *rbacv1ac.ClusterRoleBindingApplyConfiguration {
	return rbacv1ac.ClusterRoleBinding(tenantRoleName(t)).
		WithLabels(childLabels(t)).
		WithOwnerReferences(ownerReference(t)).
		WithRoleRef(rbacv1ac.RoleRef().WithAPIGroup(rbacv1.GroupName).WithKind("ClusterRole").WithName(tenantRoleName(t))).
		WithSubjects(adminSubject(t))
}
