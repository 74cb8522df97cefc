package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AccessMode is what a BucketAccess's key may do with the bucket's objects.
// +kubebuilder:validation:Enum=ReadOnly;ReadWrite
type AccessMode string

const (
	// AccessReadOnly lists and reads objects.
	AccessReadOnly AccessMode = "ReadOnly"
	// AccessReadWrite also writes and deletes objects.
	AccessReadWrite AccessMode = "ReadWrite"
)

// BucketReference names a StorageBucket in the same namespace.
type BucketReference struct {
	// name of the StorageBucket.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
}

// BucketAccessSpec is the access a workload wants to one bucket.
// +kubebuilder:validation:XValidation:rule="self.bucketRef == oldSelf.bucketRef",message="bucketRef is immutable"
// +kubebuilder:validation:XValidation:rule="self.secretName == oldSelf.secretName",message="secretName is immutable"
// +kubebuilder:validation:XValidation:rule="self.keyVersion >= oldSelf.keyVersion",message="keyVersion cannot go down: a key once replaced is revoked for good"
type BucketAccessSpec struct {
	// bucketRef names the StorageBucket, in this BucketAccess's namespace.
	// Immutable.
	// +required
	BucketRef BucketReference `json:"bucketRef,omitzero"`

	// mode is ReadOnly (list and read objects) or ReadWrite (also write and
	// delete them). Nothing else: not the bucket's policy, settings or tags.
	// +required
	Mode AccessMode `json:"mode,omitempty"`

	// secretName is the Secret, in this namespace, that Trellis creates with
	// the credentials (endpoint, region, bucket, access key id and secret
	// key, under their own names and as the AWS SDKs' environment
	// variables). A Secret of that name that Trellis did not create for this
	// BucketAccess is never overwritten. Immutable.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="secretName must be a DNS subdomain: lower-case letters, digits, '-' and '.'"
	SecretName string `json:"secretName,omitempty"`

	// keyVersion is the generation of the key: raising it rotates the key.
	// Trellis issues a new key, writes it to the Secret, and revokes the
	// previous one after rotationGracePeriodSeconds. It never goes down.
	// +optional
	// +default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000000
	KeyVersion int32 `json:"keyVersion,omitempty"`

	// rotationGracePeriodSeconds is how long a replaced key keeps working
	// after a rotation, so workloads can pick up the new one: 0 revokes it at
	// once; at most 7 days; 3600 when unset.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=604800
	RotationGracePeriodSeconds *int32 `json:"rotationGracePeriodSeconds,omitempty"`

	// suspend stops the controller acting on this object: what exists is
	// kept as it is, nothing is created, changed or deleted, and the status
	// says Suspended. Deleting the object still runs its deletion policy.
	// Setting it back to false reconciles at once.
	// +optional
	Suspend *bool `json:"suspend,omitempty"`
}

// RetiringKey is a replaced key that still works until its grace period ends.
type RetiringKey struct {
	// accessKeyID of the replaced key.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	AccessKeyID string `json:"accessKeyID,omitempty"`
	// account is the store's account of the key, which revoking it deletes;
	// the access key id when unset (versitygw, where they are the same).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Account string `json:"account,omitempty"`
	// principal is how the bucket policy names the key (an IAM user's ARN);
	// the access key id when unset.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	Principal string `json:"principal,omitempty"`
	// revokeAt is when the key is revoked.
	// +required
	RevokeAt *metav1.Time `json:"revokeAt,omitempty"`
}

// BucketAccessStatus is what the controller observed.
type BucketAccessStatus struct {
	// conditions are Ready (the key works on the bucket and the Secret holds
	// it), Reconciling (work in progress, or the store does not answer) and
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

	// storeName is the ObjectStore the account lives in, recorded so the
	// account is revoked even if the StorageBucket is gone first.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	StoreName string `json:"storeName,omitempty"`

	// bucketName is the bucket in the store the key is granted on.
	// +optional
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	BucketName string `json:"bucketName,omitempty"`

	// accessKeyID is the key the Secret holds (an identifier, not a secret).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	AccessKeyID string `json:"accessKeyID,omitempty"`

	// account is the store's account of the current key, which revoking it
	// deletes: an IAM user's name, the access key id on versitygw (unset
	// there by earlier versions of Trellis).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	Account string `json:"account,omitempty"`

	// principal is how the bucket policy names the current key: an IAM
	// user's ARN, the access key id on versitygw (where it may be unset).
	// StorageBucket policies name it to grant the key more.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	Principal string `json:"principal,omitempty"`

	// keyVersion is the spec.keyVersion the current key was issued for.
	// +optional
	// +kubebuilder:validation:Minimum=0
	KeyVersion int32 `json:"keyVersion,omitempty"`

	// retiringKeys are replaced keys that keep working until revokeAt.
	// +optional
	// +listType=map
	// +listMapKey=accessKeyID
	// +kubebuilder:validation:MaxItems=16
	RetiringKeys []RetiringKey `json:"retiringKeys,omitempty"`

	// lastHandledReconcileAt is the value of the reconcile.fluxcd.io/requestedAt
	// annotation the controller last answered with a reconcile.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
}

// BucketAccess gives a workload a key of its own to one bucket: Trellis
// creates an account in the bucket's store that may read (or read and write)
// that bucket and nothing else, and writes its credentials to a Secret.
// Deleting the BucketAccess revokes the key and deletes the Secret.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=baccess,categories=trellis
// +kubebuilder:printcolumn:name="Bucket",type=string,JSONPath=`.spec.bucketRef.name`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.mode`
// +kubebuilder:printcolumn:name="Secret",type=string,JSONPath=`.spec.secretName`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspend`,priority=1
type BucketAccess struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the access wanted.
	// +required
	Spec BucketAccessSpec `json:"spec,omitzero"`

	// status is what the controller observed.
	// +optional
	// +default={}
	Status BucketAccessStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the status conditions.
func (in *BucketAccess) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions replaces the status conditions.
func (in *BucketAccess) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// BucketAccessList is a list of BucketAccesses.
// +kubebuilder:object:root=true
type BucketAccessList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BucketAccess `json:"items"`
}
