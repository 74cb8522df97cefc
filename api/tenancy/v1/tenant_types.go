package v1

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NamespaceDeletionPolicy says what happens to a tenant's namespace when it
// leaves the spec or the Tenant is deleted.
// +kubebuilder:validation:Enum=Retain;Delete
type NamespaceDeletionPolicy string

const (
	// NamespaceRetain keeps the namespace and its contents; only the tenant's
	// RoleBindings, guardrails and marks are removed.
	NamespaceRetain NamespaceDeletionPolicy = "Retain"
	// NamespaceDelete deletes the namespace, with everything in it.
	NamespaceDelete NamespaceDeletionPolicy = "Delete"
)

// TenantSpec is the team's namespaces, who administers them, and the
// guardrails every one of them gets.
// +kubebuilder:validation:XValidation:rule="self.namespaces.all(n, size(self.namespacePrefix + n) <= 63 && (self.namespacePrefix + n).matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'))",message="namespacePrefix + each namespace must be a DNS label (lower-case letters, digits and '-', at most 63 characters)"
// +kubebuilder:validation:XValidation:rule="self.namespaces.all(n, !(self.namespacePrefix + n).startsWith('kube-') && (self.namespacePrefix + n) != 'default')",message="namespace names starting with kube- and the default namespace are reserved"
// +kubebuilder:validation:XValidation:rule="self.namespacePrefix == oldSelf.namespacePrefix",message="namespacePrefix is immutable: changing it would orphan the tenant's namespaces"
// +kubebuilder:validation:XValidation:rule="has(self.admin) || (has(self.admins) && size(self.admins) > 0)",message="a Tenant needs at least one admin: set admins (or the deprecated admin)"
// +kubebuilder:validation:XValidation:rule="(has(self.admins) ? size(self.admins) : 0) + (has(self.admin) ? 1 : 0) <= 16",message="at most 16 admins, the deprecated admin included"
// +kubebuilder:validation:XValidation:rule="!has(self.selfService) || size(self.namespacePrefix) > 0",message="selfService needs a namespacePrefix: the namespaces a team asks for are named within it"
type TenantSpec struct {
	// namespaces are the tenant's namespaces, without the prefix.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:MinLength=1
	Namespaces []string `json:"namespaces,omitempty"`

	// namespacePrefix is put in front of every namespace name, e.g. "team-a-".
	// Immutable.
	// +optional
	// +default=""
	// +kubebuilder:validation:MaxLength=62
	NamespacePrefix *string `json:"namespacePrefix,omitempty"`

	// admin is one more admin, bound exactly as an entry of admins.
	// Deprecated: use admins. It is kept so that Tenants written for
	// earlier versions keep working unchanged (the API has one version, so
	// there is no conversion to move it).
	// +optional
	Admin Subject `json:"admin,omitzero"`

	// admins are bound to the built-in admin ClusterRole in every namespace of
	// the tenant, and may read this Tenant and its namespaces. At least one
	// admin is required (here or in admin); at most 16 in all.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Admins []Subject `json:"admins,omitempty"`

	// viewers are bound to the built-in view ClusterRole in every namespace of
	// the tenant, and may read this Tenant and its namespaces.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Viewers []Subject `json:"viewers,omitempty"`

	// namespaceDeletionPolicy says what happens to a namespace that leaves the
	// spec, or whose Tenant is deleted: Retain (default) keeps it; Delete
	// deletes it with its contents. Only namespaces this Tenant created are
	// ever deleted.
	// +optional
	// +default="Retain"
	NamespaceDeletionPolicy NamespaceDeletionPolicy `json:"namespaceDeletionPolicy,omitempty"`

	// quota is a ResourceQuota put in every namespace of the tenant; the
	// status reports its usage summed over them.
	// +optional
	Quota TenantQuota `json:"quota,omitzero"`

	// limitRange is a LimitRange put in every namespace of the tenant:
	// container defaults, minimums and maximums.
	// +optional
	LimitRange TenantLimitRange `json:"limitRange,omitzero"`

	// networkIsolation puts a NetworkPolicy in every namespace of the tenant
	// that admits traffic only from the tenant's own namespaces and from the
	// namespaces it lists; other tenants' are refused. Unset: no policy.
	// +optional
	NetworkIsolation *NetworkIsolation `json:"networkIsolation,omitempty"`

	// podSecurity is the Pod Security Admission level of every namespace of
	// the tenant, written as its pod-security.kubernetes.io labels.
	// +optional
	PodSecurity PodSecurity `json:"podSecurity,omitzero"`

	// namespaceMetadata are extra labels and annotations for every namespace
	// of the tenant. Keys of Trellis' own (trellis.dev/ and its subdomains,
	// app.kubernetes.io/managed-by, app.kubernetes.io/part-of) and of
	// Kubernetes (kubernetes.io/, k8s.io/ and their subdomains) are refused:
	// Pod Security levels go in podSecurity, and an ObjectStore that selects
	// namespaces by a trellis.dev label is opened only by whoever may label
	// namespaces, never by a Tenant's editor.
	// +optional
	NamespaceMetadata NamespaceMetadata `json:"namespaceMetadata,omitzero"`

	// allowances narrow what the tenant's namespaces may ask of the cluster's
	// shared infrastructure: the hostnames their Ingresses, routes and
	// MarkdownViews serve, the IngressClasses and Gateways they use, the
	// registries their images come from, the StorageClasses,
	// PriorityClasses and RuntimeClasses they name, the types of their
	// Services, and the nodes their pods select. Each is written onto the tenant's
	// namespaces as a tenancy.trellis.dev/allowed-* annotation, and enforced
	// there by the API server (config/admission, tenant-allowances) for
	// everyone, the Trellis manager included. An allowance left unset
	// restricts nothing.
	// +optional
	Allowances TenantAllowances `json:"allowances,omitzero"`

	// selfService lets the tenant's admins add namespaces themselves, with a
	// NamespaceRequest in a namespace of the tenant: the request named x
	// makes the namespace <namespacePrefix>x, with every guardrail above.
	// Unset: requests are refused (namespaces already granted stay until
	// their requests are deleted). Needs a namespacePrefix.
	// +optional
	SelfService SelfService `json:"selfService,omitzero"`

	// copies are objects kept in every namespace of the tenant, the
	// namespaces granted to NamespaceRequests included: a Secret or
	// ConfigMap copied from a source namespace, and kept in step with it
	// (an edit of the source reaches every copy), or a Role, RoleBinding,
	// NetworkPolicy or LimitRange given inline. The Tenant's editor must
	// be allowed to get the source, and to create (for a Role, also
	// escalate; for a RoleBinding, also bind) every inline kind in every
	// namespace (checked at admission: the tenant-copy-rights policy); a
	// Secret is read only from a namespace whose owner bound the
	// ClusterRole trellis-copy-source to the manager there. A copy that
	// leaves the list, and every copy in a namespace that leaves the
	// tenant, is deleted; an object of that name Trellis did not copy is
	// never touched (the namespace is in Conflict). Tenant admins cannot
	// change or delete a copy.
	// +optional
	// +listType=map
	// +listMapKey=kind
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:XValidation:rule="self.all(c, c.kind != 'RoleBinding' || !has(c.inline) || !has(c.inline.roleRef) || (c.inline.roleRef.kind == 'ClusterRole' && c.inline.roleRef.name in ['admin', 'edit', 'view']) || (c.inline.roleRef.kind == 'Role' && self.exists(r, r.kind == 'Role' && r.name == c.inline.roleRef.name)))",message="an inline RoleBinding may bind only a Role given inline in this list, or the ClusterRole admin, edit or view (what the tenant admins hold already): never cluster-admin or any other ClusterRole"
	Copies []TenantCopy `json:"copies,omitempty"`

	// suspend stops the controller acting on this object: what exists is
	// kept as it is, nothing is created, changed or deleted, and the status
	// says Suspended. Deleting the object still runs its deletion policy.
	// Setting it back to false reconciles at once.
	// +optional
	Suspend *bool `json:"suspend,omitempty"`
}

// CopyKind is the kind of object a Tenant copies into its namespaces.
// +kubebuilder:validation:Enum=Secret;ConfigMap;Role;RoleBinding;NetworkPolicy;LimitRange
type CopyKind string

// The kinds a Tenant copies: Secrets and ConfigMaps from a source, the
// others given inline.
const (
	CopySecret        CopyKind = "Secret"
	CopyConfigMap     CopyKind = "ConfigMap"
	CopyRole          CopyKind = "Role"
	CopyRoleBinding   CopyKind = "RoleBinding"
	CopyNetworkPolicy CopyKind = "NetworkPolicy"
	CopyLimitRange    CopyKind = "LimitRange"
)

// TenantCopy is one object kept in every namespace of the tenant.
// +kubebuilder:validation:XValidation:rule="!self.name.startsWith('trellis-tenant-')",message="names starting with trellis-tenant- are Trellis' own"
// +kubebuilder:validation:XValidation:rule="self.name != 'kube-root-ca.crt'",message="kube-root-ca.crt is written by Kubernetes in every namespace"
// +kubebuilder:validation:XValidation:rule="(self.kind in ['Secret', 'ConfigMap']) == has(self.from) && (self.kind in ['Secret', 'ConfigMap']) != has(self.inline)",message="a Secret or ConfigMap is copied from a source (from); a Role, RoleBinding, NetworkPolicy or LimitRange is given inline (inline)"
// +kubebuilder:validation:XValidation:rule="!has(self.inline) || [has(self.inline.rules), has(self.inline.roleRef), has(self.inline.networkPolicy), has(self.inline.limitRange)] == [self.kind == 'Role', self.kind == 'RoleBinding', self.kind == 'NetworkPolicy', self.kind == 'LimitRange']",message="inline holds the field of its kind only: rules for a Role, roleRef (and subjects) for a RoleBinding, networkPolicy for a NetworkPolicy, limitRange for a LimitRange"
// +kubebuilder:validation:XValidation:rule="!has(self.inline) || !has(self.inline.subjects) || self.kind == 'RoleBinding'",message="inline.subjects are a RoleBinding's"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.inline) || !has(oldSelf.inline.roleRef) || !has(self.inline) || !has(self.inline.roleRef) || self.inline.roleRef == oldSelf.inline.roleRef",message="an inline RoleBinding's roleRef is immutable, as a RoleBinding's is: remove the item, then add it again"
type TenantCopy struct {
	// kind is Secret or ConfigMap (copied from a source), or Role,
	// RoleBinding, NetworkPolicy or LimitRange (given inline).
	// +required
	Kind CopyKind `json:"kind,omitempty"`

	// name is the copy's name in each namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be a DNS subdomain name"
	Name string `json:"name,omitempty"`

	// from is the object a Secret or ConfigMap is copied from: its data
	// (and a Secret's type) is what every copy holds; its labels and
	// annotations are not copied.
	// +optional
	From CopySource `json:"from,omitzero"`

	// inline is what a Role, RoleBinding, NetworkPolicy or LimitRange
	// holds in every namespace.
	// +optional
	Inline *InlineObject `json:"inline,omitempty"`
}

// InlineObject is the content of an object given inline: the field of its
// kind only. What it may hold is bounded at admission (tenant-copy-rights):
// a Role lists its verbs (no '*', escalate, bind or impersonate); a
// NetworkPolicy admits traffic only from the tenant's own namespaces.
type InlineObject struct {
	// rules of a Role.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Rules []rbacv1.PolicyRule `json:"rules,omitempty"`

	// roleRef is the role a RoleBinding grants: a Role given inline in
	// the same Tenant, or the ClusterRole admin, edit or view. Immutable.
	// +optional
	RoleRef *rbacv1.RoleRef `json:"roleRef,omitempty"`

	// subjects of a RoleBinding.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Subjects []rbacv1.Subject `json:"subjects,omitempty"`

	// networkPolicy is a NetworkPolicy's spec.
	// +optional
	NetworkPolicy *networkingv1.NetworkPolicySpec `json:"networkPolicy,omitempty"`

	// limitRange is a LimitRange's spec.
	// +optional
	LimitRange *corev1.LimitRangeSpec `json:"limitRange,omitempty"`
}

// CopySource names the object a copy is made from.
type CopySource struct {
	// namespace of the source.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Namespace string `json:"namespace,omitempty"`
	// name of the source.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be a DNS subdomain name"
	Name string `json:"name,omitempty"`
}

// SelfService bounds the namespaces a tenant's admins may add themselves.
type SelfService struct {
	// maxNamespaces is how many requested namespaces the tenant may hold at
	// once (those of spec.namespaces are not counted). Requests past it are
	// refused (LimitReached), oldest first served; lowering it refuses new
	// requests and takes away none already granted.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	MaxNamespaces int32 `json:"maxNamespaces,omitempty"`

	// namePattern is, if set, a regular expression (RE2) that the whole
	// requested name, without the prefix, must match, e.g. "feature-[a-z0-9-]+".
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	NamePattern string `json:"namePattern,omitempty"`
}

// TenantAllowances are the shared resources a tenant's namespaces may use.
// Each list, when set, is the whole of what is allowed; an unset list allows
// anything.
// +kubebuilder:validation:MinProperties=1
type TenantAllowances struct {
	// hostnames the tenant's Ingresses, Gateway API routes (HTTPRoute,
	// GRPCRoute, TLSRoute), ListenerSet listeners and MarkdownViews may
	// serve: exact DNS names (docs.example.com), or *. and a DNS name
	// (*.team-a.example.com), which matches every name of one or more labels
	// before the suffix (a.team-a.example.com, a.b.team-a.example.com), not
	// the suffix itself. With hostnames set, an Ingress rule or TLS entry
	// without a host, an Ingress defaultBackend, a route without hostnames
	// and a listener without a hostname are refused: they would serve every
	// hostname.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	Hostnames []HostnamePattern `json:"hostnames,omitempty"`

	// ingressClasses an Ingress (or a MarkdownView's expose.ingress) of the
	// tenant may name. With ingressClasses set, an Ingress must name one in
	// spec.ingressClassName: without it the cluster's default class would
	// serve it, whichever that is.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	IngressClasses []ObjectName `json:"ingressClasses,omitempty"`

	// gateways the tenant's Gateway API routes (HTTP, GRPC, TLS, TCP, UDP),
	// ListenerSets and MarkdownViews' expose.httpRoute may attach to. With
	// gateways set, every parent must be one of these Gateways (a parentRef
	// without a namespace is in the object's own namespace); a parent of
	// another kind, a ListenerSet included, is refused, except a Service
	// (mesh routing, which exposes nothing outside the cluster).
	// +optional
	// +listType=map
	// +listMapKey=namespace
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Gateways []GatewayReference `json:"gateways,omitempty"`

	// registries the images of the tenant's pods (containers, init and
	// ephemeral containers) and MarkdownViews' viewerImage may come from: a
	// registry host, with its port if it has one, optionally followed by a
	// path (registry.example.com, localhost:5000,
	// registry.example.com/team-a). An image is allowed when its repository
	// is one of them or lies under one ("registry.example.com/team-a" allows
	// registry.example.com/team-a/app:1, not
	// registry.example.com/team-a-evil/app). An image without a registry
	// host is Docker Hub's, as the container runtime pulls it: nginx is
	// docker.io/library/nginx, team/app is docker.io/team/app.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Registries []RegistryPrefix `json:"registries,omitempty"`

	// storageClasses the tenant's PersistentVolumeClaims (a StatefulSet's
	// volumeClaimTemplates and a pod's ephemeral volumes included) may name
	// in storageClassName. With storageClasses set, a claim must name one:
	// a claim without a class (or with the empty class) takes the cluster's
	// default class, whichever that is when it is bound, or a volume of no
	// class, and is refused. (Where a default class exists, the API server
	// names it on the claim before the check: list it to allow it.)
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	StorageClasses []ObjectName `json:"storageClasses,omitempty"`

	// priorityClasses the tenant's pods (and MarkdownViews' pod) may name in
	// priorityClassName. A pod without one runs at the cluster's default
	// priority, and is admitted. (Where a PriorityClass is the global
	// default, the API server names it on the pod before the check: list it
	// to allow it.)
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	PriorityClasses []ObjectName `json:"priorityClasses,omitempty"`

	// runtimeClasses the tenant's pods may name in runtimeClassName. A pod
	// without one runs with the node's default runtime, and is admitted.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	RuntimeClasses []ObjectName `json:"runtimeClasses,omitempty"`

	// serviceTypes the tenant's Services may be of, on creation and on every
	// change (a Service without a type is a ClusterIP one). With
	// serviceTypes [ClusterIP], a NodePort, LoadBalancer or ExternalName
	// Service is refused.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=4
	ServiceTypes []ServiceType `json:"serviceTypes,omitempty"`

	// nodeSelector are node labels every pod of the tenant (and every
	// MarkdownView's pod.nodeSelector) must select, with these values: a pod
	// whose spec.nodeSelector lacks one is refused, so the team's pods run
	// only on the nodes set aside for it. The API server cannot add them to
	// a pod (that needs a mutating admission policy): the team puts them in
	// its pod templates.
	// +optional
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=8
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]{0,61}[a-zA-Z0-9])?$'))",message="node label keys must be qualified names: an optional DNS subdomain prefix and '/', then at most 63 characters"
	NodeSelector map[string]LabelValue `json:"nodeSelector,omitempty"`
}

// ServiceType is a Service's spec.type.
// +kubebuilder:validation:Enum=ClusterIP;NodePort;LoadBalancer;ExternalName
type ServiceType string

// HostnamePattern is a DNS name in lower case, or *. followed by one.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=253
// +kubebuilder:validation:XValidation:rule="self.matches('^(\\\\*\\\\.)?[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$')",message="a hostname allowance is a DNS name in lower case (docs.example.com) or *. followed by one (*.team-a.example.com)"
type HostnamePattern string

// ObjectName is the name of a cluster-scoped object such as an IngressClass:
// a DNS subdomain name.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=253
// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="must be a DNS subdomain name"
type ObjectName string

// RegistryPrefix is a registry host, its port if any, and an optional path.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=253
// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*(:[0-9]{1,5})?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*$')",message="a registry allowance is a registry host in lower case, its port if any, and an optional path, such as registry.example.com, localhost:5000 or registry.example.com/team-a (no tag, no trailing /)"
type RegistryPrefix string

// GatewayReference names a Gateway API Gateway.
type GatewayReference struct {
	// namespace of the Gateway.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="namespace must be a DNS label"
	Namespace string `json:"namespace,omitempty"`
	// name of the Gateway.
	// +required
	Name ObjectName `json:"name,omitempty"`
}

// Subject is an RBAC subject: a User, a Group or a ServiceAccount.
// +kubebuilder:validation:XValidation:rule="self.kind == 'ServiceAccount' ? (has(self.namespace) && !has(self.apiGroup)) : (!has(self.namespace) && has(self.apiGroup) && self.apiGroup == 'rbac.authorization.k8s.io')",message="a User or Group needs apiGroup rbac.authorization.k8s.io and no namespace; a ServiceAccount needs a namespace and no apiGroup"
type Subject struct {
	// kind is User, Group or ServiceAccount.
	// +required
	// +kubebuilder:validation:Enum=User;Group;ServiceAccount
	Kind string `json:"kind,omitempty"`
	// name of the user, group or service account.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// apiGroup is rbac.authorization.k8s.io for users and groups, unset for service accounts.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	APIGroup string `json:"apiGroup,omitempty"`
	// namespace of a ServiceAccount.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
}

// TenantQuota is the ResourceQuota each namespace of the tenant gets: limits
// per namespace, limits for the tenant as a whole, or both.
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:XValidation:rule="has(self.hard) || has(self.tenant)",message="a quota needs hard (per namespace), tenant (for the whole tenant), or both"
type TenantQuota struct {
	// hard are the limits of each namespace's ResourceQuota, as in a
	// ResourceQuota's spec.hard. With tenant set too, they cap each
	// namespace's share of the tenant's limits.
	// +optional
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253 && k.matches('^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$'))",message="resource names are qualified names such as cpu, requests.memory or count/deployments.apps"
	// +kubebuilder:validation:XValidation:rule="self.all(k, type(self[k]) == int ? self[k] >= 0 : !self[k].startsWith('-'))",message="quantities must not be negative"
	Hard corev1.ResourceList `json:"hard,omitempty"`

	// tenant are limits on the tenant's namespaces together. Trellis puts a
	// share of them in each namespace's ResourceQuota (its usage, and an
	// equal part of what the tenant does not use), and moves the shares as
	// usage changes, so that the API server's own quota admission never
	// admits more than the limit in all. A namespace whose share is used up
	// refuses until the shares are moved, even while others have room.
	// +optional
	Tenant TenantWideQuota `json:"tenant,omitzero"`
}

// TenantWideQuota are limits on the sum over all of a tenant's namespaces.
type TenantWideQuota struct {
	// hard are the limits, as in a ResourceQuota's spec.hard: summed over
	// the tenant's namespaces, usage never exceeds them. Resources counted
	// in whole units (CPU in milli-units): a fraction is rounded down.
	// +required
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253 && k.matches('^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$'))",message="resource names are qualified names such as cpu, requests.memory or count/deployments.apps"
	// +kubebuilder:validation:XValidation:rule="self.all(k, type(self[k]) == int ? self[k] >= 0 : !self[k].startsWith('-'))",message="quantities must not be negative"
	Hard corev1.ResourceList `json:"hard,omitempty"`
}

// TenantLimitRange is the LimitRange each namespace of the tenant gets.
type TenantLimitRange struct {
	// limits are the LimitRange's items, as in a LimitRange's spec.limits.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	Limits []LimitRangeItem `json:"limits,omitempty"`
}

// LimitRangeItem is one item of a LimitRange: the bounds and defaults of one
// kind of object. The API server checks that they are consistent (min ≤
// default ≤ max) when Trellis writes the LimitRange; a refusal is reported in
// the Tenant's status.
// +kubebuilder:validation:MinProperties=2
type LimitRangeItem struct {
	// type is the kind of object limited: Container, Pod or PersistentVolumeClaim.
	// +required
	// +kubebuilder:validation:Enum=Container;Pod;PersistentVolumeClaim
	Type corev1.LimitType `json:"type,omitempty"`
	// max is the most an object of this type may use.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253 && k.matches('^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$'))",message="resource names are qualified names such as cpu, requests.memory or count/deployments.apps"
	// +kubebuilder:validation:XValidation:rule="self.all(k, type(self[k]) == int ? self[k] >= 0 : !self[k].startsWith('-'))",message="quantities must not be negative"
	Max corev1.ResourceList `json:"max,omitempty"`
	// min is the least an object of this type may ask for.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253 && k.matches('^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$'))",message="resource names are qualified names such as cpu, requests.memory or count/deployments.apps"
	// +kubebuilder:validation:XValidation:rule="self.all(k, type(self[k]) == int ? self[k] >= 0 : !self[k].startsWith('-'))",message="quantities must not be negative"
	Min corev1.ResourceList `json:"min,omitempty"`
	// default is the limit a container gets when it sets none.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253 && k.matches('^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$'))",message="resource names are qualified names such as cpu, requests.memory or count/deployments.apps"
	// +kubebuilder:validation:XValidation:rule="self.all(k, type(self[k]) == int ? self[k] >= 0 : !self[k].startsWith('-'))",message="quantities must not be negative"
	Default corev1.ResourceList `json:"default,omitempty"`
	// defaultRequest is the request a container gets when it sets none.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253 && k.matches('^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$'))",message="resource names are qualified names such as cpu, requests.memory or count/deployments.apps"
	// +kubebuilder:validation:XValidation:rule="self.all(k, type(self[k]) == int ? self[k] >= 0 : !self[k].startsWith('-'))",message="quantities must not be negative"
	DefaultRequest corev1.ResourceList `json:"defaultRequest,omitempty"`
	// maxLimitRequestRatio is the largest limit/request ratio allowed.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253 && k.matches('^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]*[a-zA-Z0-9])?$'))",message="resource names are qualified names such as cpu, requests.memory or count/deployments.apps"
	// +kubebuilder:validation:XValidation:rule="self.all(k, type(self[k]) == int ? self[k] >= 0 : !self[k].startsWith('-'))",message="quantities must not be negative"
	MaxLimitRequestRatio corev1.ResourceList `json:"maxLimitRequestRatio,omitempty"`
}

// NetworkIsolation admits traffic into the tenant's namespaces only from the
// tenant's own namespaces and from the namespaces listed.
type NetworkIsolation struct {
	// allowFromNamespaces are further namespaces, by name, whose traffic is
	// admitted, e.g. an ingress controller's or a monitoring system's.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	AllowFromNamespaces []string `json:"allowFromNamespaces,omitempty"`
}

// PodSecurityLevel is a Pod Security Standard.
// +kubebuilder:validation:Enum=privileged;baseline;restricted
type PodSecurityLevel string

// The Pod Security Standards.
const (
	PodSecurityPrivileged PodSecurityLevel = "privileged"
	PodSecurityBaseline   PodSecurityLevel = "baseline"
	PodSecurityRestricted PodSecurityLevel = "restricted"
)

// PodSecurity is the Pod Security Admission configuration of the tenant's
// namespaces: the pod-security.kubernetes.io/enforce, warn and audit labels.
type PodSecurity struct {
	// enforce is the level pods must meet to be admitted.
	// +required
	Enforce PodSecurityLevel `json:"enforce,omitempty"`
	// warn is the level above which the API server warns the user; unset: no label.
	// +optional
	Warn PodSecurityLevel `json:"warn,omitempty"`
	// audit is the level above which the audit log records a violation; unset: no label.
	// +optional
	Audit PodSecurityLevel `json:"audit,omitempty"`
}

// NamespaceMetadata are labels and annotations for the tenant's namespaces.
// +kubebuilder:validation:MinProperties=1
type NamespaceMetadata struct {
	// labels are put on every namespace of the tenant.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]{0,61}[a-zA-Z0-9])?$'))",message="label keys must be qualified names: an optional DNS subdomain prefix and '/', then at most 63 characters"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k.split('/')[0] == 'trellis.dev' || k.split('/')[0].endsWith('.trellis.dev')) && k != 'app.kubernetes.io/managed-by' && k != 'app.kubernetes.io/part-of')",message="labels of Trellis' own (under trellis.dev and its subdomains, app.kubernetes.io/managed-by, app.kubernetes.io/part-of) are reserved: a namespace's trellis.dev labels are for the cluster's admins to set, e.g. to open an ObjectStore to it"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.contains('/') || !(k.split('/')[0] in ['kubernetes.io', 'k8s.io'] || k.split('/')[0].endsWith('.kubernetes.io') || k.split('/')[0].endsWith('.k8s.io')))",message="labels under kubernetes.io and k8s.io are reserved for Kubernetes (Pod Security levels go in podSecurity)"
	Labels map[string]LabelValue `json:"labels,omitempty"`

	// annotations are put on every namespace of the tenant.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[a-zA-Z0-9]([-a-zA-Z0-9_.]{0,61}[a-zA-Z0-9])?$'))",message="annotation keys must be qualified names: an optional DNS subdomain prefix and '/', then at most 63 characters"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k.split('/')[0] == 'trellis.dev' || k.split('/')[0].endsWith('.trellis.dev')))",message="annotations of Trellis' own (under trellis.dev and its subdomains) are reserved"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.contains('/') || !(k.split('/')[0] in ['kubernetes.io', 'k8s.io'] || k.split('/')[0].endsWith('.kubernetes.io') || k.split('/')[0].endsWith('.k8s.io')))",message="annotations under kubernetes.io and k8s.io are reserved for Kubernetes"
	Annotations map[string]AnnotationValue `json:"annotations,omitempty"`
}

// LabelValue is a label value: at most 63 characters, alphanumerics with '-',
// '_' and '.' inside.
// +kubebuilder:validation:MaxLength=63
// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
type LabelValue string

// AnnotationValue is an annotation value.
// +kubebuilder:validation:MaxLength=4096
type AnnotationValue string

// NamespaceState is what Trellis found for one of the tenant's namespaces.
type NamespaceState string

// The states of a tenant namespace, as reported in status.
const (
	NamespaceReady       NamespaceState = "Ready"
	NamespaceConflict    NamespaceState = "Conflict"
	NamespaceProtected   NamespaceState = "Protected"
	NamespaceTerminating NamespaceState = "Terminating"
)

// TenantNamespaceStatus is the state of one namespace of the tenant.
type TenantNamespaceStatus struct {
	// name is the full namespace name (prefix included).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name,omitempty"`
	// state is what Trellis found: Ready, Conflict, Protected or Terminating.
	// +required
	// +kubebuilder:validation:Enum=Ready;Conflict;Protected;Terminating
	State NamespaceState `json:"state,omitempty"`
	// message explains a state other than Ready.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// requestedBy names the NamespaceRequest (<namespace>/<name>) the
	// namespace was made for; unset for a namespace of the spec.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	RequestedBy string `json:"requestedBy,omitempty"`
}

// CopyState is what Trellis found of a copy's source.
type CopyState string

// The states of a copy.
const (
	CopyReady            CopyState = "Ready"
	CopySourceNotFound   CopyState = "SourceNotFound"
	CopySourceNotGranted CopyState = "SourceNotGranted"
	CopySourceReplaced   CopyState = "SourceReplaced"
)

// TenantCopyStatus is the state of one item of spec.copies.
type TenantCopyStatus struct {
	// kind is the item's kind.
	// +required
	Kind CopyKind `json:"kind,omitempty"`
	// name is the item's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// state is Ready (every ready namespace holds the source's
	// sourceResourceVersion), SourceNotFound, SourceNotGranted (a Secret
	// in a namespace whose owner did not bind trellis-copy-source to the
	// manager) or SourceReplaced (the source namespace is not the one
	// recorded: it was deleted and made again; nothing is copied from it
	// before sourceNamespaceGeneration).
	// +required
	// +kubebuilder:validation:Enum=Ready;SourceNotFound;SourceNotGranted;SourceReplaced
	State CopyState `json:"state,omitempty"`
	// message explains a state other than Ready.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// sourceResourceVersion is the source's version the copies hold; for
	// an item given inline, a hash of what the copies hold.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	SourceResourceVersion string `json:"sourceResourceVersion,omitempty"`
	// sourceNamespace is the namespace sourceNamespaceUID belongs to: the
	// item's from.namespace when it was recorded.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	SourceNamespace string `json:"sourceNamespace,omitempty"`
	// sourceNamespaceUID identifies the source namespace the copies are
	// made from, recorded when Trellis first read a source there (trust on
	// first copy): a namespace of that name with another UID was deleted
	// and made again, maybe by someone else, and is SourceReplaced.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	SourceNamespaceUID string `json:"sourceNamespaceUID,omitempty"`
	// sourceNamespaceGeneration is the Tenant's first generation that
	// copies from that namespace: the one that first copied from it, or,
	// for a namespace found in place of the recorded one, the generation
	// after the one that found it. A change of the spec checks again that
	// its editor may get every source (tenant-copy-rights).
	// +optional
	// +kubebuilder:validation:Minimum=0
	SourceNamespaceGeneration int64 `json:"sourceNamespaceGeneration,omitempty"`
}

// TenantStatus is what the controller observed.
type TenantStatus struct {
	// conditions are Ready (the summary), Reconciling (work in progress),
	// Stalled (a person must act), SubjectsFound (every ServiceAccount
	// admin or viewer is in a namespace that exists) and, with
	// quota.tenant, QuotaWithinLimit (False while the namespaces together
	// use more than the tenant's limit: every namespace is then held at its
	// usage).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation of the spec this status describes;
	// 0 until the controller has seen the object.
	// +optional
	// +default=0
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// namespaces is the state of each namespace in the spec, then of each
	// namespace granted to a NamespaceRequest.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=128
	Namespaces []TenantNamespaceStatus `json:"namespaces,omitempty"`

	// namespaceNames are the names in namespaces, in the same order: what
	// kubectl get shows (a column of a CRD prints one JSONPath result, so it
	// cannot list namespaces[*].name).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=128
	// +kubebuilder:validation:items:MaxLength=63
	NamespaceNames []string `json:"namespaceNames,omitempty"`

	// copies is what each item of spec.copies last found of its source:
	// the source's resourceVersion copied into every ready namespace, or
	// why nothing was copied. It is also the record of the copies kept, by
	// which those whose item leaves the spec are deleted.
	// +optional
	// +listType=map
	// +listMapKey=kind
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Copies []TenantCopyStatus `json:"copies,omitempty"`

	// quota is the tenant-wide quota: the limits and the usage of its
	// namespaces' ResourceQuotas, summed over the namespaces that are ready.
	// +optional
	Quota TenantQuotaStatus `json:"quota,omitzero"`

	// lastHandledReconcileAt is the value of the reconcile.fluxcd.io/requestedAt
	// annotation the controller last answered with a reconcile.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
}

// TenantQuotaStatus is a tenant's quota summed over its namespaces.
type TenantQuotaStatus struct {
	// hard is the most the ready namespaces may use together. For a
	// resource of quota.tenant, the tenant's limit (or, if smaller, the
	// per-namespace limits summed); for one of quota.hard only, the
	// per-namespace limits summed.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Hard corev1.ResourceList `json:"hard,omitempty"`
	// used is the sum of the namespaces' usage, as the quota controller last
	// counted it.
	// +optional
	// +kubebuilder:validation:MaxProperties=32
	Used corev1.ResourceList `json:"used,omitempty"`
}

// Tenant is a team's set of namespaces, its admin rights in them, and the
// guardrails every one of them gets.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=trellis,shortName=tn
// +kubebuilder:printcolumn:name="Admins",type=string,JSONPath=`.spec.admins[*].name`
// +kubebuilder:printcolumn:name="Prefix",type=string,JSONPath=`.spec.namespacePrefix`
// +kubebuilder:printcolumn:name="Namespaces",type=string,JSONPath=`.status.namespaceNames`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspend`,priority=1
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 40 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="a Tenant name must be a DNS label of at most 40 characters (it names the tenant's ClusterRole and labels its namespaces)"
type Tenant struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the tenant's namespaces, who administers them, and their guardrails.
	// +required
	Spec TenantSpec `json:"spec,omitzero"`

	// status is what the controller observed.
	// +optional
	// +default={}
	Status TenantStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the status conditions.
func (in *Tenant) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions replaces the status conditions.
func (in *Tenant) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// TenantList is a list of Tenants.
// +kubebuilder:object:root=true
type TenantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Tenant `json:"items"`
}
