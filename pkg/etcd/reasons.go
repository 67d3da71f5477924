package etcd

// The condition types and reasons the decisions return. They are plain strings defined here, so a
// provider can use the decisions without importing Cluster API or etcd-adapter's API; etcd-adapter's
// API (api/v1alpha1) re-exports them. The member and cluster names and reasons equal
// KubeadmControlPlane's v1beta2 ones (sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2,
// KubeadmControlPlaneMachineEtcdMember* and KubeadmControlPlaneEtcdCluster*), so alerts written
// for KCP read etcd-adapter's conditions unchanged; a test in api/v1alpha1 keeps them equal.

// The condition on each control-plane Machine about the etcd member it hosts, and its reasons.
const (
	// MemberHealthyCondition surfaces the health of the etcd member hosted on a Machine.
	MemberHealthyCondition = "EtcdMemberHealthy"

	// MemberHealthyReason surfaces that the member is a healthy voter.
	MemberHealthyReason = "Healthy"

	// MemberNotHealthyReason surfaces a member that is missing, a learner, alarmed, not
	// answering, unhealthy, or disagreeing with its peers.
	MemberNotHealthyReason = "NotHealthy"

	// MemberInspectionFailedReason surfaces that the member's health could not be inspected,
	// including evidence too old to trust.
	MemberInspectionFailedReason = "InspectionFailed"

	// MemberConnectionDownReason surfaces that the workload cluster cannot be reached.
	MemberConnectionDownReason = "ConnectionDown"

	// MemberDeletingReason surfaces that the Machine hosting the member is being deleted.
	MemberDeletingReason = "Deleting"
)

// The condition on the control-plane object about the whole etcd cluster, and its reasons.
const (
	// ClusterHealthyCondition aggregates the members' health plus cluster-wide checks: ghost
	// and never-started members, member-list and cluster-ID agreement, a leader.
	ClusterHealthyCondition = "EtcdClusterHealthy"

	// ClusterHealthyReason surfaces a healthy etcd cluster.
	ClusterHealthyReason = "Healthy"

	// ClusterNotHealthyReason surfaces an etcd cluster with at least one problem.
	ClusterNotHealthyReason = "NotHealthy"

	// ClusterHealthUnknownReason surfaces that some member's health is unknown.
	ClusterHealthUnknownReason = "HealthUnknown"

	// ClusterInspectionFailedReason surfaces that etcd could not be inspected.
	ClusterInspectionFailedReason = "InspectionFailed"

	// ClusterConnectionDownReason surfaces that the workload cluster cannot be reached.
	ClusterConnectionDownReason = "ConnectionDown"

	// ClusterInputTooLargeReason surfaces that the workload cluster answered with more than
	// the backends read (a member list longer than any real etcd has, an oversized message), so
	// etcd was not inspected. The members' conditions carry it too.
	ClusterInputTooLargeReason = "InputTooLarge"

	// ClusterEndpointNotAllowedReason surfaces that the etcd endpoints configured for the
	// Cluster resolve outside the networks the caller may dial, so they were not dialled and etcd
	// was not inspected.
	ClusterEndpointNotAllowedReason = "EndpointNotAllowed"
)

// Reasons carried by quorum verdicts (scale-down, Machine deletion and remediation gates).
const (
	// RemovalSafeReason says the removal keeps a healthy majority in every outcome.
	RemovalSafeReason = "MemberRemovalSafe"

	// RemovalWouldLoseQuorumReason says that after the removal healthy voters might not be a
	// majority of voters.
	RemovalWouldLoseQuorumReason = "WouldLoseQuorum"

	// RemovalQuorumLostReason says the voters that vote (healthy ones, and those with only a
	// NOSPACE alarm) are not a majority already, so etcd cannot commit a membership change at all.
	RemovalQuorumLostReason = "QuorumAlreadyLost"

	// RemovalLastMemberReason says the target is the only member left.
	RemovalLastMemberReason = "LastMember"

	// RemovalNoMemberReason says the target Machine or Node hosts no etcd member, so there is
	// nothing to remove and etcd is not affected.
	RemovalNoMemberReason = "NoMember"

	// RemovalHealthUnknownReason says etcd could not be observed, or whether healthy voters are a
	// majority depends on members whose health is unknown, so no removal is known to be safe (and
	// quorum is not known to be lost either).
	RemovalHealthUnknownReason = "HealthUnknown"
)
