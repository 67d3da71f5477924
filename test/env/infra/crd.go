package infra

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

const (
	// Group is the API group of the test infrastructure kinds.
	Group = "infrastructure.test.etcd-adapter.io"

	// Version is the only, and storage, version of the test infrastructure kinds.
	Version = "v1alpha1"

	// MachineKind is the kind of the test infrastructure Machine.
	MachineKind = "TestMachine"

	// machinePlural is the resource name of MachineKind.
	machinePlural = "testmachines"
)

// GroupVersion is the group and version of the test infrastructure kinds.
var GroupVersion = schema.GroupVersion{Group: Group, Version: Version}

// MachineCRD returns the CustomResourceDefinition of TestMachine. It carries the
// `cluster.x-k8s.io/v1beta2: v1alpha1` label through which Cluster API finds which version of
// the kind implements the v1beta2 contract.
func MachineCRD() *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{
			Name:   machinePlural + "." + Group,
			Labels: map[string]string{clusterv1.GroupVersion.String(): Version},
		},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: Group,
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Kind:     MachineKind,
				ListKind: MachineKind + "List",
				Plural:   machinePlural,
				Singular: "testmachine",
			},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name:         Version,
				Served:       true,
				Storage:      true,
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
				Schema:       &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: machineSchema()},
			}},
		},
	}
}

// machineSchema lists the contract fields explicitly and keeps the rest open, so that tests may
// add fields (addresses, failureDomain) without changing the CRD.
func machineSchema() *apiextensionsv1.JSONSchemaProps {
	open := true
	return &apiextensionsv1.JSONSchemaProps{
		Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"apiVersion": {Type: "string"},
			"kind":       {Type: "string"},
			"metadata":   {Type: "object"},
			"spec": {
				Type:                   "object",
				XPreserveUnknownFields: &open,
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"providerID": {Type: "string"},
				},
			},
			"status": {
				Type:                   "object",
				XPreserveUnknownFields: &open,
				Properties: map[string]apiextensionsv1.JSONSchemaProps{
					"initialization": {
						Type: "object",
						Properties: map[string]apiextensionsv1.JSONSchemaProps{
							"provisioned": {Type: "boolean"},
						},
					},
				},
			},
		},
	}
}
