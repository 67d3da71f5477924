package kcp

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/etcd-adapter/etcd-adapter/test/env/infra"
)

const (
	// MachineTemplateKind is the kind of the template KubeadmControlPlane clones TestMachines from.
	MachineTemplateKind = "TestMachineTemplate"

	machineTemplatePlural = "testmachinetemplates"
)

// MachineTemplateCRD returns the CustomResourceDefinition of TestMachineTemplate (group and
// version of TestMachine), labelled with the v1beta2 contract version like MachineCRD. Cluster
// API copies spec.template.spec into each TestMachine it creates.
func MachineTemplateCRD() *apiextensionsv1.CustomResourceDefinition {
	open := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{
			Name:   machineTemplatePlural + "." + infra.Group,
			Labels: map[string]string{clusterv1.GroupVersion.String(): infra.Version},
		},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: infra.Group,
			Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{
				Kind:     MachineTemplateKind,
				ListKind: MachineTemplateKind + "List",
				Plural:   machineTemplatePlural,
				Singular: "testmachinetemplate",
			},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name:    infra.Version,
				Served:  true,
				Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{
						"apiVersion": {Type: "string"},
						"kind":       {Type: "string"},
						"metadata":   {Type: "object"},
						"spec":       {Type: "object", XPreserveUnknownFields: &open},
					},
				}},
			}},
		},
	}
}

// NewMachineTemplate returns a TestMachineTemplate whose TestMachines carry no providerID: the
// provisioner sets one per TestMachine, as a cloud does.
func NewMachineTemplate(namespace, name string) *unstructured.Unstructured {
	t := &unstructured.Unstructured{}
	t.SetGroupVersionKind(infra.GroupVersion.WithKind(MachineTemplateKind))
	t.SetNamespace(namespace)
	t.SetName(name)
	t.Object["spec"] = map[string]any{"template": map[string]any{"spec": map[string]any{}}}
	return t
}
