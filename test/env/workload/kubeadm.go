package workload

import (
	"context"
	"fmt"
	"time"

	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
	"github.com/etcd-adapter/etcd-adapter/test/env/kubelet"
)

// DefaultHeartbeat is how often the kubelet stand-ins refresh their Node's Ready condition.
const DefaultHeartbeat = 2 * time.Second

// KubeadmOptions shape a kubeadm-flavoured workload cluster.
type KubeadmOptions struct {
	// APIServer is the workload apiserver to use; nil starts one, owned by the cluster.
	APIServer *env.APIServer
	// Members is the number of etcd members and control-plane Nodes (default 3).
	Members int
	// NodePrefix names the Nodes <prefix>-0 ... (default "cp"). Distinct prefixes let several
	// clusters share one apiserver.
	NodePrefix string
	// Heartbeat is the kubelet stand-ins' Ready refresh period (default DefaultHeartbeat).
	Heartbeat time.Duration
	// QuotaBackendBytes is the members' --quota-backend-bytes; zero means etcd's default.
	QuotaBackendBytes int64
	// ElectionMs is the members' --election-timeout; zero means etcdcluster.DefaultElectionMs.
	// A longer one keeps a loaded machine's late heartbeats from moving leadership in a test
	// that needs the leader it chose to stay the leader.
	ElectionMs uint
}

// Kubeadm is a running kubeadm-flavoured workload cluster.
type Kubeadm struct {
	parts
	heartbeat time.Duration
}

// StartKubeadm starts a kubeadm-flavoured workload cluster. On error everything started so far
// is stopped.
func StartKubeadm(ctx context.Context, opts KubeadmOptions) (_ *Kubeadm, err error) {
	opts = opts.withDefaults()
	k := &Kubeadm{heartbeat: opts.Heartbeat}
	defer func() {
		if err != nil {
			_ = k.Close()
		}
	}()
	if err := k.useAPIServer(opts.APIServer); err != nil {
		return nil, err
	}
	if k.Etcd, err = etcdcluster.Start(ctx, etcdcluster.Options{
		Members: etcdcluster.Nodes(opts.NodePrefix, opts.Members), QuotaBackendBytes: opts.QuotaBackendBytes, ElectionMs: opts.ElectionMs,
	}); err != nil {
		return nil, fmt.Errorf("failed to start the etcd cluster: %w", err)
	}
	for _, m := range k.Etcd.Members() {
		if err := k.AddNode(ctx, m); err != nil {
			return nil, err
		}
		k.Nodes = append(k.Nodes, m.NodeName())
	}
	return k, nil
}

func (o KubeadmOptions) withDefaults() KubeadmOptions {
	if o.Members == 0 {
		o.Members = 3
	}
	if o.NodePrefix == "" {
		o.NodePrefix = "cp"
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	return o
}

// AddNode starts the member's Node: a kubelet stand-in on the member's address forwarding 2379
// to the member, and the member's static Pod kube-system/etcd-<node>. StartKubeadm calls it for
// every initial member; call it for a member that joins later (etcdcluster.AddLearner), or play
// the join in kubeadm's order with NewJoin.
func (k *Kubeadm) AddNode(ctx context.Context, m *etcdcluster.Member) error {
	if err := k.startKubelet(ctx, m.NodeName(), m.IP(), "", map[int32]string{kubelet.EtcdPort: m.ClientAddress()}); err != nil {
		return err
	}
	return k.createEtcdPod(ctx, m.NodeName())
}

// startKubelet starts the kubelet stand-in of a Node, which registers it with InternalIP ip.
func (k *Kubeadm) startKubelet(ctx context.Context, node, ip, providerID string, targets map[int32]string) error {
	kl, err := kubelet.Start(ctx, kubelet.Options{
		NodeName: node, Config: k.APIServer.Config, NodeIP: ip, ProviderID: providerID,
		Targets: targets, HeartbeatInterval: k.heartbeat, PodSyncInterval: time.Second,
	})
	if err != nil {
		return fmt.Errorf("failed to start the kubelet stand-in of Node %s: %w", node, err)
	}
	k.addKubelet(kl)
	return nil
}

// createEtcdPod creates the mirror Pod of the Node's etcd static Pod, as the kubelet does once
// it runs the Pod and can reach the apiserver.
func (k *Kubeadm) createEtcdPod(ctx context.Context, node string) error {
	if _, err := kubelet.CreateEtcdPod(ctx, k.APIServer.Client, node); err != nil {
		return fmt.Errorf("failed to create the etcd Pod of Node %s: %w", node, err)
	}
	return nil
}

// Close stops the kubelet stand-ins, etcd, and the apiserver when the cluster started it.
func (k *Kubeadm) Close() error { return k.close() }
