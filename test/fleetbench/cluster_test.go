package fleetbench

import (
	"context"

	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/workload"
)

// fleetCluster is one workload cluster of the fleet: exactly one of k3s and kubeadm is set.
type fleetCluster struct {
	k3s     *workload.K3s
	kubeadm *workload.Kubeadm
}

func (c fleetCluster) apiServer() *env.APIServer {
	if c.k3s != nil {
		return c.k3s.APIServer
	}
	return c.kubeadm.APIServer
}

// fail stops the etcd member on Node node. K3s's leader then finds it unhealthy at its next
// tick and says so on the Node (EtcdIsVoter False Unhealthy); kubeadm's member connections end.
//
// Note: a Node going NotReady is not a member failing. K3s keeps reporting a member whose
// kubelet stopped as healthy, and etcd-adapter believes the report K3s writes after the Node
// went NotReady (pkg/k3s readySince). So a NotReady Node shows as Unknown only until K3s's next
// report, at most its condition heartbeat later: a measure made that way missed whole workload
// clusters whose passes came after that report.
func (c fleetCluster) fail(ctx context.Context, node string) error {
	if c.k3s != nil {
		return c.k3s.Etcd.MemberOnNode(node).Stop()
	}
	return c.kubeadm.Etcd.MemberOnNode(node).Stop()
}

func (c fleetCluster) recover(ctx context.Context, node string) error {
	if c.k3s != nil {
		return c.k3s.Etcd.MemberOnNode(node).Restart(ctx)
	}
	return c.kubeadm.Etcd.MemberOnNode(node).Restart(ctx)
}

func (c fleetCluster) close() error {
	if c.k3s != nil {
		return c.k3s.Close()
	}
	return c.kubeadm.Close()
}
