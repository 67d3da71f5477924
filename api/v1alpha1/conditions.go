package v1alpha1

import (
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	clusterctlv1 "sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/hook"
)

// EtcdMemberHealthy condition, set on each control-plane Machine, and its reasons.
const (
	// EtcdMemberHealthyCondition surfaces the health of the etcd member hosted on a Machine.
	EtcdMemberHealthyCondition = etcd.MemberHealthyCondition

	// EtcdMemberHealthyReason surfaces that the member is a healthy voter.
	EtcdMemberHealthyReason = etcd.MemberHealthyReason

	// EtcdMemberNotHealthyReason surfaces a member that is missing, a learner, alarmed, not
	// answering, unhealthy, or disagreeing with its peers.
	EtcdMemberNotHealthyReason = etcd.MemberNotHealthyReason

	// EtcdMemberInspectionFailedReason surfaces that the member's health could not be inspected,
	// including evidence too old to trust.
	EtcdMemberInspectionFailedReason = etcd.MemberInspectionFailedReason

	// EtcdMemberConnectionDownReason surfaces that the workload cluster cannot be reached.
	EtcdMemberConnectionDownReason = etcd.MemberConnectionDownReason

	// EtcdMemberDeletingReason surfaces that the Machine hosting the member is being deleted.
	EtcdMemberDeletingReason = etcd.MemberDeletingReason
)

// MemberHealthyMachineCondition is etcd-adapter's own condition on each control-plane Machine (and
// each etcd Machine of an EtcdadmCluster) of a Cluster it observes: whether the Machine's etcd
// member is healthy, for a MachineHealthCheck's checks.unhealthyMachineConditions to remediate
// on. Its reasons are the EtcdMemberHealthy reasons of status.members. It is False only after
// the member was seen unhealthy for spec.memberUnhealthyTimeout, True again only after it was
// seen healthy for spec.memberRecoveryTime, and Unknown (never False) while etcd-adapter cannot
// observe the member. It is a type of its own, never KubeadmControlPlane's EtcdMemberHealthy,
// which KCP owns on its Machines; only etcd-adapter writes it, and it is taken off when the
// Cluster leaves etcd-adapter.
const MemberHealthyMachineCondition = "EtcdAdapterMemberHealthy"

// EtcdClusterHealthy condition, set on the control-plane object, and its reasons.
const (
	// EtcdClusterHealthyCondition aggregates the members' health plus cluster-wide checks:
	// ghost and never-started members, member-list and cluster-ID agreement, a leader.
	EtcdClusterHealthyCondition = etcd.ClusterHealthyCondition

	// EtcdClusterHealthyReason surfaces a healthy etcd cluster.
	EtcdClusterHealthyReason = etcd.ClusterHealthyReason

	// EtcdClusterNotHealthyReason surfaces an etcd cluster with at least one problem.
	EtcdClusterNotHealthyReason = etcd.ClusterNotHealthyReason

	// EtcdClusterHealthUnknownReason surfaces that some member's health is unknown.
	EtcdClusterHealthUnknownReason = etcd.ClusterHealthUnknownReason

	// EtcdClusterInspectionFailedReason surfaces that etcd could not be inspected.
	EtcdClusterInspectionFailedReason = etcd.ClusterInspectionFailedReason

	// EtcdClusterConnectionDownReason surfaces that the workload cluster cannot be reached.
	EtcdClusterConnectionDownReason = etcd.ClusterConnectionDownReason

	// EtcdClusterInputTooLargeReason surfaces that the workload cluster answered with more than
	// etcd-adapter reads (a member list longer than any real etcd has, an oversized message), so
	// etcd was not inspected. The Machines' EtcdMemberHealthy conditions carry it too.
	EtcdClusterInputTooLargeReason = etcd.ClusterInputTooLargeReason

	// EtcdClusterEndpointNotAllowedReason surfaces that the etcd endpoints configured for the
	// Cluster resolve outside the networks the manager may dial (--etcd-allowed-networks), so
	// they were not dialled and etcd was not inspected.
	EtcdClusterEndpointNotAllowedReason = etcd.ClusterEndpointNotAllowedReason
)

// ClusterIDMatched condition, set on a ControlPlaneEtcd, and its reasons: whether the etcd that
// answers is the one whose cluster ID status.clusterID recorded when it was first observed. A
// restart of etcd-adapter, or changed endpoints, could otherwise route the removal flow to another
// Cluster's etcd that shares a CA, and remove its members.
const (
	// ClusterIDMatchedCondition is True while etcd answers with the recorded cluster ID, False
	// when it answers with another one (no member is removed, no ghost cleaned up and no
	// leadership moved then), and Unknown while no cluster ID is observed.
	ClusterIDMatchedCondition = "ClusterIDMatched"

	// ClusterIDMatchedReason: etcd answers with the cluster ID status.clusterID records.
	ClusterIDMatchedReason = "ClusterIDMatched"

	// ClusterIDRecordedReason: the cluster ID was observed for the first time and recorded.
	ClusterIDRecordedReason = "ClusterIDRecorded"

	// ClusterIDAcceptedReason: a person accepted a new cluster ID with AcceptClusterIDAnnotation.
	ClusterIDAcceptedReason = "ClusterIDAccepted"

	// ClusterIDChangedReason: etcd answers with another cluster ID than status.clusterID records.
	ClusterIDChangedReason = "ClusterIDChanged"

	// ClusterIDNotObservedReason: no cluster ID was observed (etcd could not be observed, or the
	// backend sees none: K3s and RKE2 publish none on their Nodes).
	ClusterIDNotObservedReason = "ClusterIDNotObserved"
)

// AcceptClusterIDAnnotation on a ControlPlaneEtcd, with the new cluster ID in hexadecimal as
// the ClusterIDMatched condition names it, tells etcd-adapter that the etcd now answering is this
// Cluster's (it was restored from a backup, or rebuilt): status.clusterID becomes that ID, and
// the annotation is taken off. Any other value accepts nothing.
const AcceptClusterIDAnnotation = "etcd-adapter.cluster.x-k8s.io/accept-cluster-id"

// Events the ControlPlaneEtcd controller records about the etcd cluster ID, on the
// ControlPlaneEtcd (Warning).
const (
	// EventClusterIDChanged: etcd answers with another cluster ID than status.clusterID records;
	// destructive actions are refused until a person accepts it.
	EventClusterIDChanged = "ClusterIDChanged"
	// EventClusterIDAccepted: a person accepted a new cluster ID with AcceptClusterIDAnnotation.
	EventClusterIDAccepted = "ClusterIDAccepted"
)

// Reasons carried by quorum verdicts (scale-down, Machine deletion and remediation gates).
const (
	// MemberRemovalSafeReason says the removal keeps a healthy majority in every outcome.
	MemberRemovalSafeReason = etcd.RemovalSafeReason

	// MemberRemovalWouldLoseQuorumReason says that after the removal healthy voters might not be
	// a majority of voters.
	MemberRemovalWouldLoseQuorumReason = etcd.RemovalWouldLoseQuorumReason

	// MemberRemovalQuorumLostReason says the voters that vote (healthy ones, and those with only a
	// NOSPACE alarm) are not a majority already, so etcd cannot commit a membership change at all.
	MemberRemovalQuorumLostReason = etcd.RemovalQuorumLostReason

	// MemberRemovalLastMemberReason says the target is the only member left.
	MemberRemovalLastMemberReason = etcd.RemovalLastMemberReason

	// MemberRemovalNoMemberReason says the target Machine or Node hosts no etcd member, so there
	// is nothing to remove and etcd is not affected.
	MemberRemovalNoMemberReason = etcd.RemovalNoMemberReason

	// MemberRemovalHealthUnknownReason says etcd could not be observed, or whether healthy voters
	// are a majority depends on members whose health is unknown, so no removal is known to be
	// safe (and quorum is not known to be lost either).
	MemberRemovalHealthUnknownReason = etcd.RemovalHealthUnknownReason
)

// InternalErrorReason is used for failures that are not about etcd itself.
const InternalErrorReason = clusterv1.InternalErrorReason

// Available condition of a ControlPlaneEtcd, and its reasons (as etcd operators report them):
// can etcd serve, and with how much margin.
const (
	// AvailableCondition is True when healthy voters are a majority of voters.
	AvailableCondition = clusterv1.AvailableCondition

	// AvailableQuorumHealthyReason: every member is healthy.
	AvailableQuorumHealthyReason = "QuorumHealthy"

	// AvailableQuorumAvailableReason: a majority of voters votes (healthy, or with only a NOSPACE
	// alarm), and not every member is healthy.
	AvailableQuorumAvailableReason = "QuorumAvailable"

	// AvailableQuorumLostReason: the voters that vote are not a majority, and would not be even
	// if every member whose health is unknown were healthy; etcd cannot commit.
	AvailableQuorumLostReason = "QuorumLost"

	// AvailableQuorumUnknownReason: healthy voters are not shown to be a majority, but they would
	// be if enough members whose health is unknown were healthy (for example every K3s heartbeat
	// is stale), so availability is Unknown.
	AvailableQuorumUnknownReason = "QuorumUnknown"

	// AvailableEtcdUnreachableReason: etcd could not be observed, so availability is Unknown.
	AvailableEtcdUnreachableReason = "EtcdUnreachable"

	// AvailableNoMembersReason: etcd reported no members (nothing observed yet).
	AvailableNoMembersReason = "NoMembers"
)

// Degraded condition of a ControlPlaneEtcd, and its reasons: True whenever etcd does not deliver
// its full intended fault tolerance, so alerting can read this one condition.
const (
	// DegradedCondition is True when some member is not healthy or quorum is lost.
	DegradedCondition = "Degraded"

	// DegradedMembersUnhealthyReason: some members are unhealthy or unknown; quorum holds.
	DegradedMembersUnhealthyReason = "MembersUnhealthy"

	// DegradedQuorumLostReason: quorum is lost.
	DegradedQuorumLostReason = "QuorumLost"

	// DegradedQuorumUnknownReason: whether quorum holds depends on members whose health is
	// unknown, so Degraded is Unknown.
	DegradedQuorumUnknownReason = "QuorumUnknown"

	// DegradedAsExpectedReason: nothing is degraded.
	DegradedAsExpectedReason = "AsExpected"

	// DegradedEtcdUnreachableReason: etcd could not be observed.
	DegradedEtcdUnreachableReason = "EtcdUnreachable"
)

// Progressing condition of a ControlPlaneEtcd, and its reasons: is a membership change under
// way, or stuck.
const (
	// ProgressingCondition is True while a member removal is under way or blocked, or while the
	// ghost cleanup waits for a member that may still be joining.
	ProgressingCondition = "Progressing"

	// ProgressingMemberRemovalReason: a member removal is under way.
	ProgressingMemberRemovalReason = "MemberRemovalInProgress"

	// ProgressingRemovalBlockedReason: a deleting Machine waits because removing its member now
	// would lose quorum, or health is unknown.
	ProgressingRemovalBlockedReason = "MemberRemovalBlocked"

	// ProgressingRemovalRejectedReason: etcd or K3s rejected a removal; the hook is kept until a
	// person releases it.
	ProgressingRemovalRejectedReason = "MemberRemovalRejected"

	// ProgressingRemovalTimedOutReason: a removal waited longer than spec.memberRemovalTimeout.
	ProgressingRemovalTimedOutReason = "MemberRemovalTimedOut"

	// ProgressingWaitingForJoinReason: a member that has not started is on a Node that exists
	// (of a Machine not being deleted, or of none), so its join may still be under way: kubeadm
	// join without ControlPlaneKubeletLocalMode registers the Node before it adds the etcd
	// learner, which has no name until its static Pod starts. The ghost cleanup leaves it alone
	// until its first sighting plus spec.joinTimeout; the message names the member and that time.
	ProgressingWaitingForJoinReason = "WaitingForMemberJoin"

	// ProgressingModeNotSupportedReason: the ControlPlaneEtcd asks for mode Manage with a backend
	// whose members run on no Machine of the Cluster (external etcd other than an
	// EtcdadmCluster's); it is observed only.
	ProgressingModeNotSupportedReason = "ModeNotSupported"

	// ProgressingReconciledReason: no membership change is under way.
	ProgressingReconciledReason = "Reconciled"
)

// PausedCondition is CAPI's Paused condition, set on a ControlPlaneEtcd whose Cluster is paused
// (spec.paused or the cluster.x-k8s.io/paused annotation).
const PausedCondition = clusterv1.PausedCondition

// Pre-terminate hooks and annotations the controllers read and write.
const (
	// PreTerminateHookAnnotation holds every control-plane Machine of a managed Cluster until
	// its etcd member is removed, after the drain.
	PreTerminateHookAnnotation = hook.ManagerHookKey

	// PreTerminateHookValue is the value of PreTerminateHookAnnotation: the owner.
	PreTerminateHookValue = hook.ManagerHookValue

	// LegacyK3sHookAnnotation is the bare hook key cluster-api-k3s puts on a Machine right
	// before its own deletes; its value is LegacyK3sHookValue. It is adopted when no
	// KThreesControlPlane is left to release it.
	LegacyK3sHookAnnotation = clusterv1.PreTerminateDeleteHookAnnotationPrefix

	// LegacyK3sHookValue is the value cluster-api-k3s gives its hook.
	LegacyK3sHookValue = "k3s"

	// KCPHookAnnotation is KubeadmControlPlane's own hook; it coexists with ours. For a
	// Kubernetes version of 1.31 or later KCP releases it only once no other pre-terminate hook
	// is left, so ours then runs before it (see pkg/etcd/hook,
	// order.go).
	KCPHookAnnotation = hook.KCPHookKey

	// RKE2HookAnnotation is cluster-api-provider-rke2's own hook (RKE2ControlPlane's
	// PreTerminateHookCleanupAnnotation). It is released only once no other pre-terminate hook
	// is left, so ours runs before it.
	RKE2HookAnnotation = hook.RKE2HookKey

	// ReleaseHookAnnotation on a Machine lets a person release the etcd-adapter hook without a
	// member removal (after fixing etcd by hand, or accepting the risk).
	ReleaseHookAnnotation = hook.ReleaseHookAnnotation

	// ReleaseHookValue is the one value of ReleaseHookAnnotation that releases the hook; any
	// other value (such as "false") releases nothing. It is AnnotationTrue.
	ReleaseHookValue = AnnotationTrue

	// RetryRemovalAnnotation on a deleting control-plane Machine, with the value AnnotationTrue
	// ("true"), asks for its stopped member removal (status.removal Rejected or TimedOut) to run
	// again from the start, once a person fixed the cause: the stopped record is cleared (and a
	// K3s removal request left on the Node withdrawn), then the annotation is taken off and the
	// removal flow runs on a fresh observation. On a Machine whose removal is not stopped it does
	// nothing and is taken off with an Event saying why. Any other value is left alone.
	RetryRemovalAnnotation = hook.RetryRemovalAnnotation

	// SkipQuorumGuardAnnotation on a Machine, with the value AnnotationTrue ("true"), lets its
	// deletion through the quorum guard unchecked; it is also how a person says the last etcd
	// member's Machine of a Cluster that is not being deleted may go. Any other value, including
	// "false" and "", is ignored: the guard checks the deletion as if the annotation were absent.
	SkipQuorumGuardAnnotation = "etcd-adapter.cluster.x-k8s.io/skip-quorum-guard"

	// AnnotationTrue is the one value that turns on an etcd-adapter annotation that acts on a
	// person's say-so (SkipQuorumGuardAnnotation, OptOutAnnotation, and the release and retry
	// annotations): an explicit "true", so that "false", "no" or an empty value never act by
	// accident.
	AnnotationTrue = hook.AnnotationTrue

	// DeleteForMoveAnnotation is the annotation `clusterctl move` sets on every object it deletes
	// from the source management cluster once they were copied to the target
	// (sigs.k8s.io/cluster-api/cmd/clusterctl/api/v1alpha3): such a deletion moves the Machine,
	// it does not remove its etcd member, so the quorum guard lets it through, on a paused
	// Cluster only (clusterctl move pauses it first).
	DeleteForMoveAnnotation = clusterctlv1.DeleteForMoveAnnotation

	// OptOutAnnotation on a Cluster, with the value AnnotationTrue ("true"), stops a
	// ControlPlaneEtcd from being created for it; any other value opts nothing out.
	OptOutAnnotation = "etcd-adapter.cluster.x-k8s.io/opt-out"

	// QuorumGuardLeaseSuffix ends the name of the coordination.k8s.io Lease, in a Cluster's
	// namespace and named after it, on which the quorum guard records the deletions of the
	// Cluster's Machines it admitted: every replica of the guard reads and writes it under a
	// resourceVersion precondition, so admissions of one Cluster are decided one at a time across
	// replicas.
	QuorumGuardLeaseSuffix = "-etcd-quorum-guard"

	// AdmittedDeletionsAnnotation on the quorum guard's Lease holds the deletions it admitted
	// that the apiserver may not show yet, as a JSON list of {name, uid, at}.
	AdmittedDeletionsAnnotation = "etcd-adapter.cluster.x-k8s.io/admitted-deletions"
)

// Events the ControlPlaneEtcd controller records for each step of a Machine's removal flow, on
// the Machine and on the ControlPlaneEtcd, by reason.
const (
	// EventMemberRemovalBlocked: a deleting Machine waits on a removal that is not safe now.
	EventMemberRemovalBlocked = "MemberRemovalBlocked"
	// EventMemberRemoving: the member removal was asked for.
	EventMemberRemoving = "MemberRemoving"
	// EventMemberRemoved: the backend confirmed the member removed; the hook is released on the
	// next pass, once a fresh observation agrees.
	EventMemberRemoved = "MemberRemoved"
	// EventMemberRemovalRejected: etcd or K3s rejected the removal.
	EventMemberRemovalRejected = "MemberRemovalRejected"
	// EventMemberRemovalTimedOut: the removal waited longer than the limit.
	EventMemberRemovalTimedOut = "MemberRemovalTimedOut"
	// EventMemberRemovalRetried: a person asked to retry a stopped removal
	// (RetryRemovalAnnotation); its record was cleared, and once the annotation is off the
	// removal flow runs again from the start.
	EventMemberRemovalRetried = "MemberRemovalRetried"
	// EventRetryRemovalTakenOff: RetryRemovalAnnotation was taken off a Machine with no stopped
	// removal (none, one under way or ended, or one a retry just cleared); the message says which.
	EventRetryRemovalTakenOff = "RetryRemovalTakenOff"
	// EventHookReleased: the hook was released without a member removal; the message says why.
	EventHookReleased = "HookReleased"
	// EventHookReleasedByAnnotation: a person's annotation released the hook without a member
	// removal (ReleaseHookAnnotation, or SkipQuorumGuardAnnotation on the last member's Machine);
	// the message names the annotation and the field manager that set it (Warning).
	EventHookReleasedByAnnotation = "HookReleasedByAnnotation"
	// EventHookRemovedByHand: the hook left a Machine whose member's removal was under way
	// without etcd-adapter releasing it: a person allowed the override (or another controller)
	// took it off, or removed the Machine's finalizer. Who is not known: taking an annotation off
	// leaves no field manager of it (Warning).
	EventHookRemovedByHand = "HookRemovedByHand"
	// EventLeaderMoved: leadership moved off the leaving member.
	EventLeaderMoved = "LeaderMoved"
	// EventGhostMemberRemoved: a member with no Machine was removed.
	EventGhostMemberRemoved = "GhostMemberRemoved"
	// EventMemberRemovalFailed: asking for the removal failed (etcd or the workload apiserver did
	// not answer); it is asked again (Warning).
	EventMemberRemovalFailed = "MemberRemovalFailed"
	// EventLeaderMoveFailed: leadership could not be moved to any candidate; it is tried again
	// before the member is removed (Warning).
	EventLeaderMoveFailed = "LeaderMoveFailed"
)

// Events the quorum guard records on the Machine whose deletion it answered, and on the
// Cluster's ControlPlaneEtcd, by reason. Each carries the message the client was given and the
// user who asked for the deletion.
const (
	// EventDeletionRefused: the deletion was refused because removing the Machine's member
	// would lose quorum (Warning).
	EventDeletionRefused = "DeletionRefusedWouldLoseQuorum"
	// EventDeletionAllowedClusterPaused: the deletion of a paused Cluster's Machine was let
	// through unchecked, without the delete-for-move annotation of clusterctl move (Warning).
	EventDeletionAllowedClusterPaused = "DeletionAllowedClusterPaused"
	// EventDeletionAllowedEtcdUnobserved: the deletion was let through although etcd could not be
	// observed at all: it keeps quorum as etcd was last observed, or etcd was never observed; it
	// may still lose quorum (Warning).
	EventDeletionAllowedEtcdUnobserved = "DeletionAllowedEtcdUnobserved"
	// EventDeletionAllowedLastMember: the deletion was let through although the Machine hosts
	// the last etcd member (Warning). No longer recorded: the quorum guard refuses that deletion
	// (EventDeletionRefusedLastMember) unless a person skips the guard explicitly.
	EventDeletionAllowedLastMember = "DeletionAllowedLastMember"
	// EventDeletionRefusedHealthUnknown: the deletion was refused because whether etcd keeps
	// quorum depends on members whose health is unknown (for example every K3s heartbeat is
	// stale), so no removal is known to be safe; quorum is not known to be lost. Also when etcd
	// could not be observed at all and, as it was last observed, it would not keep quorum
	// (Warning).
	EventDeletionRefusedHealthUnknown = "DeletionRefusedHealthUnknown"
	// EventDeletionRefusedLastMember: the deletion was refused because, with the deletions
	// already under way, it would remove the last etcd member of a Cluster that is not being
	// deleted (Warning).
	EventDeletionRefusedLastMember = "DeletionRefusedLastMember"
	// EventQuorumGuardSkipped: the deletion was let through unchecked because the Machine
	// carries SkipQuorumGuardAnnotation (Warning).
	EventQuorumGuardSkipped = "QuorumGuardSkipped"
	// EventDeletionAllowedForMove: the deletion of a paused Cluster's Machine that carries
	// DeleteForMoveAnnotation was let through unchecked, as clusterctl move's deletion from the
	// source management cluster (Warning: anyone who may annotate a Machine can set it).
	EventDeletionAllowedForMove = "DeletionAllowedForMove"
)
