package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MarkdownViewSpec is the site a user wants served.
//
// The ConfigMap that carries the files holds at most 1 MiB. Admission counts
// characters (counting bytes in CEL costs too much); the controller checks the
// byte size and reports a MarkdownView that is still too large in its status.
// +kubebuilder:validation:XValidation:rule="self.markdowns.map(k, size(k) + size(self.markdowns[k])).sum() <= 1048576",message="markdowns must total at most 1 MiB (file names and contents), the limit of the ConfigMap that carries them"
type MarkdownViewSpec struct {
	// markdowns maps file names to Markdown text. SUMMARY.md, when present,
	// gives the navigation in mdBook's format; otherwise files are listed
	// alphabetically.
	// +required
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=128
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253 && k.matches('^[-._a-zA-Z0-9]+\\\\.md$') && !k.startsWith('..'))",message="file names must be valid ConfigMap keys (letters, digits, '-', '_', '.') ending in .md, at most 253 characters"
	Markdowns map[string]MarkdownText `json:"markdowns,omitempty"`

	// replicas is the number of viewer pods.
	// +optional
	// +default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=50
	Replicas int32 `json:"replicas,omitempty"`

	// viewerImage overrides the viewer container image. When unset, Trellis'
	// own viewer runs, as configured on the manager.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="self.matches('^([a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?(\\\\.[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?)*(:[0-9]+)?/)?[a-z0-9]+([._-]+[a-z0-9]+)*(/[a-z0-9]+([._-]+[a-z0-9]+)*)*(:[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$')",message="viewerImage must be an image reference such as registry.example.com/team/viewer:1.2 or name@sha256:<64 hex digits>"
	ViewerImage string `json:"viewerImage,omitempty"`
}

// MarkdownText is the content of one Markdown file.
// +kubebuilder:validation:MaxLength=1048576
type MarkdownText string

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

	// url is where the site is served inside the cluster.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=512
	URL string `json:"url,omitempty"`
}

// MarkdownView serves Markdown held in the resource as a rendered website.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=mdv,categories=trellis
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.spec.replicas`
// +kubebuilder:printcolumn:name="Available",type=integer,JSONPath=`.status.availableReplicas`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="URL",type=string,JSONPath=`.status.url`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
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
