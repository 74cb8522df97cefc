package v1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MarkdownViewSpec is the site a user wants served.
//
// The ConfigMap that carries the files holds at most 1 MiB. Admission counts
// the Markdown in characters (counting the bytes of text in CEL costs too
// much) and cannot read the assets at all: the API server's CEL decoder of
// base64 fields refuses standard base64 (kube-openapi#633, in Kubernetes
// 1.37.1 and earlier). The controller counts the bytes of both and reports a
// MarkdownView that is too large in its status.
//
// A site is held one of two ways: inline, in markdowns (and assets), or in
// a Flux source, named by source.
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:XValidation:rule="!has(self.markdowns) || self.markdowns.map(k, size(k) + size(self.markdowns[k])).sum() <= 1048576",message="markdowns must total at most 1 MiB (file names and contents), the limit of the ConfigMap that carries them"
// +kubebuilder:validation:XValidation:rule="has(self.markdowns) != has(self.source)",message="a MarkdownView holds its site either inline (markdowns) or in a Flux source (source): set exactly one"
// +kubebuilder:validation:XValidation:rule="!has(self.source) || !has(self.assets)",message="assets go with markdowns: a site from a source takes its images from the source"
type MarkdownViewSpec struct {
	// markdowns maps file names to Markdown text. SUMMARY.md, when present,
	// gives the navigation in mdBook's format; otherwise files are listed
	// alphabetically. Exclusive with source.
	// +optional
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=128
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253 && k.matches('^[-._a-zA-Z0-9]+\\\\.md$') && !k.startsWith('..'))",message="file names must be valid ConfigMap keys (letters, digits, '-', '_', '.') ending in .md, at most 253 characters"
	Markdowns map[string]MarkdownText `json:"markdowns,omitempty"`

	// assets maps file names to the bytes of images the pages show
	// (base64 in YAML and JSON), such as logo.png for ![Logo](logo.png).
	// Only raster images and SVG are served: the name ends in .png, .jpg,
	// .jpeg, .gif, .webp, .avif or .svg (any case). They count against the
	// same 1 MiB as the Markdown (checked by the controller).
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253 && k.matches('^[-_a-zA-Z0-9][-._a-zA-Z0-9]*\\\\.(?i:png|jpe?g|gif|webp|avif|svg)$'))",message="asset names must be valid ConfigMap keys (letters, digits, '-', '_', '.'), not start with '.', end in .png, .jpg, .jpeg, .gif, .webp, .avif or .svg, and have at most 253 characters"
	Assets map[string][]byte `json:"assets,omitempty"`

	// source serves the site from a Flux source in this namespace: the
	// artifact of a GitRepository, OCIRepository, Bucket or
	// ExternalArtifact, fetched by the viewers and checked against its
	// digest. Its folders become the site's tree. Exclusive with markdowns.
	// +optional
	Source SourceReference `json:"source,omitzero"`

	// replicas is the number of viewer pods.
	// +optional
	// +default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=50
	Replicas int32 `json:"replicas,omitempty"`

	// viewerImage overrides the viewer container image. When unset, Trellis'
	// own viewer runs, as configured on the manager. The manager runs only
	// images its --viewer-image-allow list permits.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^([a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?(\\\\.[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?)*(:[0-9]+)?/)?[a-z0-9]+([._-]+[a-z0-9]+)*(/[a-z0-9]+([._-]+[a-z0-9]+)*)*(:[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$')",message="viewerImage must be an image reference such as registry.example.com/team/viewer:1.2 or name@sha256:<64 hex digits>"
	ViewerImage string `json:"viewerImage,omitempty"`

	// pod sets the scheduling, resources and metadata of the viewer pods.
	// +optional
	Pod ViewerPod `json:"pod,omitzero"`

	// expose makes the site reachable from outside the cluster, through an
	// Ingress or a Gateway API HTTPRoute named viewer-<name>. Removing it
	// removes that object.
	// +optional
	Expose Expose `json:"expose,omitzero"`

	// suspend stops the controller acting on this object: what exists is
	// kept as it is, nothing is created, changed or deleted, and the status
	// says Suspended. Deleting the object still runs its deletion policy.
	// Setting it back to false reconciles at once.
	// +optional
	Suspend *bool `json:"suspend,omitempty"`
}

// SourceReference names a Flux source in the MarkdownView's own namespace
// (there is no namespace field: Flux's own lockdown refuses references
// across namespaces) and a folder of its artifact.
type SourceReference struct {
	// kind of the source.
	// +required
	// +kubebuilder:validation:Enum=GitRepository;OCIRepository;Bucket;ExternalArtifact
	Kind string `json:"kind,omitempty"`

	// name of the source.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="name must be a DNS subdomain name"
	Name string `json:"name,omitempty"`

	// path is the folder of the artifact the site is made of, such as
	// docs; when unset, the whole artifact.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/') && !self.matches('(^|/)\\\\.\\\\.(/|$)') && self.matches('^[-._/a-zA-Z0-9]+$')",message="path must be a folder inside the artifact: relative (no leading '/'), without '..', of letters, digits, '-', '_', '.' and '/'"
	Path string `json:"path,omitempty"`
}

// MarkdownText is the content of one Markdown file.
// +kubebuilder:validation:MaxLength=1048576
type MarkdownText string

// ViewerPod is what the viewer pods may be given beyond Trellis' defaults.
// Everything here serialises to at most 8 KiB: the controller checks it and
// reports PodSettingsTooLarge, so the manager's memory per MarkdownView stays
// bounded.
// +kubebuilder:validation:MinProperties=1
type ViewerPod struct {
	// resources of the viewer container. When unset: requests cpu 10m and
	// memory 64Mi, limit memory 128Mi, no CPU limit. When set, it replaces
	// these defaults as a whole.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.claims)",message="resources.claims is not supported: the viewer pod declares no resource claims"
	Resources *corev1.ResourceRequirements `json:"resources,omitempty"`

	// nodeSelector must match a node's labels for a viewer pod to run there.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$') && self[k].matches('^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$'))",message="nodeSelector keys must be label keys ([prefix/]name) and values label values (at most 63 letters, digits, '-', '_', '.')"
	NodeSelector map[string]LabelValue `json:"nodeSelector,omitempty"`

	// tolerations let viewer pods run on nodes with matching taints.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// affinity constrains which nodes the viewer pods run on, near or apart
	// from other pods.
	// +optional
	Affinity *corev1.Affinity `json:"affinity,omitempty"`

	// topologySpreadConstraints spread the viewer pods across zones or
	// nodes. A constraint without a labelSelector selects this
	// MarkdownView's viewer pods.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	TopologySpreadConstraints []corev1.TopologySpreadConstraint `json:"topologySpreadConstraints,omitempty"`

	// priorityClassName names the PriorityClass of the viewer pods.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="priorityClassName must be a DNS subdomain name"
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// annotations are added to the viewer pods. Keys under kubernetes.io,
	// k8s.io and trellis.dev (and their subdomains, such as
	// app.kubernetes.io) are reserved.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="annotation keys must be qualified names ([prefix/]name)"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.matches('^([^/]*\\\\.)?(kubernetes\\\\.io|k8s\\\\.io|trellis\\\\.dev)/'))",message="annotation keys under kubernetes.io, k8s.io and trellis.dev (and their subdomains) are reserved"
	Annotations map[string]AnnotationValue `json:"annotations,omitempty"`

	// labels are added to the viewer pods. Keys under kubernetes.io, k8s.io
	// and trellis.dev (and their subdomains, such as app.kubernetes.io and
	// view.trellis.dev, which holds the label that selects the pods) are
	// reserved.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$') && self[k].matches('^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?$'))",message="labels must have label keys ([prefix/]name) and label values (at most 63 letters, digits, '-', '_', '.')"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.matches('^([^/]*\\\\.)?(kubernetes\\\\.io|k8s\\\\.io|trellis\\\\.dev)/'))",message="label keys under kubernetes.io, k8s.io and trellis.dev (and their subdomains, such as app.kubernetes.io) are reserved"
	Labels map[string]LabelValue `json:"labels,omitempty"`
}

// LabelValue is the value of a label: at most 63 characters.
// +kubebuilder:validation:MaxLength=63
type LabelValue string

// AnnotationValue is the value of an annotation on the viewer pods.
// +kubebuilder:validation:MaxLength=1024
type AnnotationValue string

// Expose names the one way the site is reached from outside the cluster.
// +kubebuilder:validation:MinProperties=1
// +kubebuilder:validation:XValidation:rule="has(self.ingress) != has(self.httpRoute)",message="expose takes exactly one of ingress and httpRoute"
type Expose struct {
	// ingress exposes the site through an Ingress viewer-<name> that sends
	// every path of host to the viewer.
	// +optional
	Ingress IngressExpose `json:"ingress,omitzero"`

	// httpRoute exposes the site through a Gateway API HTTPRoute
	// viewer-<name> that sends every path of its hostnames to the viewer.
	// It needs the Gateway API CRDs in the cluster when the manager starts.
	// +optional
	HTTPRoute HTTPRouteExpose `json:"httpRoute,omitzero"`
}

// IngressExpose is the Ingress that exposes the site.
type IngressExpose struct {
	// host is the DNS name the site is served on, such as docs.example.com.
	// +required
	Host Hostname `json:"host,omitempty"`

	// ingressClassName names the IngressClass; when unset, the cluster's
	// default class serves the Ingress.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="ingressClassName must be a DNS subdomain name"
	IngressClassName string `json:"ingressClassName,omitempty"`

	// tlsSecretName names the Secret (in the MarkdownView's namespace)
	// holding the certificate for host. When set, the site is served over
	// HTTPS and status.url starts with https://.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="tlsSecretName must be a DNS subdomain name"
	TLSSecretName string `json:"tlsSecretName,omitempty"`
}

// HTTPRouteExpose is the Gateway API HTTPRoute that exposes the site.
type HTTPRouteExpose struct {
	// parentRefs are the Gateways (or listeners of them) the route attaches to.
	// +required
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=8
	ParentRefs []ParentReference `json:"parentRefs,omitempty"`

	// hostnames the site is served on; the first one is status.url.
	// +required
	// +listType=set
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	Hostnames []Hostname `json:"hostnames,omitempty"`

	// scheme is the scheme of status.url: https (the default) when the
	// Gateway's listener terminates TLS, http when it does not. It changes
	// only what the status reports; the Gateway decides what is served.
	// +optional
	// +default="https"
	// +kubebuilder:validation:Enum=http;https
	Scheme string `json:"scheme,omitempty"`
}

// ParentReference names a Gateway (or one of its listeners) an HTTPRoute
// attaches to, as Gateway API's ParentReference does.
type ParentReference struct {
	// group of the parent.
	// +optional
	// +default="gateway.networking.k8s.io"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="group must be a DNS subdomain name"
	Group string `json:"group,omitempty"`

	// kind of the parent.
	// +optional
	// +default="Gateway"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$')",message="kind must be a Kubernetes kind, such as Gateway"
	Kind string `json:"kind,omitempty"`

	// namespace of the parent; when unset, the MarkdownView's.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="namespace must be a DNS label"
	Namespace string `json:"namespace,omitempty"`

	// name of the parent.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`

	// sectionName names one listener of the parent.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="sectionName must be a DNS subdomain name"
	SectionName string `json:"sectionName,omitempty"`

	// port selects the parent's listeners on this port.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`
}

// Hostname is a precise DNS name in lower case (no wildcard, no IP address).
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=253
// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)*$') && !self.matches('^[0-9.]+$')",message="a host name must be a DNS name in lower case, such as docs.example.com (no wildcard, no IP address)"
type Hostname string

// MarkdownViewStatus is what the controller observed.
type MarkdownViewStatus struct {
	// conditions are Ready (the summary), Reconciling (work in progress),
	// Stalled (a person must act) and Available (the site is served).
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

	// availableReplicas is the number of viewer pods serving the site.
	// +optional
	// +kubebuilder:validation:Minimum=0
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`

	// url is where the site is served: the external URL when spec.expose is
	// set, else the address of its Service inside the cluster.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	URL string `json:"url,omitempty"`

	// source is the artifact of spec.source that the viewers were last
	// told to serve, after the manager checked its size and digest.
	// +optional
	Source SourceStatus `json:"source,omitzero"`

	// lastHandledReconcileAt is the value of the reconcile.fluxcd.io/requestedAt
	// annotation the controller last answered with a reconcile.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	LastHandledReconcileAt string `json:"lastHandledReconcileAt,omitempty"`
}

// SourceStatus is the artifact of a source that the viewers serve.
type SourceStatus struct {
	// revision of the artifact, such as main@sha1:<commit>.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Revision string `json:"revision,omitempty"`

	// digest of the artifact, such as sha256:<hex>.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Digest string `json:"digest,omitempty"`
}

// MarkdownView serves Markdown held in the resource as a rendered website.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mdv,categories=trellis
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.availableReplicas`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Suspended",type=boolean,JSONPath=`.spec.suspend`,priority=1
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 56 && self.metadata.name.matches('^[a-z]([-a-z0-9]*[a-z0-9])?$')",message="a MarkdownView name must be a DNS label (lower-case letters, digits, '-', starting with a letter) of at most 56 characters, so that its Service viewer-<name> is valid"
type MarkdownView struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the object's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the site to serve.
	// +required
	Spec MarkdownViewSpec `json:"spec,omitzero"`

	// status is what the controller observed.
	// +optional
	// +default={}
	Status MarkdownViewStatus `json:"status,omitempty,omitzero"`
}

// GetConditions returns the status conditions.
func (in *MarkdownView) GetConditions() []metav1.Condition { return in.Status.Conditions }

// SetConditions replaces the status conditions.
func (in *MarkdownView) SetConditions(c []metav1.Condition) { in.Status.Conditions = c }

// MarkdownViewList is a list of MarkdownViews.
// +kubebuilder:object:root=true
type MarkdownViewList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MarkdownView `json:"items"`
}
