// Package capimachine reads the decision inputs of package etcd from a Cluster API v1beta2 Machine.
// It is the one place that ties the decisions to a Cluster API version, so the decisions module
// itself stays free of Cluster API; a provider on v1beta1 Machines fills etcd.Machine the same
// way from its own types.
package capimachine

import (
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Facts reads the decision inputs from a Cluster API Machine. MemberRemover is left empty: who
// removes a member depends on more than the Machine.
func Facts(m *clusterv1.Machine) etcd.Machine {
	return etcd.Machine{
		Name:                 m.Name,
		NodeName:             m.Status.NodeRef.Name,
		ProviderID:           m.Spec.ProviderID,
		Deleting:             !m.DeletionTimestamp.IsZero(),
		HealthCheckSucceeded: conditions.IsTrue(m, clusterv1.MachineHealthCheckSucceededCondition),
		UpToDate:             conditions.IsTrue(m, clusterv1.MachineUpToDateCondition),
		Created:              m.CreationTimestamp.Time,
		Addresses:            addresses(m),
	}
}

func addresses(m *clusterv1.Machine) []string {
	var out []string
	for _, a := range m.Status.Addresses {
		if a.Address != "" {
			out = append(out, a.Address)
		}
	}
	return out
}
