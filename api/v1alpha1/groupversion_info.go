package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// +kubebuilder:object:generate=true
// +groupName=etcdadapter.cluster.x-k8s.io

var (
	// GroupVersion is the group and version of the etcd-adapter API.
	GroupVersion = schema.GroupVersion{Group: "etcdadapter.cluster.x-k8s.io", Version: "v1alpha1"}

	// SchemeBuilder adds the etcd-adapter types to a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}

	// AddToScheme adds the etcd-adapter types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
