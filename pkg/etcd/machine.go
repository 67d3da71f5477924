package etcd

import (
	"time"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
)

// Machine is what the decision logic needs to know about a control-plane Machine, as plain data,
// so decisions stay pure and providers that are not KCP can fill it from their own objects.
type Machine struct {
	// Name is the Machine's name.
	Name string
	// NodeName is the Node the Machine runs (status.nodeRef); empty while provisioning.
	NodeName string
	// ProviderID is the Machine's spec.providerID, for messages while the Node is missing.
	ProviderID string
	// Deleting is true once the Machine has a deletion timestamp.
	Deleting bool
	// HealthCheckSucceeded is true when MachineHealthChecks report the Machine healthy.
	HealthCheckSucceeded bool
	// UpToDate is true when the Machine matches its owner's spec.
	UpToDate bool
	// Created is the Machine's creation time.
	Created time.Time
	// Addresses are the Machine's status.addresses (IPs and host names), to find its member by
	// peer URL when the Node is missing.
	Addresses []string
	// MemberRemover names what removes the Machine's etcd members before its infrastructure is
	// deleted (a control-plane provider's or etcd-adapter's pre-terminate hook); empty when
	// nothing does, and the infrastructure then goes with its members still in the cluster. It
	// is left empty by MachineFacts: who removes a member depends on more than the Machine.
	MemberRemover string
}

// Provisioning reports whether the Machine has no Node yet.
func (m Machine) Provisioning() bool { return m.NodeName == "" }

// MachineFacts reads the decision inputs from a CAPI Machine.
func MachineFacts(m *clusterv1.Machine) Machine {
	return Machine{
		Name:                 m.Name,
		NodeName:             m.Status.NodeRef.Name,
		ProviderID:           m.Spec.ProviderID,
		Deleting:             !m.DeletionTimestamp.IsZero(),
		HealthCheckSucceeded: conditions.IsTrue(m, clusterv1.MachineHealthCheckSucceededCondition),
		UpToDate:             conditions.IsTrue(m, clusterv1.MachineUpToDateCondition),
		Created:              m.CreationTimestamp.Time,
		Addresses:            addressesOf(m),
	}
}

func addressesOf(m *clusterv1.Machine) []string {
	var out []string
	for _, a := range m.Status.Addresses {
		if a.Address != "" {
			out = append(out, a.Address)
		}
	}
	return out
}
