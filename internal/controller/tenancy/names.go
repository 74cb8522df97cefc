package tenancy

import (
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	tenancyv1 "github.com/trellis-dev/trellis/api/tenancy/v1"
	"github.com/trellis-dev/trellis/internal/controller/setup"
)

// Marks Trellis puts on a tenant's namespaces instead of an owner reference:
// an owner reference would let the garbage collector delete the namespaces
// whenever the Tenant (or its CRD) goes away. The label names the Tenant; the
// UID annotation names the Tenant object that holds the namespace, so that a
// Tenant re-created under the same name can tell its own namespaces from
// those of a Tenant that still exists (docs/tenant.md, "Whose namespace is it").
const (
	TenantLabel         = "tenancy.trellis.dev/tenant"
	TenantUIDAnnotation = "tenancy.trellis.dev/tenant-uid"
	// HandOverAnnotation is set by a cluster admin on a namespace to give it
	// to the Tenant it names: the one way a namespace Trellis did not create
	// for that Tenant becomes one of its namespaces.
	HandOverAnnotation = "tenancy.trellis.dev/hand-over-to"
	// NetworkIsolationLabel is on the namespaces of a Tenant with
	// networkIsolation; the admission policy in config/admission reads it.
	NetworkIsolationLabel = "tenancy.trellis.dev/network-isolation"
	// ReleasedFromLabel is on a namespace a Tenant released (Retain): the
	// restrictions Trellis put there stay, and the admission policy in
	// config/admission, bound by this label too, keeps protecting them.
	// It goes when a Tenant takes the namespace again.
	ReleasedFromLabel = "tenancy.trellis.dev/released-from"
	// RequestedByAnnotation is on a namespace Trellis made for a
	// NamespaceRequest, and names it (<namespace>/<name>): only that
	// request holds the namespace without passing the Tenant's
	// selfService bounds again (selectRequests). Tenant admins cannot
	// write namespaces, so they cannot forge it.
	RequestedByAnnotation = "tenancy.trellis.dev/requested-by"
	// RequestedByUIDAnnotation goes with RequestedByAnnotation: the UID of
	// that request, so that a request deleted and made again under the same
	// name is a new request, which the namespace was not made for. A
	// namespace made before Trellis recorded it is the request's by its
	// name, and gets the UID of the request that holds it.
	RequestedByUIDAnnotation = "tenancy.trellis.dev/requested-by-uid"
	// ReleasedFromUIDAnnotation goes with ReleasedFromLabel: the UID of the
	// Tenant object that released the namespace, so that what it left there
	// (its quota, which keeps counting against quota.tenant) is told from
	// what an earlier Tenant of the same name left. It goes with the label.
	ReleasedFromUIDAnnotation = "tenancy.trellis.dev/released-from-uid"
	// NamespaceUIDsAnnotation is on a Tenant's ClusterRole
	// (trellis:tenant:<name>): the UIDs of the namespaces Trellis holds for
	// it, comma-separated. Only Trellis and cluster admins write
	// ClusterRoles, and this one outlives its Tenant when the Tenant CRD is
	// deleted (an uninstall): a Tenant of that name made again takes back
	// the namespaces it lists, and no namespace made since under one of
	// their names, whatever marks that one carries (claim).
	NamespaceUIDsAnnotation = "tenancy.trellis.dev/namespace-uids"
	partOfLabel             = "app.kubernetes.io/part-of"
)

// The annotations Trellis writes on a tenant's namespaces from
// spec.allowances, comma-separated; config/admission's tenant-allowances
// policy reads them. Tenant admins cannot write namespaces, so what they say
// is what the Tenant says.
const (
	AllowedHostnamesAnnotation       = "tenancy.trellis.dev/allowed-hostnames"
	AllowedIngressClassesAnnotation  = "tenancy.trellis.dev/allowed-ingress-classes"
	AllowedGatewaysAnnotation        = "tenancy.trellis.dev/allowed-gateways" // namespace/name
	AllowedRegistriesAnnotation      = "tenancy.trellis.dev/allowed-registries"
	AllowedStorageClassesAnnotation  = "tenancy.trellis.dev/allowed-storage-classes"
	AllowedPriorityClassesAnnotation = "tenancy.trellis.dev/allowed-priority-classes"
	AllowedRuntimeClassesAnnotation  = "tenancy.trellis.dev/allowed-runtime-classes"
	AllowedServiceTypesAnnotation    = "tenancy.trellis.dev/allowed-service-types"
	ForcedNodeSelectorAnnotation     = "tenancy.trellis.dev/forced-node-selector" // key=value
)

// The Pod Security Admission labels Trellis writes from spec.podSecurity.
const (
	podSecurityEnforceLabel = "pod-security.kubernetes.io/enforce"
	podSecurityWarnLabel    = "pod-security.kubernetes.io/warn"
	podSecurityAuditLabel   = "pod-security.kubernetes.io/audit"
)

// Names of the objects the controller keeps in every tenant namespace, and
// of the cluster-wide RBAC objects of each tenant.
const (
	adminRoleBindingName  = "trellis-tenant-admin"
	viewerRoleBindingName = "trellis-tenant-viewer"
	quotaName             = "trellis-tenant-quota"
	limitRangeName        = "trellis-tenant-limits"
	networkPolicyName     = "trellis-tenant-isolation"
	builtinAdminRole      = "admin"
	builtinViewRole       = "view"
	tenantRolePrefix      = "trellis:tenant:" // ":" keeps them apart from kustomize-made "trellis-..." roles
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

// isMarkedBy reports whether the namespace is held by the Tenant object t:
// its UID annotation names t's UID (UIDs are never reused). The label only
// feeds the cache and the index, and is restored when someone strips it.
func isMarkedBy(annotations map[string]string, t *tenancyv1.Tenant) bool {
	return t.UID != "" && annotations[TenantUIDAnnotation] == string(t.UID)
}

// releasedBy reports whether the namespace was released by the Tenant
// object t (Retain): labelled released-from with its name and annotated
// with its UID. The label alone names a Tenant, not the Tenant object:
// it proves nothing (releaseUnrecorded).
func releasedBy(ns *corev1.Namespace, t *tenancyv1.Tenant) bool {
	return ns.Labels[ReleasedFromLabel] == t.Name && t.UID != "" &&
		ns.Annotations[ReleasedFromUIDAnnotation] == string(t.UID)
}

// releaseUnrecorded reports whether the namespace is labelled released-from
// t's name without the UID of the Tenant that released it: released before
// Trellis recorded the UID, or labelled by hand. Which Tenant object
// released it, if any did, only a cluster admin can say.
func releaseUnrecorded(ns *corev1.Namespace, t *tenancyv1.Tenant) bool {
	_, recorded := ns.Annotations[ReleasedFromUIDAnnotation]
	return ns.Labels[ReleasedFromLabel] == t.Name && !recorded
}

// reservedDomain reports whether a label or annotation key belongs to
// Kubernetes (kubernetes.io, k8s.io and their subdomains).
func reservedDomain(key string) bool {
	prefix, _, found := strings.Cut(key, "/")
	if !found {
		return false
	}
	return prefix == "kubernetes.io" || prefix == "k8s.io" ||
		strings.HasSuffix(prefix, ".kubernetes.io") || strings.HasSuffix(prefix, ".k8s.io")
}

// podSecurityKey reports whether key is one of the Pod Security labels Trellis writes.
func podSecurityKey(key string) bool {
	return key == podSecurityEnforceLabel || key == podSecurityWarnLabel || key == podSecurityAuditLabel
}

// restrictionKey reports whether key is a namespace label or annotation that
// restricts what runs in the namespace (Pod Security levels; the
// network-isolation label and the allowances' annotations the admission
// policies read): a released namespace keeps it.
func restrictionKey(key string) bool {
	switch key {
	case NetworkIsolationLabel, AllowedHostnamesAnnotation, AllowedIngressClassesAnnotation,
		AllowedGatewaysAnnotation, AllowedRegistriesAnnotation, AllowedStorageClassesAnnotation,
		AllowedPriorityClassesAnnotation, AllowedRuntimeClassesAnnotation, AllowedServiceTypesAnnotation,
		ForcedNodeSelectorAnnotation:
		return true
	}
	return podSecurityKey(key)
}

// markKey reports whether key is one of the marks that say whose namespace it is.
func markKey(key string) bool {
	return key == TenantLabel || key == TenantUIDAnnotation || key == RequestedByAnnotation ||
		key == RequestedByUIDAnnotation || key == setup.ManagedByLabel || key == partOfLabel
}

// guardrailMetadataKey reports whether key is one Trellis may have put on a
// namespace from a Tenant's spec (podSecurity, namespaceMetadata,
// networkIsolation), and so may take off again when the spec no longer asks
// for it. Marks are not among them: they go only when the namespace is released.
func guardrailMetadataKey(key string) bool {
	if markKey(key) || key == HandOverAnnotation || key == ReleasedFromLabel || key == ReleasedFromUIDAnnotation {
		return false
	}
	return podSecurityKey(key) || !reservedDomain(key)
}
