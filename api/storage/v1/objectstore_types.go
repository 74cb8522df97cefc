package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// SecretReference names a Secret in a namespace.
type SecretReference struct {
	// namespace of the Secret; Trellis reads store credentials only from its
	// own namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
}

// CABundleKind is the kind of object a CA bundle is read from.
// +kubebuilder:validation:Enum=Secret;ConfigMap
type CABundleKind string

const (
	// CABundleSecret reads the bundle from a Secret.
	CABundleSecret CABundleKind = "Secret"
	// CABundleConfigMap reads the bundle from a ConfigMap (a CA
	// certificate is not secret; cert-manager's trust-manager writes
	// ConfigMaps).
	CABundleConfigMap CABundleKind = "ConfigMap"
)

// DefaultCABundleKey is the key a CA bundle is read from when none is named.
const DefaultCABundleKey = "ca.crt"

// CABundleReference names the key of a Secret or ConfigMap that holds PEM
// CA certificates, in the namespace of the credentials Secret.
type CABundleReference struct {
	// kind of the object: Secret or ConfigMap.
	// +required
	Kind CABundleKind `json:"kind,omitempty"`
	// name of the object, in the namespace of credentialsSecretRef.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// key of the object's data holding the PEM certificates.
	// +optional
	// +default="ca.crt"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
}

// StoreType names the software behind an ObjectStore, which decides what
// Trellis can manage in it besides buckets.
// +kubebuilder:validation:Enum=S3;Versitygw;IAM;MinIO
type StoreType string

const (
	// StoreTypeS3 is any S3-compatible store: buckets and their settings;
	// no BucketAccesses (S3 has no API for accounts).
	StoreTypeS3 StoreType = "S3"
	// StoreTypeVersitygw is a versitygw: also scoped accounts for
	// BucketAccesses, through its admin API (it must run with an IAM backend,
	// e.g. --iam-dir).
	StoreTypeVersitygw StoreType = "Versitygw"
	// StoreTypeIAM is a store that serves the AWS IAM API beside S3 (AWS,
	// Ceph RGW, SeaweedFS): also scoped accounts for BucketAccesses, as IAM
	// users whose keys the store makes. Tested against SeaweedFS only.
	StoreTypeIAM StoreType = "IAM"
	// StoreTypeMinIO is a MinIO: also scoped accounts for BucketAccesses,
	// through its admin API, each granted by a MinIO policy of its own
	// (MinIO's bucket policies cannot grant its users anything).
	StoreTypeMinIO StoreType = "MinIO"
)

// PublicAccess says whether the bucket policies of a store may grant beyond
// the keys Trellis issued to the bucket's own namespace.
// +kubebuilder:validation:Enum=Blocked;Allowed
type PublicAccess string

const (
	// PublicAccessBlocked refuses a bucket policy that grants to everyone
	// (Principal "*"), to everyone but some (NotPrincipal), or to any
	// principal but the access keys of the bucket's namespace's
	// BucketAccesses in this store.
	PublicAccessBlocked PublicAccess = "Blocked"
	// PublicAccessAllowed lets the namespaces publicAccessNamespaceSelector
	// selects grant their buckets to anyone.
	PublicAccessAllowed PublicAccess = "Allowed"
)

// VersitygwOptions are the settings only a versitygw store has.
type VersitygwOptions struct {
	// adminEndpoint is the URL of versitygw's admin API when it is served
	// apart from S3 (--admin-port); the S3 endpoint when unset.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^https?://[^/?#@]+/?$')",message="adminEndpoint must be an http(s) URL with a host and optional port, and no path, query or credentials"
	AdminEndpoint string `json:"adminEndpoint,omitempty"`
}

// IAMOptions are the settings only an IAM store has.
type IAMOptions struct {
	// endpoint is the URL of the store's IAM API when it is served apart
	// from S3 (AWS: https://iam.amazonaws.com); the S3 endpoint when unset
	// (SeaweedFS, Ceph RGW).
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^https?://[^/?#@]+/?$')",message="iam.endpoint must be an http(s) URL with a host and optional port, and no path, query or credentials"
	Endpoint string `json:"endpoint,omitempty"`
}

// MinIOOptions are the settings only a MinIO store has.
type MinIOOptions struct {
	// adminEndpoint is the URL of MinIO's admin API when it is served
	// apart from S3; the S3 endpoint when unset.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^https?://[^/?#@]+/?$')",message="minio.adminEndpoint must be an http(s) URL with a host and optional port, and no path, query or credentials"
	AdminEndpoint string `json:"adminEndpoint,omitempty"`
}

// ObjectStoreSpec is how to reach an S3-compatible object store, and who may
// use it.
// +kubebuilder:validation:XValidation:rule="!has(self.versitygw) || self.type == 'Versitygw'",message="versitygw options need type: Versitygw"
// +kubebuilder:validation:XValidation:rule="!has(self.iam) || self.type == 'IAM'",message="iam options need type: IAM"
// +kubebuilder:validation:XValidation:rule="!has(self.minio) || self.type == 'MinIO'",message="minio options need type: MinIO"
// +kubebuilder:validation:XValidation:rule="!has(self.caBundleRef) || (self.endpoint.startsWith('https://') && (!has(self.versitygw) || !has(self.versitygw.adminEndpoint) || self.versitygw.adminEndpoint.startsWith('https://')) && (!has(self.iam) || !has(self.iam.endpoint) || self.iam.endpoint.startsWith('https://')) && (!has(self.minio) || !has(self.minio.adminEndpoint) || self.minio.adminEndpoint.startsWith('https://')))",message="caBundleRef needs an https:// endpoint, and an https:// admin endpoint if one is set: over http it would trust nothing, and the admin API carries the keys Trellis makes"
type ObjectStoreSpec struct {
	// type is the store's software: S3 (default: any S3-compatible store;
	// buckets and bucket settings), Versitygw (also scoped accounts for
	// BucketAccesses, through its admin API) or IAM (also scoped accounts,
	// through the AWS IAM API: AWS, Ceph RGW, SeaweedFS) or MinIO (also
	// scoped accounts, through MinIO's admin API).
	// +optional
	// +default="S3"
	Type StoreType `json:"type,omitempty"`

	// versitygw holds options of a Versitygw store.
	// +optional
	Versitygw *VersitygwOptions `json:"versitygw,omitempty"`

	// iam holds options of an IAM store.
	// +optional
	IAM *IAMOptions `json:"iam,omitempty"`

	// minio holds options of a MinIO store.
	// +optional
	MinIO *MinIOOptions `json:"minio,omitempty"`

	// endpoint is the store's URL, e.g. https://s3.example.com or http://127.0.0.1:7070.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.matches('^https?://[^/?#@]+/?$')",message="endpoint must be an http(s) URL with a host and optional port, and no path, query or credentials, e.g. https://s3.example.com"
	Endpoint string `json:"endpoint,omitempty"`

	// region buckets are created in.
	// +optional
	// +default="us-east-1"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-z0-9-]+$`
	Region string `json:"region,omitempty"`

	// pathStyle addresses buckets as <endpoint>/<bucket> instead of <bucket>.<endpoint>.
	// +optional
	PathStyle *bool `json:"pathStyle,omitempty"`

	// credentialsSecretRef names the Secret holding the keys "accessKeyID" and
	// "secretAccessKey". Trellis reads it directly (it never caches Secrets) and
	// never logs it or copies it into status or Events.
	// +required
	CredentialsSecretRef SecretReference `json:"credentialsSecretRef,omitzero"`

	// caBundleRef names the PEM CA certificates that sign the store's
	// certificates (a private CA), in a Secret or ConfigMap in the
	// namespace of credentialsSecretRef. They are the only roots trusted
	// for every connection Trellis makes to this store, S3 and admin API
	// alike, instead of the system's; each of them must be https. Unset:
	// the system's roots. Read at every store check, like the credentials;
	// a BucketAccess Secret carries them as ca.crt.
	// +optional
	CABundleRef CABundleReference `json:"caBundleRef,omitzero"`

	// namespaceSelector selects the namespaces whose StorageBuckets and
	// BucketAccesses may use this store, by their labels. Unset or empty
	// selects no namespace: a store is opened to namespaces explicitly.
	// (To open it to every namespace, select on a label every namespace
	// has, e.g. kubernetes.io/metadata.name with operator Exists.)
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// adoptionNamespaceSelector selects the namespaces whose StorageBuckets
	// may take over a bucket that exists and was not created for them
	// (adoptExisting), or name a bucket outside their own names
	// ("<namespace>-…"). Unset or empty selects none. A namespace may always
	// take back a bucket one of its own StorageBuckets kept
	// (deletionPolicy: Retain), as the bucket's ownership tag records.
	// +optional
	AdoptionNamespaceSelector *metav1.LabelSelector `json:"adoptionNamespaceSelector,omitempty"`

	// publicAccess is S3's Block Public Access for the bucket policies of
	// this store's StorageBuckets (spec.policy). Blocked (default) refuses a
	// policy that grants to everyone (Principal "*"), to everyone but some
	// (NotPrincipal), or to any principal but the access keys of the
	// BucketAccesses of the bucket's namespace: the bucket is Stalled
	// (PolicyRefused). It holds whatever came before: such statements
	// already in a bucket's policy in the store are taken out, the rest
	// kept. Allowed lifts this for the namespaces
	// publicAccessNamespaceSelector selects.
	// +optional
	// +default="Blocked"
	PublicAccess PublicAccess `json:"publicAccess,omitempty"`

	// publicAccessNamespaceSelector selects, by their labels, the namespaces
	// whose bucket policies may grant to anyone while publicAccess is
	// Allowed. Unset or empty selects none. Ignored while publicAccess is
	// Blocked, so that one field closes every bucket of the store.
	// +optional
	PublicAccessNamespaceSelector *metav1.LabelSelector `json:"publicAccessNamespaceSelector,omitempty"`

	// suspend stops the controller acting on this object: what exists is
	// kept as it is, nothing is created, changed or deleted, and the status
	// says Suspended. Deleting the object still runs its deletion policy.
	// Setting it back to false reconciles at once.
	// +optional
	Suspend *bool `json:"suspend,omitempty"`
}

// ObjectStoreStatus is what the controller observed.
type ObjectStoreStatus struct {
	// conditions are Ready (reachable, credentials accepted), Reconciling (a
	// check is pending or the store does not answer) and Stalled (a person
	// must act: credentials missing or refused).
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

	// lastHandledReconcileAt is the value of the reconcile.fluxcd.io/requestedAt
	// annotation the controller last answered with a reconcile.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
}

// ObjectStore is an S3-compatible object store outside the cluster, set up by
// the platform team for StorageBuckets to use.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=trellis,shortName=ostore
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.spec.endpoint`
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.spec.type`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspend`,priority=1
type ObjectStore struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is how to reach the store.
	// +required
	Spec ObjectStoreSpec `json:"spec,omitzero"`

	// status is what the controller observed.
	// +optional
	// +default={}
	Status ObjectStoreStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the status conditions.
func (in *ObjectStore) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions replaces the status conditions.
func (in *ObjectStore) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// ObjectStoreList is a list of ObjectStores.
// +kubebuilder:object:root=true
type ObjectStoreList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ObjectStore `json:"items"`
}
