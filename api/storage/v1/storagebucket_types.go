package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DeletionPolicy says what happens to the bucket when its StorageBucket is deleted.
// +kubebuilder:validation:Enum=Retain;Delete
type DeletionPolicy string

const (
	// DeletionRetain keeps the bucket and its objects.
	DeletionRetain DeletionPolicy = "Retain"
	// DeletionDelete deletes the bucket if it is empty; a non-empty bucket
	// blocks the deletion until it is emptied or the policy becomes Retain.
	DeletionDelete DeletionPolicy = "Delete"
)

// StoreReference names an ObjectStore.
type StoreReference struct {
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// HealthCheck configures the periodic check of the bucket.
type HealthCheck struct {
	// Interval between checks; at least 10s.
	// +optional
	// +kubebuilder:default="60s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Format=duration
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s') && duration(self) <= duration('24h')",message="healthCheck.interval must be between 10s and 24h"
	Interval metav1.Duration `json:"interval,omitempty"`
	// Probe also writes, reads back and deletes a small object on each check,
	// proving the bucket accepts data, not just that it exists.
	// +optional
	Probe bool `json:"probe,omitempty"`
}

// StorageBucketSpec is the bucket a user wants.
// +kubebuilder:validation:XValidation:rule="has(self.bucketName) == has(oldSelf.bucketName) && (!has(self.bucketName) || self.bucketName == oldSelf.bucketName)",message="bucketName is immutable"
// +kubebuilder:validation:XValidation:rule="self.storeRef == oldSelf.storeRef",message="storeRef is immutable"
type StorageBucketSpec struct {
	// StoreRef names the ObjectStore the bucket lives in. Immutable.
	StoreRef StoreReference `json:"storeRef"`

	// BucketName is the bucket's name in the store; derived from the namespace
	// and name when empty. Immutable.
	// +optional
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9][a-z0-9.-]*[a-z0-9]$')",message="bucketName must be 3-63 lower-case letters, digits, '.' or '-', starting and ending with a letter or digit"
	// +kubebuilder:validation:XValidation:rule="!self.contains('..') && !self.contains('.-') && !self.contains('-.')",message="bucketName must not contain '..', '.-' or '-.'"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9]+[.][0-9]+[.][0-9]+[.][0-9]+$')",message="bucketName must not look like an IP address"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('xn--') && !self.startsWith('sthree-') && !self.endsWith('-s3alias') && !self.endsWith('--ol-s3')",message="bucketName must not use a prefix or suffix S3 reserves (xn--, sthree-, -s3alias, --ol-s3)"
	BucketName string `json:"bucketName,omitempty"`

	// DeletionPolicy: Retain (default) keeps the bucket when the StorageBucket is
	// deleted; Delete deletes it if it is empty.
	// +optional
	// +kubebuilder:default=Retain
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// AdoptExisting lets Trellis take over a bucket that already exists in the
	// store and was not created by this StorageBucket. Without it, an existing
	// bucket is reported as a conflict and left alone.
	// +optional
	AdoptExisting bool `json:"adoptExisting,omitempty"`

	// HealthCheck configures the periodic health check.
	// +optional
	// +kubebuilder:default={}
	HealthCheck HealthCheck `json:"healthCheck,omitempty"`
}

// StorageBucketStatus is what the controller observed.
type StorageBucketStatus struct {
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// BucketName is the bucket's name in the store.
	// +optional
	BucketName string `json:"bucketName,omitempty"`
	// Claimed is true once Trellis created or adopted the bucket: it carries
	// this StorageBucket's UID as a tag, and later checks need only HeadBucket.
	// +optional
	Claimed bool `json:"claimed,omitempty"`
	// Conditions: Ready (summary), Healthy (the last check passed).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// StorageBucket is a bucket in an ObjectStore outside the cluster, created and
// health-checked by Trellis.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sbucket,categories=trellis
// +kubebuilder:printcolumn:name="Bucket",type=string,JSONPath=`.status.bucketName`
// +kubebuilder:printcolumn:name="Store",type=string,JSONPath=`.spec.storeRef.name`
// +kubebuilder:printcolumn:name="Healthy",type=string,JSONPath=`.status.conditions[?(@.type=="Healthy")].status`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,priority=1,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type StorageBucket struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   StorageBucketSpec   `json:"spec,omitempty"`
	Status StorageBucketStatus `json:"status,omitempty"`
}

// StorageBucketList is a list of StorageBuckets.
// +kubebuilder:object:root=true
type StorageBucketList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StorageBucket `json:"items"`
}

func init() {
	SchemeBuilder.Register(&StorageBucket{}, &StorageBucketList{})
}
