package fake

import (
	"fmt"
	"time"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// HealthyCluster builds the snapshot of n healthy voters observed at the given time, on Nodes
// cp-0.., with member i+1 on cp-i, every member answering with the same member list and cluster
// ID, and cp-0's member leading (as a clientv3 backend reports them), together with one Machine
// m-cp-i per Node. Tests change it from there (Unreachable, or by hand).
func HealthyCluster(n int, at time.Time) (*etcd.Snapshot, []etcd.Machine) {
	s := &etcd.Snapshot{Backend: "fake", ObservedAt: at, LeaderID: 1}
	machines := make([]etcd.Machine, 0, n)
	for i := range n {
		node := fmt.Sprintf("cp-%d", i)
		s.Members = append(s.Members, etcd.Member{ID: uint64(i + 1), Name: node, NodeName: node})
		machines = append(machines, etcd.Machine{Name: "m-" + node, NodeName: node, ProviderID: "test://" + node})
	}
	for _, m := range s.Members {
		s.Evidence = append(s.Evidence, etcd.MemberEvidence{MemberID: m.ID, NodeName: m.NodeName, Contact: etcd.ContactAnswered,
			ObservedAt: at, ClusterID: 0xc1, Members: s.Members, LeaderID: s.LeaderID})
	}
	return s, machines
}

// Unreachable makes the member on the i-th Node of a HealthyCluster one that does not answer.
func Unreachable(s *etcd.Snapshot, i int) {
	s.Evidence[i] = etcd.MemberEvidence{MemberID: s.Members[i].ID, NodeName: s.Members[i].NodeName,
		Contact: etcd.ContactUnreachable, Error: "connection refused", ObservedAt: s.ObservedAt}
}
