package v1alpha1

import (
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// EtcdMemberHealthy condition, set on each control-plane Machine, and its reasons.
const (
	// EtcdMemberHealthyCondition surfaces the health of the etcd member hosted on a Machine.
	EtcdMemberHealthyCondition = controlplanev1.KubeadmControlPlaneMachineEtcdMemberHealthyCondition

	// EtcdMemberHealthyReason surfaces that the member is a healthy voter.
	EtcdMemberHealthyReason = controlplanev1.KubeadmControlPlaneMachineEtcdMemberHealthyReason

	// EtcdMemberNotHealthyReason surfaces a member that is missing, a learner, alarmed, not
	// answering, unhealthy, or disagreeing with its peers.
	EtcdMemberNotHealthyReason = controlplanev1.KubeadmControlPlaneMachineEtcdMemberNotHealthyReason

	// EtcdMemberInspectionFailedReason surfaces that the member's health could not be inspected,
	// including evidence too old to trust.
	EtcdMemberInspectionFailedReason = controlplanev1.KubeadmControlPlaneMachineEtcdMemberInspectionFailedReason

	// EtcdMemberConnectionDownReason surfaces that the workload cluster cannot be reached.
	EtcdMemberConnectionDownReason = controlplanev1.KubeadmControlPlaneMachineEtcdMemberConnectionDownReason

	// EtcdMemberDeletingReason surfaces that the Machine hosting the member is being deleted.
	EtcdMemberDeletingReason = controlplanev1.KubeadmControlPlaneMachineEtcdMemberDeletingReason
)

// EtcdClusterHealthy condition, set on the control-plane object, and its reasons.
const (
	// EtcdClusterHealthyCondition aggregates the members' health plus cluster-wide checks:
	// ghost and never-started members, member-list and cluster-ID agreement, a leader.
	EtcdClusterHealthyCondition = controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition

	// EtcdClusterHealthyReason surfaces a healthy etcd cluster.
	EtcdClusterHealthyReason = controlplanev1.KubeadmControlPlaneEtcdClusterHealthyReason

	// EtcdClusterNotHealthyReason surfaces an etcd cluster with at least one problem.
	EtcdClusterNotHealthyReason = controlplanev1.KubeadmControlPlaneEtcdClusterNotHealthyReason

	// EtcdClusterHealthUnknownReason surfaces that some member's health is unknown.
	EtcdClusterHealthUnknownReason = controlplanev1.KubeadmControlPlaneEtcdClusterHealthUnknownReason

	// EtcdClusterInspectionFailedReason surfaces that etcd could not be inspected.
	EtcdClusterInspectionFailedReason = controlplanev1.KubeadmControlPlaneEtcdClusterInspectionFailedReason

	// EtcdClusterConnectionDownReason surfaces that the workload cluster cannot be reached.
	EtcdClusterConnectionDownReason = controlplanev1.KubeadmControlPlaneEtcdClusterConnectionDownReason
)

// Reasons carried by quorum verdicts (scale-down, Machine deletion and remediation gates).
const (
	// MemberRemovalSafeReason says the removal keeps a healthy majority in every outcome.
	MemberRemovalSafeReason = "MemberRemovalSafe"

	// MemberRemovalWouldLoseQuorumReason says that after the removal healthy voters might not be
	// a majority of voters.
	MemberRemovalWouldLoseQuorumReason = "WouldLoseQuorum"

	// MemberRemovalQuorumLostReason says healthy voters are not a majority already, so etcd
	// cannot commit a membership change at all.
	MemberRemovalQuorumLostReason = "QuorumAlreadyLost"

	// MemberRemovalLastMemberReason says the target is the only member left.
	MemberRemovalLastMemberReason = "LastMember"

	// MemberRemovalNoMemberReason says the target Machine or Node hosts no etcd member, so there
	// is nothing to remove and etcd is not affected.
	MemberRemovalNoMemberReason = "NoMember"

	// MemberRemovalHealthUnknownReason says etcd could not be observed, so no removal is safe.
	MemberRemovalHealthUnknownReason = "HealthUnknown"
)

// InternalErrorReason is used for failures that are not about etcd itself.
const InternalErrorReason = clusterv1.InternalErrorReason
