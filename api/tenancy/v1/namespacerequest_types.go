package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NamespaceRequestStatus is what the Tenant controller decided about a request.
type NamespaceRequestStatus struct {
	// conditions are Ready (the namespace exists with every guardrail of
	// the Tenant), Reconciling (it is being made) and Stalled (the request
	// is refused, and why: SelfServiceDisabled, InvalidName, NameNotAllowed,
	// NameTaken, LimitReached, NotInTenant).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation this status describes; 0 until
	// the Tenant controller has looked at the request.
	// +optional
	// +default=0
	// +kubebuilder:validation:Minimum=0
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// tenant is the Tenant whose namespace the request is in.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Tenant string `json:"tenant,omitempty"`

	// namespace is the full name of the namespace asked for: the Tenant's
	// namespacePrefix followed by the request's name.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Namespace string `json:"namespace,omitempty"`

	// grantedNamespace is the namespace the Tenant holds for this request,
	// which deleting the request gives up. It is recorded before the
	// namespace is made, and cleared once the namespace is not the Tenant's
	// for this request any more; unset, the request holds none. The
	// namespace-requests admission policy reads it: only an admin of that
	// namespace may delete the request.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	GrantedNamespace string `json:"grantedNamespace,omitempty"`
}

// NamespaceRequest asks, from inside a namespace of a Tenant, for one more
// namespace of that Tenant: <namespacePrefix><metadata.name>, with every
// guardrail the Tenant gives its namespaces. The Tenant allows it with
// spec.selfService (how many, which names). Tenant admins may create and
// delete requests: the built-in admin role includes them. Deleting the
// request gives the namespace up as the Tenant's namespaceDeletionPolicy says.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=trellis,shortName=nsreq
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.status.namespace`
// +kubebuilder:printcolumn:name="Tenant",type=string,JSONPath=`.status.tenant`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 62 && self.metadata.name.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="a NamespaceRequest's name is the end of a namespace name: a DNS label (lower-case letters, digits and '-') of at most 62 characters"
type NamespaceRequest struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata; its name is the namespace asked
	// for, without the Tenant's prefix.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// status is what the Tenant controller decided.
	// +optional
	// +default={}
	Status NamespaceRequestStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the status conditions.
func (in *NamespaceRequest) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions replaces the status conditions.
func (in *NamespaceRequest) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// NamespaceRequestList is a list of NamespaceRequests.
// +kubebuilder:object:root=true
type NamespaceRequestList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NamespaceRequest `json:"items"`
}
