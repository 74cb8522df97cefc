// Package v1 contains the API of the tenancy.trellis.dev group: Tenant and
// NamespaceRequest.
// +kubebuilder:object:generate=true
// +groupName=tenancy.trellis.dev
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this package's objects.
	GroupVersion = schema.GroupVersion{Group: "tenancy.trellis.dev", Version: "v1"}

	// SchemeBuilder registers this package's types with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &Tenant{}, &TenantList{}, &NamespaceRequest{}, &NamespaceRequestList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
