package k3s

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Labels, condition and reasons K3s and RKE2 share (k3s pkg/etcd/etcd.go and
// pkg/etcd/metadata_controller.go).
const (
	// EtcdRoleLabel marks an etcd server's Node; K3s sets it to "true".
	EtcdRoleLabel = "node-role.kubernetes.io/etcd"

	// EtcdIsVoterCondition is the Node condition the etcd raft leader's K3s writes.
	EtcdIsVoterCondition corev1.NodeConditionType = "EtcdIsVoter"
	// ReasonMemberNotLearner: a healthy voting member.
	ReasonMemberNotLearner = "MemberNotLearner"
	// ReasonMemberIsLearner: a healthy learner, waiting to be promoted.
	ReasonMemberIsLearner = "MemberIsLearner"
	// ReasonUnhealthy: K3s's Status check of the member failed; the message is K3s's error.
	ReasonUnhealthy = "Unhealthy"
	// ReasonNotAMember: the Node is labelled etcd but matches no member.
	ReasonNotAMember = "NotAMember"
)

// Keys are the annotation keys of one distribution: etcd.k3s.cattle.io/... for K3s,
// etcd.rke2.cattle.io/... for RKE2.
type Keys struct {
	// NodeName holds the etcd member name, `<node-name>-<8 hex>`.
	NodeName string
	// NodeAddress holds the member's advertise IP, without a port.
	NodeAddress string
	// Remove asks K3s to remove the member; only a case-insensitive "true" acts.
	Remove string
	// RemovedNodeName is written by K3s after it removed the member: the removed member name.
	RemovedNodeName string
}

// Distributions whose keys this backend knows.
const (
	programK3s  = "k3s"
	programRKE2 = "rke2"
)

// KeysFor returns the annotation keys of program "k3s" or "rke2".
func KeysFor(program string) Keys {
	prefix := "etcd." + program + ".cattle.io/"
	return Keys{
		NodeName:        prefix + "node-name",
		NodeAddress:     prefix + "node-address",
		Remove:          prefix + "remove",
		RemovedNodeName: prefix + "removed-node-name",
	}
}

// programOf says whether a Node runs K3s or RKE2: from its kubelet version when that parses,
// otherwise from which distribution's annotations it carries; K3s when nothing tells.
func programOf(n *corev1.Node, v Version, versionErr error) string {
	if versionErr == nil {
		return v.Program
	}
	for k := range n.Annotations {
		if strings.HasPrefix(k, "etcd."+programRKE2+".cattle.io/") {
			return programRKE2
		}
	}
	return programK3s
}

// isTrue is K3s's test of the remove annotation: only a case-insensitive "true" acts.
func isTrue(v string) bool { return strings.EqualFold(v, "true") }
