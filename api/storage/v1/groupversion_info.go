// Package v1 contains the API of the storage.trellis.dev group: ObjectStore, StorageBucket and BucketAccess.
// +kubebuilder:object:generate=true
// +groupName=storage.trellis.dev
package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the group and version of this package's objects.
	GroupVersion = schema.GroupVersion{Group: "storage.trellis.dev", Version: "v1"}

	// SchemeBuilder registers this package's types with a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds this package's types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, &ObjectStore{}, &ObjectStoreList{}, &StorageBucket{}, &StorageBucketList{}, &BucketAccess{}, &BucketAccessList{})
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
