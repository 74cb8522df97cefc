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

	// versioning keeps every version of every object: Enabled, or Suspended
	// to stop making new versions (S3 cannot turn versioning off once it was
	// on). Unset leaves the store's setting as it is.
	// +optional
	Versioning BucketVersioning `json:"versioning,omitempty"`

	// policy is the bucket policy, a JSON document as S3 defines it
	// ({"Version": "2012-10-17", "Statement": [...]}). Trellis adds to it the
	// statements that grant the bucket's BucketAccesses their keys (Sids
	// starting with TrellisAccess, reserved). Unset leaves the statements
	// the bucket has as they are (but for those a blocking store takes out,
	// below); a policy with an empty Statement list removes them. Unless the store's publicAccess lets this namespace,
	// statements that grant may name only the access keys of this
	// namespace's BucketAccesses (no "*", no NotPrincipal, no other
	// account), and none may grant s3:PutBucketPolicy, DeleteBucketPolicy,
	// PutBucketAcl or PutObjectAcl; otherwise the bucket is Stalled (PolicyRefused), nothing is
	// sent, and such statements already in the store's policy are taken
	// out. The store judges the rest: a statement it refuses is shown in
	// the SettingsApplied condition.
	//
	// There is no admission rule on the principals: whether "*" is allowed
	// depends on the store's publicAccess and the namespace's labels, and
	// which keys are the namespace's on its BucketAccesses, none of which a
	// CRD rule can see; and CEL cannot parse a JSON string, so a rule on the
	// text (e.g. refusing "Principal":"*") would miss {"AWS":"*"}, a
	// lower-case key or an escape, while refusing policies an Allowed store
	// accepts. The controller checks the parsed document instead.
	// +optional
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=20480
	Policy string `json:"policy,omitempty"`

	// cors sets the bucket's CORS rules, for browsers on other origins.
	// Unset leaves the store's rules as they are; no rules removes them.
	// +optional
	CORS *BucketCORS `json:"cors,omitempty"`

	// lifecycle sets rules that expire objects. Unset leaves the store's
	// rules as they are; no rules removes them. Not every store implements
	// lifecycle rules (versitygw v1.8.0 does not): the SettingsApplied
	// condition says so, and the bucket is Stalled until the field is removed.
	// +optional
	Lifecycle *BucketLifecycle `json:"lifecycle,omitempty"`

	// suspend stops the controller acting on this object: what exists is
	// kept as it is, nothing is created, changed or deleted, and the status
	// says Suspended. Deleting the object still runs its deletion policy.
	// Setting it back to false reconciles at once.
	// +optional
	Suspend *bool `json:"suspend,omitempty"`
}

// BucketVersioning is the versioning state of a bucket.
// +kubebuilder:validation:Enum=Enabled;Suspended
type BucketVersioning string

const (
	// VersioningEnabled keeps every version of every object.
	VersioningEnabled BucketVersioning = "Enabled"
	// VersioningSuspended stops making new versions; existing ones stay.
	VersioningSuspended BucketVersioning = "Suspended"
)

// BucketCORS is the CORS configuration of a bucket.
type BucketCORS struct {
	// rules are tried in order; the first that matches a request applies.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=100
	Rules []CORSRule `json:"rules,omitempty"`
}

// CORSMethod is an HTTP method a CORS rule allows.
// +kubebuilder:validation:Enum=GET;PUT;POST;DELETE;HEAD
type CORSMethod string

// CORSRule allows requests from some origins with some methods.
type CORSRule struct {
	// allowedOrigins are the origins allowed, e.g. https://app.example.com;
	// "*" allows any, and one "*" may stand for part of an origin.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	AllowedOrigins []string `json:"allowedOrigins,omitempty"`

	// allowedMethods are the methods allowed.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=5
	AllowedMethods []CORSMethod `json:"allowedMethods,omitempty"`

	// allowedHeaders are the request headers a preflight may ask for; "*"
	// allows any.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	AllowedHeaders []string `json:"allowedHeaders,omitempty"`

	// exposeHeaders are the response headers a browser lets scripts read.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=256
	ExposeHeaders []string `json:"exposeHeaders,omitempty"`

	// maxAgeSeconds is how long a browser may cache the preflight answer.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	MaxAgeSeconds int32 `json:"maxAgeSeconds,omitempty"`
}

// BucketLifecycle is the lifecycle configuration of a bucket.
type BucketLifecycle struct {
	// rules expire objects.
	// +optional
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MaxItems=100
	Rules []ExpirationRule `json:"rules,omitempty"`
}

// ExpirationRule deletes objects some days after they were written.
type ExpirationRule struct {
	// id names the rule.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	ID string `json:"id,omitempty"`

	// prefix limits the rule to objects whose key starts with it; unset
	// means every object.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Prefix string `json:"prefix,omitempty"`

	// expirationDays is how many days after it was written an object is deleted.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=36500
	ExpirationDays int32 `json:"expirationDays,omitempty"`
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
	// conditions are Ready (the summary: the bucket exists, is ours, passed
	// its last check and has the settings asked for), Reconciling (work in
	// progress, or the store does not answer), Stalled (a person must act)
	// and SettingsApplied (present when the spec declares bucket settings:
	// whether the store holds them).
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

	// lastHandledReconcileAt is the value of the reconcile.fluxcd.io/requestedAt
	// annotation the controller last answered with a reconcile.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
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
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspend`,priority=1
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
