package adopter_test

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/etcd-adapter/etcd-adapter/docs/examples/adopter"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/fake"
)

var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

// The provider scales a healthy 3-member control plane down by one: the gate allows deleting
// the Machine, and after the drain the hook step moves leadership off the leaving leader, then
// removes its member, then (the member gone) lets the provider release its hook.
func Example() {
	ctx := context.Background()
	snapshot, machines := threeMembers()
	etcdCluster := &fake.Cluster{ObserveResponse: snapshot} // adopter.EtcdFor(...) in a provider
	victim := machines[0]                                   // hosts the leader

	d := adopter.ScaleDown(ctx, etcdCluster, &clusterv1.Cluster{}, machines, victim, now)
	fmt.Println("delete:", d.Delete)

	victim.DeletionTimestamp = &metav1.Time{Time: now} // Cluster API drains, then waits on the hook
	for range 3 {
		done, why, err := adopter.RemoveMemberAfterDrain(ctx, etcdCluster, machines, victim, now)
		if err != nil {
			fmt.Println("error:", err)
			return
		}
		fmt.Printf("done=%t: %s\n", done, why)
		if len(etcdCluster.RemovedMembers) > 0 { // etcd confirms on the next observation
			snapshot, _ = threeMembers()
			snapshot.Members = snapshot.Members[1:]
			snapshot.Evidence = snapshot.Evidence[1:]
			snapshot.LeaderID = 2
			etcdCluster.ObserveResponse = snapshot
		} else if len(etcdCluster.MovedLeader) > 0 {
			etcdCluster.ObserveResponse.LeaderID = 2
		}
	}
	// Output:
	// delete: true
	// done=false: moved leadership from cp-0 to cp-1
	// done=false: member cp-0: Removed
	// done=true: no member left on the Node
}

func threeMembers() (*etcd.Snapshot, []*clusterv1.Machine) {
	s := &etcd.Snapshot{Backend: "example", ObservedAt: now, LeaderID: 1}
	var machines []*clusterv1.Machine
	for i := range 3 {
		node := fmt.Sprintf("cp-%d", i)
		s.Members = append(s.Members, etcd.Member{ID: uint64(i + 1), Name: node, NodeName: node})
		machines = append(machines, &clusterv1.Machine{
			ObjectMeta: metav1.ObjectMeta{Name: "m-" + node},
			Status:     clusterv1.MachineStatus{NodeRef: clusterv1.MachineNodeReference{Name: node}},
		})
	}
	for _, m := range s.Members {
		s.Evidence = append(s.Evidence, etcd.MemberEvidence{MemberID: m.ID, NodeName: m.NodeName, Contact: etcd.ContactAnswered,
			ObservedAt: now, ClusterID: 0xc1, Members: s.Members, LeaderID: s.LeaderID})
	}
	return s, machines
}
