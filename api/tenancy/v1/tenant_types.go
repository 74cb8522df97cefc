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

	// admin is bound to the built-in admin ClusterRole in every namespace of
	// the tenant, and may read this Tenant and its namespaces.
	// +required
	Admin AdminSubject `json:"admin,omitzero"`

	// namespaceDeletionPolicy says what happens to a namespace that leaves the
	// spec, or whose Tenant is deleted: Retain (default) keeps it; Delete
	// deletes it with its contents. Only namespaces this Tenant created are
	// ever deleted.
	// +optional
	// +default="Retain"
	NamespaceDeletionPolicy NamespaceDeletionPolicy `json:"namespaceDeletionPolicy,omitempty"`
}

// AdminSubject is an RBAC subject: a User, a Group or a ServiceAccount.
// +kubebuilder:validation:XValidation:rule="self.kind == 'ServiceAccount' ? (has(self.namespace) && !has(self.apiGroup)) : (!has(self.namespace) && has(self.apiGroup) && self.apiGroup == 'rbac.authorization.k8s.io')",message="a User or Group admin needs apiGroup rbac.authorization.k8s.io and no namespace; a ServiceAccount admin needs a namespace and no apiGroup"
type AdminSubject struct {
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
}

// TenantStatus is what the controller observed.
type TenantStatus struct {
	// conditions are Ready (the summary), Reconciling (work in progress) and
	// Stalled (a person must act).
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

	// namespaces is the state of each namespace in the spec.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
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
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the tenant's namespaces and who administers them.
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
