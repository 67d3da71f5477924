package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// +kubebuilder:object:generate=true
// +groupName=etcdadapter.cluster.x-k8s.io

// The scheme is built as Cluster API's own API packages build theirs (sigs.k8s.io/cluster-api
// api/core/v1beta2 groupversion_info.go), with apimachinery only: controller-runtime's
// scheme.Builder is deprecated for API packages.
var (
	// GroupVersion is the group and version of the etcd-adapter API.
	GroupVersion = schema.GroupVersion{Group: "etcdadapter.cluster.x-k8s.io", Version: "v1alpha1"}

	// SchemeBuilder adds the etcd-adapter types to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)

	// AddToScheme adds the etcd-adapter types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme

	objectTypes = []runtime.Object{}
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion, objectTypes...)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
