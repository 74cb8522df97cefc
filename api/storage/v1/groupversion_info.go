// Package v1 contains the API of the storage.trellis.dev group: ObjectStore and StorageBucket.
// +kubebuilder:object:generate=true
// +groupName=storage.trellis.dev
package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of this package's objects.
	GroupVersion = schema.GroupVersion{Group: "storage.trellis.dev", Version: "v1"}

	// SchemeBuilder registers this package's types with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
