package tenancy

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/trellis-dev/trellis/internal/controller/setup"
)

// recogniseChild is the controller's setup.Controller.Recognise. A tenant's
// objects carry marks, not owner references, so it recognises them by the
// names the controller gives them and the tenant label: in a namespace, the
// admin and viewer RoleBindings, the quota, the limit range and the
// isolation policy; cluster-wide, the trellis:tenant:<name> ClusterRole and
// binding; a namespace by the tenant label and the tenant-UID annotation.
// That keeps at most five whole objects per namespace, whatever anyone
// labels there; every other labelled object is cached as metadata, with
// foreignKeys, which is what the controller reads of an object that is not
// a tenant's (ownsChild, claim, the mapping of events to Tenants). It
// accepts every object ownsChild could take as a tenant's (a child with its
// name and any tenant label: leftovers of a Tenant that no longer exists
// are taken over), since the controller patches those from the cached copy.
func recogniseChild(obj client.Object) bool {
	labels := obj.GetLabels()
	tenant := labels[TenantLabel]
	if tenant == "" || labels[setup.ManagedByLabel] != setup.ManagedByValue {
		return false
	}
	name := obj.GetName()
	switch obj.(type) {
	case *corev1.Namespace:
		return obj.GetAnnotations()[TenantUIDAnnotation] != ""
	case *rbacv1.RoleBinding:
		return name == adminRoleBindingName || name == viewerRoleBindingName
	case *corev1.ResourceQuota:
		return name == quotaName
	case *corev1.LimitRange:
		return name == limitRangeName
	case *networkingv1.NetworkPolicy:
		return name == networkPolicyName
	case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding:
		return strings.HasPrefix(name, tenantRolePrefix)
	}
	return false
}

// foreignKeys are the setup.Controller.ForeignKeys: the marks the
// controller reads on an object it does not recognise (to map its events to
// a Tenant, to tell whose namespace it is, to find a hand-over, to say who
// released it).
var foreignKeys = []string{TenantLabel, TenantUIDAnnotation, HandOverAnnotation, ReleasedFromLabel}
