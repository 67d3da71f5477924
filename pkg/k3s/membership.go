package k3s

import (
	"hash/fnv"
	"net"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// etcdNode is what one Node says about its etcd member: K3s's annotations read with the keys
// of the distribution the Node runs.
type etcdNode struct {
	node       *corev1.Node
	version    Version
	versionErr error
	keys       Keys
	// memberName is the node-name annotation: the member this Node hosts, empty when none.
	memberName string
	// address is the node-address annotation: the member's advertise IP.
	address string
}

// readNode reads a Node's etcd metadata. The member name is only ever the node-name annotation:
// cutting the Node name at its last "-" (what cluster-api-k3s does) breaks on Node names with
// dashes and on members renamed by a rejoin.
func readNode(n *corev1.Node) etcdNode {
	v, err := ParseVersion(n.Status.NodeInfo.KubeletVersion)
	keys := KeysFor(programOf(n, v, err))
	return etcdNode{
		node: n, version: v, versionErr: err, keys: keys,
		memberName: n.Annotations[keys.NodeName],
		address:    n.Annotations[keys.NodeAddress],
	}
}

// isEtcdNode reports whether K3s labelled the Node an etcd server.
func isEtcdNode(n *corev1.Node) bool { return isTrue(n.Labels[EtcdRoleLabel]) }

// MemberID is the synthetic member ID this backend gives the member named name: K3s exposes no
// etcd member IDs on Nodes, so it is the FNV-1a 64-bit hash of the name. It is stable while the
// member keeps its name, and a rejoin (new name) gives a new ID, as etcd would. It is not etcd's
// ID for the member, so this backend's snapshots say SyntheticMemberIDs and callers never show it;
// RemoveMember and WithdrawRemoval identify the member by its name and Node, not by this ID.
func MemberID(name string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return h.Sum64()
}

// member is the etcd member the Node hosts, with the URLs K3s derives from the advertise IP
// (peer https://<ip>:2380, client https://<ip>:2379).
func (e etcdNode) member(isLearner bool) etcd.Member {
	m := etcd.Member{ID: MemberID(e.memberName), Name: e.memberName, NodeName: e.node.Name, IsLearner: isLearner}
	if e.address != "" {
		m.PeerURLs = []string{"https://" + net.JoinHostPort(e.address, "2380")}
		m.ClientURLs = []string{"https://" + net.JoinHostPort(e.address, "2379")}
	}
	return m
}

// voterCondition returns the Node's EtcdIsVoter condition, or nil.
func (e etcdNode) voterCondition() *corev1.NodeCondition {
	return nodeCondition(e.node, EtcdIsVoterCondition)
}

func nodeCondition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

// hostsMember reports whether the Node hosts a member as far as its annotations tell.
func (e etcdNode) hostsMember() bool { return e.memberName != "" }
