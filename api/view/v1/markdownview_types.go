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
	// Markdowns maps file names to Markdown text. SUMMARY.md, when present,
	// gives the navigation in mdBook's format; otherwise files are listed
	// alphabetically.
	// +required
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=128
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253 && k.matches('^[-._a-zA-Z0-9]+\\\\.md$') && !k.startsWith('..'))",message="file names must be valid ConfigMap keys (letters, digits, '-', '_', '.') ending in .md, at most 253 characters"
	Markdowns map[string]MarkdownText `json:"markdowns"`

	// Replicas is the number of viewer pods.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=50
	Replicas int32 `json:"replicas,omitempty"`

	// ViewerImage overrides the viewer container image. Empty means Trellis'
	// own viewer, as configured on the manager.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="size(self) == 0 || self.matches('^([a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?(\\\\.[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?)*(:[0-9]+)?/)?[a-z0-9]+([._-]+[a-z0-9]+)*(/[a-z0-9]+([._-]+[a-z0-9]+)*)*(:[a-zA-Z0-9_][a-zA-Z0-9_.-]{0,127})?(@sha256:[a-f0-9]{64})?$')",message="viewerImage must be an image reference such as registry.example.com/team/viewer:1.2 or name@sha256:<64 hex digits>"
	ViewerImage string `json:"viewerImage,omitempty"`
}

// MarkdownText is the content of one Markdown file.
// +kubebuilder:validation:MaxLength=1048576
type MarkdownText string

// MarkdownViewStatus is what the controller observed.
type MarkdownViewStatus struct {
	// ObservedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready (summary), Available, Progressing, Degraded.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// AvailableReplicas is the number of viewer pods serving the site.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`

	// URL is where the site is served inside the cluster.
	// +optional
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
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MarkdownViewSpec   `json:"spec,omitempty"`
	Status MarkdownViewStatus `json:"status,omitempty"`
}

// MarkdownViewList is a list of MarkdownViews.
// +kubebuilder:object:root=true
type MarkdownViewList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []MarkdownView `json:"items"`
}

func init() {
	SchemeBuilder.Register(&MarkdownView{}, &MarkdownViewList{})
}
