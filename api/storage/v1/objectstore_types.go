package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SecretReference names a Secret in a namespace.
type SecretReference struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ObjectStoreSpec is how to reach an S3-compatible object store.
type ObjectStoreSpec struct {
	// Endpoint is the store's URL, e.g. https://s3.example.com or http://127.0.0.1:7070.
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^https?://[^/?#@]+/?$')",message="endpoint must be an http(s) URL with a host and optional port, and no path, query or credentials, e.g. https://s3.example.com"
	Endpoint string `json:"endpoint"`

	// Region buckets are created in.
	// +optional
	// +kubebuilder:default=us-east-1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-z0-9-]+$`
	Region string `json:"region,omitempty"`

	// PathStyle addresses buckets as <endpoint>/<bucket> instead of <bucket>.<endpoint>.
	// +optional
	PathStyle bool `json:"pathStyle,omitempty"`

	// CredentialsSecretRef names the Secret holding the keys "accessKeyID" and
	// "secretAccessKey". Trellis reads it directly (it never caches Secrets) and
	// never logs it or copies it into status or Events.
	CredentialsSecretRef SecretReference `json:"credentialsSecretRef"`
}

// ObjectStoreStatus is what the controller observed.
type ObjectStoreStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready (reachable, credentials accepted).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ObjectStore is an S3-compatible object store outside the cluster, set up by
// the platform team for StorageBuckets to use.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=trellis
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.spec.endpoint`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ObjectStore struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   ObjectStoreSpec   `json:"spec,omitempty"`
	Status ObjectStoreStatus `json:"status,omitempty"`
}

// ObjectStoreList is a list of ObjectStores.
// +kubebuilder:object:root=true
type ObjectStoreList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ObjectStore `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ObjectStore{}, &ObjectStoreList{})
}
