package kubeadm

import (
	"net"
	"net/url"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// nodeFacts is what the workload apiserver says about where members can run, the facts members
// are placed on Nodes by: the Nodes that run an etcd Pod, and, when they had to be listed,
// every Node with its InternalIPs.
type nodeFacts struct {
	// pods are the Nodes running kubeadm's etcd Pod (kube-system/etcd-<node>).
	pods map[string]bool
	// nodes are the Nodes that exist; nil when they were not listed.
	nodes map[string]bool
	// byIP maps an InternalIP to the Nodes that have it; nil when Nodes were not listed.
	byIP map[string][]string
}

// needNodes reports whether placing members needs the Node list: a member whose name is not
// the Node of an etcd Pod (its Pod may be gone while its Node stays), or one that never started
// (it has no name, only a peer URL).
func (f nodeFacts) needNodes(members []etcd.Member) bool {
	for _, m := range members {
		if !m.Started() || !f.pods[m.Name] {
			return true
		}
	}
	return false
}

// assignNodes sets every member's NodeName.
//
// Note: kubeadm names a member after its Node. A started member is on the Node of its name
// when that Node exists (or runs an etcd Pod); otherwise no Node hosts it (a ghost), and
// NodeName stays empty. A member that never started has no name: it is placed on the one Node
// whose InternalIP is the host of its peer URL, as kubeadm join advertises the Node's address,
// so the Machine whose join failed can release it. When no Node, or more than one, has that
// address, it stays unplaced.
func (f nodeFacts) assignNodes(members []etcd.Member) []etcd.Member {
	out := make([]etcd.Member, 0, len(members))
	for _, m := range members {
		m.NodeName = ""
		switch {
		case m.Started() && (f.pods[m.Name] || f.nodes[m.Name]):
			m.NodeName = m.Name
		case !m.Started():
			m.NodeName = f.nodeWithIP(peerHost(m))
		}
		out = append(out, m)
	}
	return out
}

// nodeWithIP returns the one Node with the InternalIP ip; empty when none or several have it.
func (f nodeFacts) nodeWithIP(ip string) string {
	if ip == "" {
		return ""
	}
	if nodes := f.byIP[ip]; len(nodes) == 1 {
		return nodes[0]
	}
	return ""
}

// peerHost is the host of the member's first peer URL.
func peerHost(m etcd.Member) string {
	for _, p := range m.PeerURLs {
		u, err := url.Parse(p)
		if err != nil {
			continue
		}
		if h := u.Hostname(); net.ParseIP(h) != nil {
			return net.ParseIP(h).String()
		}
	}
	return ""
}
