// Package etcdadm is a stand-in for the etcdadm-based etcd provider's API (aws/etcdadm-controller):
// the EtcdadmCluster CRD with only the fields etcd-adapter reads, and no controller. A test plays
// the etcdadm controller: it owns the EtcdadmCluster by its Cluster, creates the etcd Machines with
// the labels that controller gives them, and writes status.endpoints.
package etcdadm

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GVK is EtcdadmCluster's group, version and kind as aws/etcdadm-controller serves them
// (api/v1beta1/groupversion_info.go, etcdadmcluster_types.go).
var GVK = schema.GroupVersionKind{Group: "etcdcluster.cluster.x-k8s.io", Version: "v1beta1", Kind: "EtcdadmCluster"}

// ClusterCRD is the EtcdadmCluster CRD, following aws/etcdadm-controller
// api/v1beta1/etcdadmcluster_types.go: spec.replicas, and in status the fields the etcdadm
// controller writes in controllers/status.go (updateStatus): endpoints (the members' client URLs,
// comma-separated and sorted), ready, initialized, creationComplete, and replicas (ReadyReplicas
// is serialised as "replicas" upstream). Everything else (the infrastructure template, the
// EtcdadmConfig spec, conditions) is kept but not described.
func ClusterCRD() *apiextensionsv1.CustomResourceDefinition {
	open := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "etcdadmclusters." + GVK.Group},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: GVK.Group,
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Kind: GVK.Kind, ListKind: GVK.Kind + "List", Plural: "etcdadmclusters", Singular: "etcdadmcluster",
			},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: GVK.Version, Served: true, Storage: true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"apiVersion": {Type: "string"},
						"kind":       {Type: "string"},
						"metadata":   {Type: "object"},
						"spec": {Type: "object", XPreserveUnknownFields: &open, Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"replicas": {Type: "integer", Format: "int32"},
						}},
						"status": {Type: "object", XPreserveUnknownFields: &open, Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"endpoints":        {Type: "string"},
							"ready":            {Type: "boolean"},
							"initialized":      {Type: "boolean"},
							"creationComplete": {Type: "boolean"},
							"replicas":         {Type: "integer", Format: "int32"},
						}},
					},
				}},
			}},
		},
	}
}
