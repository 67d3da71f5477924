package v1alpha1

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ControlPlaneEtcdKind is the kind of ControlPlaneEtcd.
const ControlPlaneEtcdKind = "ControlPlaneEtcd"

// Backend names how a control plane's etcd is reached.
// +kubebuilder:validation:Enum=kubeadm;k3s;rke2;external
type Backend string

// Backends.
const (
	// BackendKubeadm is kubeadm's stacked etcd, reached with clientv3 through the workload
	// apiserver's port-forward (KubeadmControlPlane).
	BackendKubeadm Backend = "kubeadm"
	// BackendK3s is K3s embedded etcd, reached only through Node objects (KThreesControlPlane).
	BackendK3s Backend = "k3s"
	// BackendRKE2 is RKE2 embedded etcd, the K3s contract under etcd.rke2.cattle.io keys
	// (RKE2ControlPlane).
	BackendRKE2 Backend = "rke2"
	// BackendExternal is etcd outside the control-plane Machines, reached with clientv3 dialled
	// directly to each member (a KubeadmControlPlane with
	// spec.kubeadmConfigSpec.clusterConfiguration.etcd.external, or an EtcdadmCluster the Cluster
	// owns). Its members run on no control-plane Machine: mode Manage holds the etcd Machines of
	// an EtcdadmCluster; any other external etcd is observed only (Progressing reason
	// ModeNotSupported).
	BackendExternal Backend = "external"
)

// HostsMembersOnControlPlaneMachines reports whether the backend's etcd members run on the
// Cluster's control-plane Machines. An external etcd's do not: deleting a control-plane Machine
// removes no member, and there is no member whose removal a pre-terminate hook could wait for.
func (b Backend) HostsMembersOnControlPlaneMachines() bool { return b != BackendExternal }

// Mode says whether the controllers act on etcd membership or only report it.
// +kubebuilder:validation:Enum=Manage;Observe
type Mode string

// Modes.
const (
	// ModeManage holds every control-plane Machine (the etcd Machines of an EtcdadmCluster) with
	// a pre-terminate hook and removes its member after the drain, and removes ghost members
	// (kubeadm).
	ModeManage Mode = "Manage"
	// ModeObserve only keeps the status current; the control-plane provider removes members
	// itself (KubeadmControlPlane does).
	ModeObserve Mode = "Observe"
)

// Defaults of ControlPlaneEtcdSpec.
const (
	// DefaultObservationInterval is how often etcd is observed when nothing else happens.
	DefaultObservationInterval = 30 * time.Second
	// DefaultMemberRemovalTimeout is how long a member removal may wait before the controller
	// stops waiting and says so.
	DefaultMemberRemovalTimeout = 10 * time.Minute
	// DefaultJoinTimeout is how long a member that has not started, on a Node that exists, is
	// given to start before it counts as left behind by a failed join. kubeadm join stops waiting
	// for the learner it added after at most two Timeouts.EtcdAPICall (listing the members, then
	// waiting for the learner to start in MemberPromote; k8s.io/kubernetes v1.36.3
	// cmd/kubeadm/app/util/etcd/etcd.go), 4m with kubeadm's default of 2m
	// (cmd/kubeadm/app/constants EtcdAPICallTimeout), and fails the join. The default is more
	// than twice that, so a JoinConfiguration that raised timeouts.etcdAPICall up to 5m still
	// finishes waiting first.
	DefaultJoinTimeout = 10 * time.Minute
	// DefaultMemberUnhealthyTimeout is how long a Machine's member must be seen unhealthy, on
	// every observation, before its MemberHealthyMachineCondition turns False. It is four
	// default observation intervals, so one failed observation never flips it; it is far above
	// an etcd leader election (etcd's default --election-timeout is 1s) and the restart of a
	// crashed static Pod or k3s service (the kubelet's crash-loop back-off starts at 10s and
	// doubles: 10s, 20s, 40s), so a member that restarts on its own is not remediated.
	DefaultMemberUnhealthyTimeout = 2 * time.Minute
	// DefaultMemberRecoveryTime is how long a Machine's member must be seen healthy, on every
	// observation, before a False MemberHealthyMachineCondition turns True again: two default
	// observation intervals, so a member that flaps is not reported recovered on one answer.
	DefaultMemberRecoveryTime = time.Minute
)

// MemberUnhealthyTimeoutOrDefault returns spec.memberUnhealthyTimeout, or
// DefaultMemberUnhealthyTimeout when unset.
func (s ControlPlaneEtcdSpec) MemberUnhealthyTimeoutOrDefault() time.Duration {
	if s.MemberUnhealthyTimeout == nil || s.MemberUnhealthyTimeout.Duration <= 0 {
		return DefaultMemberUnhealthyTimeout
	}
	return s.MemberUnhealthyTimeout.Duration
}

// MemberRecoveryTimeOrDefault returns spec.memberRecoveryTime, or DefaultMemberRecoveryTime when
// unset.
func (s ControlPlaneEtcdSpec) MemberRecoveryTimeOrDefault() time.Duration {
	if s.MemberRecoveryTime == nil || s.MemberRecoveryTime.Duration <= 0 {
		return DefaultMemberRecoveryTime
	}
	return s.MemberRecoveryTime.Duration
}

// ObservationIntervalOrDefault returns spec.observationInterval, or DefaultObservationInterval
// when unset.
func (s ControlPlaneEtcdSpec) ObservationIntervalOrDefault() time.Duration {
	return s.ObservationIntervalOr(DefaultObservationInterval)
}

// ObservationIntervalOr returns spec.observationInterval, or managerDefault (the manager's
// --observation-interval) when unset; the spec always wins. A managerDefault that is not positive
// means DefaultObservationInterval.
func (s ControlPlaneEtcdSpec) ObservationIntervalOr(managerDefault time.Duration) time.Duration {
	switch {
	case s.ObservationInterval != nil && s.ObservationInterval.Duration > 0:
		return s.ObservationInterval.Duration
	case managerDefault > 0:
		return managerDefault
	}
	return DefaultObservationInterval
}

// MemberRemovalTimeoutOrDefault returns spec.memberRemovalTimeout, or the default when unset.
func (s ControlPlaneEtcdSpec) MemberRemovalTimeoutOrDefault() time.Duration {
	if s.MemberRemovalTimeout == nil || s.MemberRemovalTimeout.Duration <= 0 {
		return DefaultMemberRemovalTimeout
	}
	return s.MemberRemovalTimeout.Duration
}

// JoinTimeoutOrDefault returns spec.joinTimeout, or DefaultJoinTimeout when unset.
func (s ControlPlaneEtcdSpec) JoinTimeoutOrDefault() time.Duration {
	if s.JoinTimeout == nil || s.JoinTimeout.Duration <= 0 {
		return DefaultJoinTimeout
	}
	return s.JoinTimeout.Duration
}

// ControlPlaneEtcdSpec is the desired behaviour for the etcd of one CAPI Cluster.
type ControlPlaneEtcdSpec struct {
	// ClusterName is the name of the CAPI Cluster in the same namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="clusterName is immutable"
	ClusterName string `json:"clusterName"`

	// Backend names how etcd is reached.
	// +required
	Backend Backend `json:"backend"`

	// Mode says whether membership is managed (Manage) or only reported (Observe).
	// +optional
	// +kubebuilder:default=Observe
	Mode Mode `json:"mode,omitempty"`

	// ObservationInterval is how often etcd is observed when no event arrives; unset, the
	// manager's --observation-interval (default 30s).
	// +optional
	ObservationInterval *metav1.Duration `json:"observationInterval,omitempty"`

	// MemberRemovalTimeout is how long a member removal may wait before the controller stops
	// waiting, keeps the Machine's hook and says why; default 10m.
	// +optional
	MemberRemovalTimeout *metav1.Duration `json:"memberRemovalTimeout,omitempty"`

	// JoinTimeout is how long a member that has not started, placed on a Node that exists and
	// whose Machine (if any) is not being deleted, is given to start before mode Manage removes
	// it as left behind by a failed join; counted from status.notStartedMembers[].firstSeenTime.
	// kubeadm join (without ControlPlaneKubeletLocalMode) registers the Node before it adds the
	// etcd learner, which has no name until its static Pod starts. Default 10m; set it above
	// twice the timeouts.etcdAPICall of your kubeadm JoinConfiguration.
	// +optional
	JoinTimeout *metav1.Duration `json:"joinTimeout,omitempty"`

	// MemberUnhealthyTimeout is how long the member of a Machine must be seen unhealthy, on every
	// observation since, before the Machine's EtcdAdapterMemberHealthy condition turns False (the
	// condition a MachineHealthCheck remediates on); counted from
	// status.machineMembers[].unhealthySince, which survives a restart of etcd-adapter. Default
	// 2m: four default observation intervals, and longer than a crashed static Pod or k3s
	// service takes to come back on its own.
	// +optional
	MemberUnhealthyTimeout *metav1.Duration `json:"memberUnhealthyTimeout,omitempty"`

	// MemberRecoveryTime is how long the member of a Machine whose EtcdAdapterMemberHealthy
	// condition is False must be seen healthy, on every observation since, before the condition
	// turns True again; counted from status.machineMembers[].healthySince. Default 1m.
	// +optional
	MemberRecoveryTime *metav1.Duration `json:"memberRecoveryTime,omitempty"`

	// Maintenance is the etcd maintenance etcd-adapter does on its own (kubeadm and external
	// backends): defragmentation and NOSPACE recovery. Unset: none.
	// +optional
	Maintenance *MaintenanceSpec `json:"maintenance,omitempty"`

	// Snapshot, when set, makes every member removal (mode Manage) wait for a fresh verified
	// etcd snapshot; see SnapshotSpec.
	// +optional
	Snapshot *SnapshotSpec `json:"snapshot,omitempty"`
}

// ControlPlaneEtcdStatus is the etcd of the Cluster as last observed.
type ControlPlaneEtcdStatus struct {
	// Conditions: EtcdClusterHealthy (KubeadmControlPlane's reasons), Available, Degraded,
	// Progressing and Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Members are the etcd members as last observed.
	// +optional
	// +listType=atomic
	Members []EtcdMemberStatus `json:"members,omitempty"`

	// MemberCount is the number of members, learners included.
	// +optional
	MemberCount *int32 `json:"memberCount,omitempty"`

	// Leader is the name of the leading member; empty when unknown or none.
	// +optional
	Leader string `json:"leader,omitempty"`

	// ClusterID is the etcd cluster ID in hexadecimal, recorded when it was first observed; empty
	// when the backend cannot see it. Once recorded it changes only when a person accepts a new
	// one (annotation etcd-adapter.cluster.x-k8s.io/accept-cluster-id): while etcd answers with
	// another ID, the ClusterIDMatched condition is False and no member is removed.
	// +optional
	// +kubebuilder:validation:MaxLength=16
	ClusterID string `json:"clusterID,omitempty"`

	// Voters is the number of voting members.
	// +optional
	Voters *int32 `json:"voters,omitempty"`

	// HealthyVoters is the number of voting members known to be healthy.
	// +optional
	HealthyVoters *int32 `json:"healthyVoters,omitempty"`

	// FaultTolerance is how many more voting members may fail before quorum is lost: healthy
	// voters minus the quorum size, never below zero.
	// +optional
	FaultTolerance *int32 `json:"faultTolerance,omitempty"`

	// Removal is the member removal in progress, or the last one done.
	// +optional
	Removal *MemberRemovalStatus `json:"removal,omitempty"`

	// NotStartedMembers are the members seen not started in mode Manage on kubeadm, with when
	// each was first seen so: the clock of spec.joinTimeout, kept here so that it survives a
	// restart of etcd-adapter. A member leaves the list once it started or is gone.
	// +optional
	// +listType=map
	// +listMapKey=id
	// +kubebuilder:validation:MaxItems=32
	NotStartedMembers []NotStartedMemberStatus `json:"notStartedMembers,omitempty"`

	// MachineMembers is the evidence behind each Machine's EtcdAdapterMemberHealthy condition:
	// since when its member has been seen unhealthy or healthy. A Machine leaves the list once
	// it is gone.
	// +optional
	// +listType=map
	// +listMapKey=machineName
	// +kubebuilder:validation:MaxItems=64
	MachineMembers []MachineMemberStatus `json:"machineMembers,omitempty"`

	// Maintenance is what etcd maintenance (spec.maintenance) did last, member by member.
	// +optional
	Maintenance *MaintenanceStatus `json:"maintenance,omitempty"`

	// Snapshot is what spec.snapshot did: the newest verified snapshot and a removal waiting
	// for one.
	// +optional
	Snapshot *SnapshotStatus `json:"snapshot,omitempty"`

	// ObservedGeneration is the generation the status was last computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=controlplaneetcds,scope=Namespaced,categories=cluster-api,shortName=cpetcd
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type="string",JSONPath=".spec.clusterName",description="CAPI Cluster"
// +kubebuilder:printcolumn:name="Backend",type="string",JSONPath=".spec.backend"
// +kubebuilder:printcolumn:name="Mode",type="string",JSONPath=".spec.mode",description="Manage: etcd-adapter removes members; Observe: it only reports"
// +kubebuilder:printcolumn:name="Members",type="integer",JSONPath=".status.memberCount"
// +kubebuilder:printcolumn:name="Healthy",type="integer",JSONPath=".status.healthyVoters",description="Healthy voting members"
// +kubebuilder:printcolumn:name="Leader",type="string",JSONPath=".status.leader"
// +kubebuilder:printcolumn:name="Fault Tolerance",type="integer",JSONPath=".status.faultTolerance"
// +kubebuilder:printcolumn:name="Available",type="string",JSONPath=`.status.conditions[?(@.type=="Available")].status`
// +kubebuilder:printcolumn:name="Progressing",type="string",JSONPath=`.status.conditions[?(@.type=="Progressing")].status`,description="True while a member removal is under way or blocked"
// +kubebuilder:printcolumn:name="Removal",type="string",priority=1,JSONPath=".status.removal.result",description="Result of the member removal in progress or the last one: InProgress, Removed, Rejected, TimedOut, Released"
// +kubebuilder:printcolumn:name="Age",type="date",JSONPath=".metadata.creationTimestamp"

// ControlPlaneEtcd is the etcd of one CAPI Cluster's control plane: how it is reached, whether
// its membership is managed, and what it looks like.
type ControlPlaneEtcd struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ControlPlaneEtcdSpec `json:"spec"`
	// +optional
	Status ControlPlaneEtcdStatus `json:"status,omitempty"`
}

// GetConditions returns the conditions, for CAPI's util/conditions.
func (c *ControlPlaneEtcd) GetConditions() []metav1.Condition { return c.Status.Conditions }

// SetConditions sets the conditions, for CAPI's util/conditions.
func (c *ControlPlaneEtcd) SetConditions(conds []metav1.Condition) { c.Status.Conditions = conds }

// +kubebuilder:object:root=true

// ControlPlaneEtcdList is a list of ControlPlaneEtcd.
type ControlPlaneEtcdList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ControlPlaneEtcd `json:"items"`
}

func init() {
	objectTypes = append(objectTypes, &ControlPlaneEtcd{}, &ControlPlaneEtcdList{})
}
