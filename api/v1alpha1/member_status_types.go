package v1alpha1

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// The parts of ControlPlaneEtcdStatus about single members and removals.

// MemberRole is a member's part in raft.
// +kubebuilder:validation:Enum=Leader;Voter;Learner
type MemberRole string

// Member roles.
const (
	MemberRoleLeader  MemberRole = "Leader"
	MemberRoleVoter   MemberRole = "Voter"
	MemberRoleLearner MemberRole = "Learner"
)

// MemberHealth is the tri-state verdict on a member; Unknown is never healthy.
// +kubebuilder:validation:Enum=Healthy;Unhealthy;Unknown
type MemberHealth string

// Member health values.
const (
	MemberHealthy   MemberHealth = "Healthy"
	MemberUnhealthy MemberHealth = "Unhealthy"
	MemberUnknown   MemberHealth = "Unknown"
)

// EtcdMemberStatus is one etcd member as last observed.
type EtcdMemberStatus struct {
	// Name is the member name; empty for a member that never started.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name,omitempty"`

	// ID is the etcd member ID in hexadecimal, as etcdctl member list shows it; empty when the
	// backend cannot see etcd's member IDs (K3s and RKE2 publish none on Nodes), where the member
	// is known by its name and Node.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	ID string `json:"id,omitempty"`

	// NodeName is the workload Node hosting the member; empty for a ghost member.
	// +optional
	NodeName string `json:"nodeName,omitempty"`

	// MachineName is the control-plane Machine whose Node hosts the member; empty when none.
	// +optional
	MachineName string `json:"machineName,omitempty"`

	// Role is Leader, Voter or Learner.
	// +required
	Role MemberRole `json:"role"`

	// Health is Healthy, Unhealthy or Unknown.
	// +required
	Health MemberHealth `json:"health"`

	// Reason is the EtcdMemberHealthy reason that goes with Health.
	// +optional
	Reason string `json:"reason,omitempty"`

	// Message says why the member is not healthy.
	// +optional
	// +kubebuilder:validation:MaxLength=10240
	Message string `json:"message,omitempty"`

	// Alarms are the member's active etcd alarms (NOSPACE, CORRUPT).
	// +optional
	// +listType=set
	Alarms []string `json:"alarms,omitempty"`
}

// RemovalResult is where a member removal stands.
// +kubebuilder:validation:Enum=InProgress;Removed;Rejected;TimedOut;Released
type RemovalResult string

// Removal results.
const (
	// RemovalInProgress: the removal was asked for and is not confirmed yet.
	RemovalInProgress RemovalResult = "InProgress"
	// RemovalRemoved: the member is confirmed gone and the hook was released.
	RemovalRemoved RemovalResult = "Removed"
	// RemovalRejected: etcd or K3s refused the removal; the hook is kept.
	RemovalRejected RemovalResult = "Rejected"
	// RemovalTimedOut: the removal waited longer than spec.memberRemovalTimeout; the hook is kept.
	RemovalTimedOut RemovalResult = "TimedOut"
	// RemovalReleased: a person released the hook with the release annotation.
	RemovalReleased RemovalResult = "Released"
)

// MemberRemovalStatus is the member removal in progress, or the last one done.
type MemberRemovalStatus struct {
	// Member is the name (or, for a member that never started, the ID) of the member.
	// +required
	Member string `json:"member"`

	// MemberID is the etcd member ID in hexadecimal, as etcdctl member list shows it; empty when
	// the backend cannot see etcd's member IDs (K3s and RKE2), where the removal is of the member
	// named Member on Node NodeName.
	// +optional
	MemberID string `json:"memberID,omitempty"`

	// MachineName is the Machine whose deletion the removal is part of; empty for a ghost.
	// +optional
	MachineName string `json:"machineName,omitempty"`

	// NodeName is the Node that hosted the member.
	// +optional
	NodeName string `json:"nodeName,omitempty"`

	// StartTime is when the removal was first asked for.
	// +required
	StartTime metav1.Time `json:"startTime"`

	// EndTime is when the removal ended (removed, rejected, timed out or released).
	// +optional
	EndTime *metav1.Time `json:"endTime,omitempty"`

	// Result is where the removal stands.
	// +required
	Result RemovalResult `json:"result"`

	// Message explains the result.
	// +optional
	// +kubebuilder:validation:MaxLength=10240
	Message string `json:"message,omitempty"`

	// Snapshot is the verified snapshot that preceded the removal (spec.snapshot).
	// +optional
	Snapshot *SnapshotRecord `json:"snapshot,omitempty"`
}

// NotStartedMemberStatus is a member etcd lists that has not started (it has no name), and
// since when etcd-adapter knows it.
type NotStartedMemberStatus struct {
	// ID is the etcd member ID in hexadecimal, as etcdctl member list shows it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=16
	ID string `json:"id"`

	// FirstSeenTime is when etcd-adapter first saw the member not started; etcd added it then or
	// earlier.
	// +required
	FirstSeenTime metav1.Time `json:"firstSeenTime"`
}

// MachineMemberStatus is the evidence behind the EtcdAdapterMemberHealthy condition of one
// Machine: since when its member has been seen unhealthy, or healthy, on every observation. It
// is kept in status so that a restart of etcd-adapter does not restart the clocks of
// spec.memberUnhealthyTimeout and spec.memberRecoveryTime.
type MachineMemberStatus struct {
	// MachineName is the control-plane (or etcdadm etcd) Machine.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	MachineName string `json:"machineName"`

	// UnhealthySince is the first of the observations since which the Machine's member has been
	// seen unhealthy on every observation; unset while it is seen healthy. Observations that
	// could not tell (etcd unreachable, evidence too old) neither start nor end it.
	// +optional
	UnhealthySince *metav1.Time `json:"unhealthySince,omitempty"`

	// HealthySince is the first of the observations since which the Machine's member has been
	// seen healthy on every observation; unset while it is seen unhealthy.
	// +optional
	HealthySince *metav1.Time `json:"healthySince,omitempty"`
}
