package etcd

import "time"

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
	// nothing does, and the infrastructure then goes with its members still in the cluster.
	MemberRemover string
}

// Provisioning reports whether the Machine has no Node yet.
func (m Machine) Provisioning() bool { return m.NodeName == "" }
