package provider_test

import (
	"context"
	"fmt"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/etcd-adapter/etcd-adapter/controlplane/provider"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/fake"
)

// A control-plane provider's scale-down: observe once, write the conditions its users know,
// refuse while etcd is not healthy, and delete a Machine only when the gate allows it. With one
// member down, the healthy Machine the provider picked must stay, and the broken one may go.
func Example() {
	s, machines := healthyCluster(3)
	breakMember(s, 2)
	var cluster etcd.Cluster = &fake.Cluster{ObserveResponse: s} // kubeadm.New or k3s.New in a provider

	snapshot, err := cluster.Observe(context.Background())
	o := provider.Observation{Snapshot: snapshot, Err: err, Machines: machines, Now: now}
	provider.SetConditions(&clusterv1.Cluster{}, o) // the provider's control-plane object

	pre := provider.Preflight(o)
	fmt.Println("preflight healthy:", pre.Healthy)
	for _, m := range []*clusterv1.Machine{machines[0], machines[2]} {
		v := provider.MayScaleDown(o, m)
		fmt.Printf("delete %s: %t (%s)\n", m.Name, v.Allowed, v.Reason)
	}
	// Output:
	// preflight healthy: false
	// delete m-cp-0: false (WouldLoseQuorum)
	// delete m-cp-2: true (MemberRemovalSafe)
}
