package infra

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// NewMachine returns a TestMachine that reports providerID once provisioned. Cluster API copies
// spec.providerID to the Machine and matches it with the workload Node's spec.providerID.
func NewMachine(namespace, name, providerID string) *unstructured.Unstructured {
	m := &unstructured.Unstructured{}
	m.SetGroupVersionKind(GroupVersion.WithKind(MachineKind))
	m.SetNamespace(namespace)
	m.SetName(name)
	m.Object["spec"] = map[string]any{"providerID": providerID}
	return m
}

// newMachineObject returns an empty TestMachine to read into.
func newMachineObject() *unstructured.Unstructured {
	m := &unstructured.Unstructured{}
	m.SetGroupVersionKind(GroupVersion.WithKind(MachineKind))
	return m
}
