package k3ssim

import corev1 "k8s.io/api/core/v1"

// Labels and the finalizer are the same for K3s and RKE2 (k3s pkg/etcd/metadata_controller.go, member_controller.go).
const (
	// EtcdRoleLabel marks an etcd server's Node; its value is "true".
	EtcdRoleLabel = "node-role.kubernetes.io/etcd"
	// ControlPlaneRoleLabel marks a server that runs an apiserver; its value is "true".
	ControlPlaneRoleLabel = "node-role.kubernetes.io/control-plane"
	// MasterRoleLabel is only set by older K3s and never stripped from old Nodes.
	MasterRoleLabel = "node-role.kubernetes.io/master"
	// MemberControllerFinalizer holds a deleted etcd Node until its member was removed.
	MemberControllerFinalizer = "wrangler.cattle.io/managed-etcd-controller"
)

// EtcdIsVoter condition type and reasons (k3s pkg/etcd/etcd.go).
const (
	// EtcdIsVoterCondition is the Node condition type written by the leader's process.
	EtcdIsVoterCondition corev1.NodeConditionType = "EtcdIsVoter"
	// ReasonMemberNotLearner is the reason for a healthy voting member.
	ReasonMemberNotLearner = "MemberNotLearner"
	// ReasonMemberIsLearner is the reason for a healthy learner.
	ReasonMemberIsLearner = "MemberIsLearner"
	// ReasonUnhealthy is the reason when Status(member.ClientURLs[0]) failed or reported
	// errors; it wins over learner/voter and the message is the error.
	ReasonUnhealthy = "Unhealthy"
	// ReasonNotAMember is the reason for a Node labelled etcd that matches no member.
	ReasonNotAMember = "NotAMember"

	// MessageMemberNotLearner is the message that goes with ReasonMemberNotLearner.
	MessageMemberNotLearner = "Node is a voting member of the etcd cluster"
	// MessageMemberIsLearner is the message that goes with ReasonMemberIsLearner.
	MessageMemberIsLearner = "Node has not been promoted to voting member of the etcd cluster"
	// MessageNotAMember is the message that goes with ReasonNotAMember.
	MessageNotAMember = "Node is not a member of the etcd cluster"
)

// Keys are the annotation keys of one distribution: `etcd.k3s.cattle.io/...` for K3s and
// `etcd.rke2.cattle.io/...` for RKE2, everything else being the same.
type Keys struct {
	// NodeName holds the etcd member name `<node>-<8 hex>`.
	NodeName string
	// NodeAddress holds the member's advertise IP, without port.
	NodeAddress string
	// Remove is set by an outside actor; only a case-insensitive "true" acts.
	Remove string
	// RemovedNodeName holds the removed member name after a successful removal.
	RemovedNodeName string
}

// keysFor returns the annotation keys for program "k3s" or "rke2".
func keysFor(program string) Keys {
	prefix := "etcd." + program + ".cattle.io/"
	return Keys{
		NodeName:        prefix + "node-name",
		NodeAddress:     prefix + "node-address",
		Remove:          prefix + "remove",
		RemovedNodeName: prefix + "removed-node-name",
	}
}
