package provider

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Severity is how bad a False condition is, with Cluster API v1beta1's values
// (clusterv1beta1.ConditionSeverity): a v1beta1 writer copies it into the condition's severity;
// a v1beta2 (metav1.Condition) writer has no severity and ignores it.
type Severity string

// Severities, as Cluster API v1beta1 spells them.
const (
	SeverityError   Severity = "Error"
	SeverityWarning Severity = "Warning"
	SeverityInfo    Severity = "Info"
	// SeverityNone is for True and Unknown conditions, which carry no severity in v1beta1.
	SeverityNone Severity = ""
)

// Condition is one condition for the caller's Sink to write, in the caller's names.
type Condition struct {
	// Type is the condition type, from Names.
	Type string
	// Status is True, False or Unknown.
	Status metav1.ConditionStatus
	// Reason is the reason, from Names; it may be empty for a True condition when the caller's
	// names say so (v1beta1's MarkTrue sets none).
	Reason string
	// Severity is set for False conditions, for a v1beta1 writer.
	Severity Severity
	// Message says why, for people; etcd-adapter bounds it (etcd.MaxConditionMessageBytes).
	Message string
}

// Sink writes conditions on the caller's objects. The caller implements it with the conditions
// package of its own Cluster API version and patches the objects afterwards.
type Sink interface {
	// SetMachineCondition sets c on the named control-plane Machine.
	SetMachineCondition(machine string, c Condition)
	// SetControlPlaneCondition sets c on the control-plane object.
	SetControlPlaneCondition(c Condition)
}

// Names are the condition types and reasons a provider's users know, so etcd-adapter writes
// them instead of its own.
type Names struct {
	// ClusterCondition is the control-plane object's etcd condition type.
	ClusterCondition string
	// ClusterHealthyReason is its reason when True; empty for v1beta1's MarkTrue.
	ClusterHealthyReason string
	// ClusterUnhealthyReason is its reason when False.
	ClusterUnhealthyReason string
	// ClusterUnknownReason is its reason when Unknown after a successful observation.
	ClusterUnknownReason string
	// ClusterInspectionFailedReason is its reason when etcd could not be observed.
	ClusterInspectionFailedReason string

	// MemberCondition is the Machines' etcd member condition type.
	MemberCondition string
	// MemberHealthyReason is its reason when True; empty for v1beta1's MarkTrue.
	MemberHealthyReason string
	// MemberUnhealthyReason is its reason when False.
	MemberUnhealthyReason string
	// MemberInspectionFailedReason is its reason when Unknown.
	MemberInspectionFailedReason string
	// MemberDeletingReason is its reason on a deleting Machine (False, severity Info).
	MemberDeletingReason string
}

// KThreesControlPlaneNames are cluster-api-k3s's v1beta1 condition types and reasons
// (k3s-io/cluster-api-k3s, controlplane/api/v1beta2/condition_consts.go): EtcdClusterHealthyCondition
// on the KThreesControlPlane, EtcdMemberHealthy on its Machines. cluster-api-k3s has no deleting
// reason of its own; Cluster API v1beta1's "Deleting" (clusterv1beta1.DeletingReason) is used.
var KThreesControlPlaneNames = Names{
	ClusterCondition:              "EtcdClusterHealthyCondition",
	ClusterUnhealthyReason:        "EtcdClusterUnhealthy",
	ClusterUnknownReason:          "EtcdClusterUnknown",
	ClusterInspectionFailedReason: "EtcdClusterInspectionFailed",
	MemberCondition:               "EtcdMemberHealthy",
	MemberHealthyReason:           "", // conditions.MarkTrue, as cluster-api-k3s writes it (pkg/k3s/workload_cluster_etcd.go)
	MemberUnhealthyReason:         "EtcdMemberUnhealthy",
	MemberInspectionFailedReason:  "MemberInspectionFailed",
	MemberDeletingReason:          "Deleting",
}

// DefaultNames are the names WriteConditions uses when given a zero Names:
// KThreesControlPlaneNames.
var DefaultNames = KThreesControlPlaneNames

// WriteConditions writes the member condition on every Machine of the observation and the
// cluster condition on the control-plane object through sink, in the given names (a zero Names
// means DefaultNames), and returns the verdict they come from. The caller patches the objects.
// Do not call it for a control plane whose own controller already writes these conditions.
func WriteConditions(sink Sink, names Names, o Observation) etcd.HealthVerdict {
	if names == (Names{}) {
		names = DefaultNames
	}
	v := o.Health()
	for _, m := range o.Machines {
		if c, ok := v.Machines[m.Name]; ok {
			sink.SetMachineCondition(m.Name, names.member(c, m.Deleting))
		}
	}
	sink.SetControlPlaneCondition(names.cluster(v.Cluster, o.Snapshot == nil))
	return v
}

// member maps a member condition to the caller's names by its status: etcd-adapter's reasons
// are KubeadmControlPlane's and say no more than status and deletion do.
func (n Names) member(c metav1.Condition, deleting bool) Condition {
	out := Condition{Type: n.MemberCondition, Status: c.Status, Message: c.Message}
	switch {
	case deleting:
		out.Reason, out.Severity = n.MemberDeletingReason, SeverityInfo
	case c.Status == metav1.ConditionTrue:
		out.Reason = n.MemberHealthyReason
	case c.Status == metav1.ConditionFalse:
		out.Reason, out.Severity = n.MemberUnhealthyReason, SeverityError
	default:
		out.Reason = n.MemberInspectionFailedReason
	}
	return out
}

func (n Names) cluster(c metav1.Condition, unobserved bool) Condition {
	out := Condition{Type: n.ClusterCondition, Status: c.Status, Message: c.Message}
	switch {
	case unobserved:
		out.Reason = n.ClusterInspectionFailedReason
	case c.Status == metav1.ConditionTrue:
		out.Reason = n.ClusterHealthyReason
	case c.Status == metav1.ConditionFalse:
		out.Reason, out.Severity = n.ClusterUnhealthyReason, SeverityError
	default:
		out.Reason = n.ClusterUnknownReason
	}
	return out
}
