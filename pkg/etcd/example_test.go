package etcd_test

import (
	"fmt"
	"time"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Five voters, two of them down: removing a down one is safe, removing a healthy one is not.
func ExampleProjectRemoval() {
	health := []etcd.Health{etcd.Healthy, etcd.Healthy, etcd.Healthy, etcd.Unhealthy, etcd.Unhealthy}
	var members []etcd.MemberHealth
	for i, h := range health {
		members = append(members, etcd.MemberHealth{Member: etcd.Member{ID: uint64(i + 1), Name: fmt.Sprintf("cp-%d", i)}, Health: h})
	}

	for _, target := range []uint64{4, 1} {
		v := etcd.ProjectRemoval(members, target)
		fmt.Printf("%t %s: %s\n", v.Allowed, v.Reason, v.Message)
	}
	// Output:
	// true MemberRemovalSafe: removing etcd member cp-3 keeps quorum: after it 3 of 4 voters are healthy
	// false WouldLoseQuorum: removing etcd member cp-0 would lose quorum: after it 2 of 4 voters are healthy
}

// A member that answers from another etcd cluster (split brain) is caught, and the Machine on
// its Node gets a condition that says so.
func ExampleAssessHealth() {
	now := time.Now()
	s := &etcd.Snapshot{Backend: "example", ObservedAt: now, LeaderID: 1}
	var machines []etcd.Machine
	for i := range 3 {
		node := fmt.Sprintf("cp-%d", i)
		s.Members = append(s.Members, etcd.Member{ID: uint64(i + 1), Name: node, NodeName: node})
		machines = append(machines, etcd.Machine{Name: "m-" + node, NodeName: node})
	}
	for i, m := range s.Members {
		clusterID := uint64(0xc1)
		if i == 2 {
			clusterID = 0xbad
		}
		s.Evidence = append(s.Evidence, etcd.MemberEvidence{MemberID: m.ID, NodeName: m.NodeName, Contact: etcd.ContactAnswered,
			ObservedAt: now, ClusterID: clusterID, Members: s.Members, LeaderID: 1})
	}

	v := etcd.AssessHealth(etcd.HealthInput{Snapshot: s, Machines: machines, Now: now})
	c := v.Machines["m-cp-2"]
	fmt.Println(c.Status, c.Reason, c.Message)
	fmt.Println(v.Cluster.Status, v.Cluster.Reason)
	// Output:
	// False NotHealthy Etcd member cp-2 reports cluster ID bad while the majority reports c1 (split brain)
	// False NotHealthy
}
