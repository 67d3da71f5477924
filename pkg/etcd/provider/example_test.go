package provider_test

import (
	"fmt"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/provider"
)

// printSink stands in for a provider's condition writer. A KThreesControlPlane (Cluster API
// v1beta1 conditions) writes each one with its own conditions package, severity included:
//
//	func (s sink) SetMachineCondition(name string, c provider.Condition) {
//		conditions.Set(s.machines[name], &clusterv1.Condition{
//			Type: clusterv1.ConditionType(c.Type), Status: corev1.ConditionStatus(c.Status),
//			Severity: clusterv1.ConditionSeverity(c.Severity), Reason: c.Reason, Message: c.Message})
//	}
type printSink struct{}

func (printSink) SetMachineCondition(machine string, c provider.Condition) {
	fmt.Printf("Machine %s: %s=%s reason=%q severity=%q\n", machine, c.Type, c.Status, c.Reason, c.Severity)
}

func (printSink) SetControlPlaneCondition(c provider.Condition) {
	fmt.Printf("control plane: %s=%s reason=%q severity=%q\n", c.Type, c.Status, c.Reason, c.Severity)
}

// A provider's scale-down step: observe once, write its own conditions, run the preflight
// leaving out the Machine it is about to delete, then ask whether removing its member keeps
// quorum. The Machines are converted in one line each; from a Cluster API v1beta2 Machine:
//
//	etcd.Machine{Name: m.Name, NodeName: m.Status.NodeRef.Name, ProviderID: m.Spec.ProviderID,
//		Deleting: !m.DeletionTimestamp.IsZero(), Created: m.CreationTimestamp.Time}
//
// and from a v1beta1 Machine, whose nodeRef and providerID are pointers:
//
//	etcd.Machine{Name: m.Name, NodeName: nodeName(m.Status.NodeRef), ProviderID: ptr.Deref(m.Spec.ProviderID, ""),
//		Deleting: !m.DeletionTimestamp.IsZero(), Created: m.CreationTimestamp.Time}
//
// Addresses (status.addresses) let a member be found by peer URL while the Node is missing.
func Example() {
	snapshot, machines := healthyCluster(3)
	breakMember(snapshot, 2) // the Machine being rolled out has a broken member
	o := provider.Observation{Snapshot: snapshot, Machines: machines, Now: now}

	provider.WriteConditions(printSink{}, provider.KThreesControlPlaneNames, o)
	victim := machines[2]
	if pre := provider.Preflight(o, victim.Name); !pre.Healthy {
		fmt.Println("wait:", pre)
		return
	}
	v := provider.MayScaleDown(o, victim)
	fmt.Println("delete", victim.Name+":", v.Allowed)
	// Output:
	// Machine m-cp-0: EtcdMemberHealthy=True reason="" severity=""
	// Machine m-cp-1: EtcdMemberHealthy=True reason="" severity=""
	// Machine m-cp-2: EtcdMemberHealthy=False reason="EtcdMemberUnhealthy" severity="Error"
	// control plane: EtcdClusterHealthyCondition=False reason="EtcdClusterUnhealthy" severity="Error"
	// delete m-cp-2: true
}
