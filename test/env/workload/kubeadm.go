package workload

import (
	"context"
	"errors"
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
}

// Kubeadm is a running kubeadm-flavoured workload cluster.
type Kubeadm struct {
	APIServer *env.APIServer
	Etcd      *etcdcluster.Cluster
	// Kubelets holds the stand-in of each Node, by Node name.
	Kubelets map[string]*kubelet.Kubelet
	// Nodes are the control-plane Node names, in member order.
	Nodes []string

	ownsAPIServer bool
}

// StartKubeadm starts a kubeadm-flavoured workload cluster. On error everything started so far
// is stopped.
func StartKubeadm(ctx context.Context, opts KubeadmOptions) (_ *Kubeadm, err error) {
	opts = opts.withDefaults()
	k := &Kubeadm{APIServer: opts.APIServer, Kubelets: map[string]*kubelet.Kubelet{}}
	defer func() {
		if err != nil {
			_ = k.Close()
		}
	}()
	if k.APIServer == nil {
		if k.APIServer, err = env.StartAPIServer(env.APIServerOptions{}); err != nil {
			return nil, err
		}
		k.ownsAPIServer = true
	}
	if k.Etcd, err = etcdcluster.Start(ctx, etcdcluster.Options{Members: etcdcluster.Nodes(opts.NodePrefix, opts.Members)}); err != nil {
		return nil, fmt.Errorf("failed to start the etcd cluster: %w", err)
	}
	for _, m := range k.Etcd.Members() {
		if err := k.startNode(ctx, m, opts.Heartbeat); err != nil {
			return nil, err
		}
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

// startNode starts the Node's kubelet stand-in, forwarding 2379 to the member, and creates the
// member's static Pod kube-system/etcd-<node>.
func (k *Kubeadm) startNode(ctx context.Context, m *etcdcluster.Member, heartbeat time.Duration) error {
	kl, err := kubelet.Start(ctx, kubelet.Options{
		NodeName: m.NodeName(), Config: k.APIServer.Config,
		Targets:           map[int32]string{kubelet.EtcdPort: m.ClientAddress()},
		HeartbeatInterval: heartbeat, PodSyncInterval: time.Second,
	})
	if err != nil {
		return fmt.Errorf("failed to start the kubelet stand-in of Node %s: %w", m.NodeName(), err)
	}
	k.Kubelets[m.NodeName()] = kl
	k.Nodes = append(k.Nodes, m.NodeName())
	if _, err := kubelet.CreateEtcdPod(ctx, k.APIServer.Client, m.NodeName()); err != nil {
		return fmt.Errorf("failed to create the etcd Pod of Node %s: %w", m.NodeName(), err)
	}
	return nil
}

// Close stops the kubelet stand-ins, etcd, and the apiserver when the cluster started it.
func (k *Kubeadm) Close() error {
	var errs []error
	for _, kl := range k.Kubelets {
		errs = append(errs, kl.Stop())
	}
	if k.Etcd != nil {
		errs = append(errs, k.Etcd.Close())
	}
	if k.ownsAPIServer && k.APIServer != nil {
		errs = append(errs, k.APIServer.Stop())
	}
	return errors.Join(errs...)
}
