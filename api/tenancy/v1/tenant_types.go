package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NamespaceDeletionPolicy says what happens to a tenant's namespace when it
// leaves the spec or the Tenant is deleted.
// +kubebuilder:validation:Enum=Retain;Delete
type NamespaceDeletionPolicy string

const (
	// NamespaceRetain keeps the namespace and its contents; only the tenant's
	// RoleBinding and marks are removed.
	NamespaceRetain NamespaceDeletionPolicy = "Retain"
	// NamespaceDelete deletes the namespace, with everything in it.
	NamespaceDelete NamespaceDeletionPolicy = "Delete"
)

// TenantSpec is the team's namespaces and who administers them.
// +kubebuilder:validation:XValidation:rule="self.namespaces.all(n, size(self.namespacePrefix + n) <= 63 && (self.namespacePrefix + n).matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'))",message="namespacePrefix + each namespace must be a DNS label (lower-case letters, digits and '-', at most 63 characters)"
// +kubebuilder:validation:XValidation:rule="self.namespaces.all(n, !(self.namespacePrefix + n).startsWith('kube-') && (self.namespacePrefix + n) != 'default')",message="namespace names starting with kube- and the default namespace are reserved"
// +kubebuilder:validation:XValidation:rule="self.namespacePrefix == oldSelf.namespacePrefix",message="namespacePrefix is immutable: changing it would orphan the tenant's namespaces"
type TenantSpec struct {
	// Namespaces are the tenant's namespaces, without the prefix.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:MinLength=1
	Namespaces []string `json:"namespaces"`

	// NamespacePrefix is put in front of every namespace name, e.g. "team-a-".
	// Immutable.
	// +optional
	// +kubebuilder:default=""
	// +kubebuilder:validation:MaxLength=62
	NamespacePrefix string `json:"namespacePrefix"`

	// Admin is bound to the built-in admin ClusterRole in every namespace of
	// the tenant, and may read this Tenant and its namespaces.
	// +required
	Admin AdminSubject `json:"admin"`

	// NamespaceDeletionPolicy: Retain (default) keeps a namespace that leaves
	// the spec, or whose Tenant is deleted; Delete deletes it with its contents.
	// Only namespaces this Tenant created are ever deleted.
	// +optional
	// +kubebuilder:default=Retain
	NamespaceDeletionPolicy NamespaceDeletionPolicy `json:"namespaceDeletionPolicy,omitempty"`
}

// AdminSubject is an RBAC subject: a User, a Group or a ServiceAccount.
// +kubebuilder:validation:XValidation:rule="self.kind == 'ServiceAccount' ? (has(self.namespace) && size(self.namespace) > 0 && (!has(self.apiGroup) || size(self.apiGroup) == 0)) : ((!has(self.namespace) || size(self.namespace) == 0) && has(self.apiGroup) && self.apiGroup == 'rbac.authorization.k8s.io')",message="a User or Group admin needs apiGroup rbac.authorization.k8s.io and no namespace; a ServiceAccount admin needs a namespace and an empty apiGroup"
type AdminSubject struct {
	// Kind is User, Group or ServiceAccount.
	// +kubebuilder:validation:Enum=User;Group;ServiceAccount
	Kind string `json:"kind"`
	// Name of the user, group or service account.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// APIGroup is rbac.authorization.k8s.io for users and groups, empty for service accounts.
	// +optional
	APIGroup string `json:"apiGroup,omitempty"`
	// Namespace of a ServiceAccount.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
}

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
	// Name is the full namespace name (prefix included).
	Name  string         `json:"name"`
	State NamespaceState `json:"state"`
	// Message explains a state other than Ready.
	// +optional
	Message string `json:"message,omitempty"`
}

// TenantStatus is what the controller observed.
type TenantStatus struct {
	// ObservedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready (summary) and Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Namespaces is the state of each namespace in the spec.
	// +optional
	// +listType=map
	// +listMapKey=name
	Namespaces []TenantNamespaceStatus `json:"namespaces,omitempty"`
}

// Tenant is a team's set of namespaces and its admin rights in them.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=trellis
// +kubebuilder:printcolumn:name="Admin",type=string,JSONPath=`.spec.admin.name`
// +kubebuilder:printcolumn:name="Prefix",type=string,JSONPath=`.spec.namespacePrefix`
// +kubebuilder:printcolumn:name="Namespaces",type=string,JSONPath=`.spec.namespaces`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 40 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="a Tenant name must be a DNS label of at most 40 characters (it names the tenant's ClusterRole and labels its namespaces)"
type Tenant struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   TenantSpec   `json:"spec,omitempty"`
	Status TenantStatus `json:"status,omitempty"`
}

// TenantList is a list of Tenants.
// +kubebuilder:object:root=true
type TenantList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Tenant `json:"items"`
}

func init() {
	SchemeBuilder.Register(&Tenant{}, &TenantList{})
}
