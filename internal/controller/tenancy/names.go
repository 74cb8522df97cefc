package tenancy

import (
	"fmt"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
)

// Marks Trellis puts on a tenant's namespaces instead of an owner reference:
// an owner reference would let the garbage collector delete the namespaces
// whenever the Tenant (or its CRD) goes away. The UID annotation makes the mark
// specific to one Tenant object, so a re-created Tenant of the same name does
// not take over namespaces it did not create.
const (
	TenantLabel         = "tenancy.trellis.dev/tenant"
	TenantUIDAnnotation = "tenancy.trellis.dev/tenant-uid"
)

// Names of the RBAC objects the controller keeps.
const (
	adminRoleBindingName = "trellis-tenant-admin"
	builtinAdminRole     = "admin"
	tenantRolePrefix     = "trellis:tenant:" // ":" keeps them apart from kustomize-made "trellis-..." roles
)

// tenantRoleName names the per-tenant ClusterRole and its ClusterRoleBinding.
func tenantRoleName(t *tenancyv1.Tenant) string { return tenantRolePrefix + t.Name }

// namespaceNames composes the full names of the tenant's namespaces, in spec order.
func namespaceNames(t *tenancyv1.Tenant) []string {
	names := make([]string, 0, len(t.Spec.Namespaces))
	prefix := ptr.Deref(t.Spec.NamespacePrefix, "")
	for _, n := range t.Spec.Namespaces {
		names = append(names, prefix+n)
	}
	return names
}

// Protection decides which namespace names no Tenant may take.
type Protection struct {
	// ManagerNamespace is where Trellis itself runs.
	ManagerNamespace string
	// Extra is an optional, operator-supplied pattern (--tenant-protected-namespaces).
	Extra *regexp.Regexp
}

// Protected returns why name may not be a tenant namespace, or "".
func (p Protection) Protected(name string) string {
	switch {
	case strings.HasPrefix(name, "kube-"):
		return "names starting with kube- belong to Kubernetes"
	case name == "default":
		return "the default namespace is shared by the whole cluster"
	case name == p.ManagerNamespace:
		return "it is the namespace Trellis runs in"
	case p.Extra != nil && p.Extra.MatchString(name):
		return fmt.Sprintf("it matches the protected pattern %q", p.Extra.String())
	}
	if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
		return "not a valid namespace name: " + strings.Join(errs, "; ")
	}
	return ""
}

// CompileProtectedPattern compiles the --tenant-protected-namespaces flag; the
// pattern must match a whole name.
func CompileProtectedPattern(pattern string) (*regexp.Regexp, error) {
	if pattern == "" {
		return nil, nil
	}
	// Compile it alone first: "a)|(b" is invalid, but would compile once wrapped.
	if _, err := regexp.Compile(pattern); err != nil {
		return nil, fmt.Errorf("--tenant-protected-namespaces: %w", err)
	}
	re, err := regexp.Compile("^(?:" + pattern + ")$")
	if err != nil {
		return nil, fmt.Errorf("--tenant-protected-namespaces: %w", err)
	}
	return re, nil
}

// isMarkedBy reports whether the namespace was created by t. The UID
// annotation is the proof (UIDs are never reused); the label only feeds the
// cache and the index, and is restored when someone strips it.
func isMarkedBy(annotations map[string]string, t *tenancyv1.Tenant) bool {
	return t.UID != "" && annotations[TenantUIDAnnotation] == string(t.UID)
}
