package provider_test

import (
	"fmt"
	"time"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

var now = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// healthyCluster is n voters on Nodes cp-0.., each answering with the same view, cp-0 leading,
// and a Machine m-cp-i per Node.
func healthyCluster(n int) (*etcd.Snapshot, []etcd.Machine) {
	s := &etcd.Snapshot{Backend: "test", ObservedAt: now, LeaderID: 1}
	var machines []etcd.Machine
	for i := range n {
		node := fmt.Sprintf("cp-%d", i)
		s.Members = append(s.Members, etcd.Member{ID: uint64(i + 1), Name: node, NodeName: node})
		machines = append(machines, etcd.Machine{Name: "m-" + node, NodeName: node, ProviderID: "test://" + node})
	}
	for _, m := range s.Members {
		s.Evidence = append(s.Evidence, etcd.MemberEvidence{MemberID: m.ID, NodeName: m.NodeName, Contact: etcd.ContactAnswered,
			ObservedAt: now, ClusterID: 0xc1, Members: s.Members, LeaderID: s.LeaderID})
	}
	return s, machines
}

// breakMember makes the member on the i-th Node stop answering.
func breakMember(s *etcd.Snapshot, i int) {
	s.Evidence[i] = etcd.MemberEvidence{MemberID: s.Members[i].ID, NodeName: s.Members[i].NodeName,
		Contact: etcd.ContactUnreachable, Error: "connection refused", ObservedAt: now}
}
