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
	// name of the ObjectStore.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
}

// HealthCheck configures the periodic check of the bucket.
type HealthCheck struct {
	// intervalSeconds is the time between checks, from 10 seconds to a day;
	// 60 when unset.
	// +optional
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=86400
	IntervalSeconds int32 `json:"intervalSeconds,omitempty"`
	// probe also writes, reads back and deletes a small object on each check,
	// proving the bucket accepts data, not just that it exists.
	// +optional
	Probe *bool `json:"probe,omitempty"`
}

// StorageBucketSpec is the bucket a user wants.
// +kubebuilder:validation:XValidation:rule="has(self.bucketName) == has(oldSelf.bucketName) && (!has(self.bucketName) || self.bucketName == oldSelf.bucketName)",message="bucketName is immutable"
// +kubebuilder:validation:XValidation:rule="self.storeRef == oldSelf.storeRef",message="storeRef is immutable"
type StorageBucketSpec struct {
	// storeRef names the ObjectStore the bucket lives in. Immutable.
	// +required
	StoreRef StoreReference `json:"storeRef,omitzero"`

	// bucketName is the bucket's name in the store; derived from the namespace
	// and name when unset. Immutable.
	// +optional
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9][a-z0-9.-]*[a-z0-9]$')",message="bucketName must be 3-63 lower-case letters, digits, '.' or '-', starting and ending with a letter or digit"
	// +kubebuilder:validation:XValidation:rule="!self.contains('..') && !self.contains('.-') && !self.contains('-.')",message="bucketName must not contain '..', '.-' or '-.'"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[0-9]+[.][0-9]+[.][0-9]+[.][0-9]+$')",message="bucketName must not look like an IP address"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('xn--') && !self.startsWith('sthree-') && !self.endsWith('-s3alias') && !self.endsWith('--ol-s3')",message="bucketName must not use a prefix or suffix S3 reserves (xn--, sthree-, -s3alias, --ol-s3)"
	BucketName string `json:"bucketName,omitempty"`

	// deletionPolicy says what happens to the bucket when the StorageBucket is
	// deleted: Retain (default) keeps it; Delete deletes it if it is empty.
	// +optional
	// +default="Retain"
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// adoptExisting lets Trellis take over a bucket that already exists in the
	// store and was not created by this StorageBucket. Without it, an existing
	// bucket is reported as a conflict and left alone.
	// +optional
	AdoptExisting *bool `json:"adoptExisting,omitempty"`

	// healthCheck configures the periodic health check.
	// +optional
	HealthCheck *HealthCheck `json:"healthCheck,omitempty"`
}

// BucketClaim is how far Trellis got in making a bucket its own.
// +kubebuilder:validation:Enum=Creating;Claimed
type BucketClaim string

const (
	// BucketCreating records, before the bucket is created, that this
	// StorageBucket is creating it: a bucket of that name found without an
	// owner tag is one Trellis created but could not tag yet (a crash or a
	// store error in between), and is claimed on the next check.
	BucketCreating BucketClaim = "Creating"
	// BucketClaimed means the bucket carries this StorageBucket's UID as a tag.
	BucketClaimed BucketClaim = "Claimed"
)

// StorageBucketStatus is what the controller observed.
type StorageBucketStatus struct {
	// conditions are Ready (the summary: the bucket exists, is ours and passed
	// its last check), Reconciling (work in progress, or the store does not
	// answer) and Stalled (a person must act).
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

	// bucketName is the bucket's name in the store.
	// +optional
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	BucketName string `json:"bucketName,omitempty"`

	// claim is Creating while Trellis creates the bucket and Claimed once the
	// bucket carries this StorageBucket's UID as a tag (later checks then need
	// only a HeadBucket).
	// +optional
	Claim BucketClaim `json:"claim,omitempty"`
}

// StorageBucket is a bucket in an ObjectStore outside the cluster, created and
// health-checked by Trellis.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=sbucket,categories=trellis
// +kubebuilder:printcolumn:name="Bucket",type=string,JSONPath=`.status.bucketName`
// +kubebuilder:printcolumn:name="Store",type=string,JSONPath=`.spec.storeRef.name`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type StorageBucket struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the bucket wanted.
	// +required
	Spec StorageBucketSpec `json:"spec,omitzero"`

	// status is what the controller observed.
	// +optional
	// +default={}
	Status StorageBucketStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the status conditions.
func (in *StorageBucket) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions replaces the status conditions.
func (in *StorageBucket) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// StorageBucketList is a list of StorageBuckets.
// +kubebuilder:object:root=true
type StorageBucketList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []StorageBucket `json:"items"`
}
