package k3sprovider

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/cluster-api/util/conditions"
	v1beta2conditions "sigs.k8s.io/cluster-api/util/conditions/v1beta2"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/hook"
)

// Facts converts a Cluster API v1beta1 Machine to the decisions' plain data.
func Facts(m *clusterv1.Machine) etcd.Machine {
	return etcd.Machine{
		Name:                 m.Name,
		NodeName:             nodeName(m.Status.NodeRef),
		ProviderID:           ptr.Deref(m.Spec.ProviderID, ""),
		Deleting:             !m.DeletionTimestamp.IsZero(),
		HealthCheckSucceeded: conditions.IsTrue(m, clusterv1.MachineHealthCheckSucceededCondition),
		UpToDate:             v1beta2conditions.IsTrue(m, clusterv1.MachineUpToDateV1Beta2Condition),
		Created:              m.CreationTimestamp.Time,
		Addresses:            addresses(m),
	}
}

// State is what the hook flow reads of a Machine. On v1beta1 Machines the Deleting condition,
// whose reason says the drain is over, is in status.v1beta2.conditions (Cluster API v1.9 on).
func State(m *clusterv1.Machine) hook.MachineState {
	s := hook.MachineState{Machine: Facts(m), Annotations: m.Annotations}
	if c := v1beta2conditions.Get(m, clusterv1.MachineDeletingV1Beta2Condition); c != nil {
		s.DeletingReason = c.Reason
	}
	return s
}

func nodeName(ref *corev1.ObjectReference) string {
	if ref == nil {
		return ""
	}
	return ref.Name
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
