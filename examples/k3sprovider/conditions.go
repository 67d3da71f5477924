package k3sprovider

import (
	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/provider"
)

// ConditionSink writes etcd-adapter's verdicts as Cluster API v1beta1 conditions, severity
// included, in the provider's own names (provider.KThreesControlPlaneNames), so the provider's
// users keep alerting on the conditions they know. The caller patches the objects afterwards.
type ConditionSink struct {
	// ControlPlane is the control-plane object (a KThreesControlPlane).
	ControlPlane conditions.Setter
	// Machines are its Machines by name.
	Machines map[string]*clusterv1.Machine
}

// SetMachineCondition implements provider.Sink.
func (s ConditionSink) SetMachineCondition(machine string, c provider.Condition) {
	if m, ok := s.Machines[machine]; ok {
		conditions.Set(m, v1beta1(c))
	}
}

// SetControlPlaneCondition implements provider.Sink.
func (s ConditionSink) SetControlPlaneCondition(c provider.Condition) {
	conditions.Set(s.ControlPlane, v1beta1(c))
}

func v1beta1(c provider.Condition) *clusterv1.Condition {
	return &clusterv1.Condition{
		Type:     clusterv1.ConditionType(c.Type),
		Status:   corev1.ConditionStatus(c.Status),
		Severity: clusterv1.ConditionSeverity(c.Severity),
		Reason:   c.Reason,
		Message:  c.Message,
	}
}
