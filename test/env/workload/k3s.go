package workload

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
	"github.com/etcd-adapter/etcd-adapter/test/env/k3ssim"
	"github.com/etcd-adapter/etcd-adapter/test/env/kubelet"
)

// K3sOptions shape a K3s-flavoured workload cluster.
type K3sOptions struct {
	// APIServer is the workload apiserver to use; nil starts one, owned by the cluster.
	APIServer *env.APIServer
	// Version is the simulated K3s or RKE2 version, e.g. "v1.34.2+k3s1" (default).
	Version string
	// Members is the number of servers (default 3).
	Members int
	// NodePrefix names the Nodes <prefix>-0 ... (default "cp").
	NodePrefix string
	// FirstIP is the last octet of the first server's 127.0.0.x address (default 10); K3s
	// matches members by peer address, so servers need distinct IPs.
	FirstIP int
	// Tick and HeartbeatInterval are the simulator's (K3s: 15 s and 5 min; tests go shorter).
	Tick, HeartbeatInterval time.Duration
	// Heartbeat is the kubelet stand-ins' Ready refresh period (default DefaultHeartbeat).
	Heartbeat time.Duration
	// NoKubelets starts no kubelet stand-ins: the simulator writes each Node's Ready condition
	// itself (k3ssim.Options.Kubelet nil), as a suite of the K3s backend alone needs.
	NoKubelets bool
	// DisableStrictReconfigCheck turns off etcd's strict reconfiguration check, so members can be
	// removed and added back to back (benchmarks that change membership in a loop).
	DisableStrictReconfigCheck bool
	// Simulator, when set, adjusts the simulator's options before it starts (its transport to
	// the apiserver, call timeout, requeue delays).
	Simulator func(*k3ssim.Options)
}

// K3s is a running K3s-flavoured workload cluster.
type K3s struct {
	parts
	Simulator *k3ssim.Simulator

	opts     K3sOptions
	standIns *k3ssim.StandInKubelets
}

// StartK3s starts a K3s-flavoured workload cluster and waits until the simulator has
// annotated every Node and, where the version writes it, set EtcdIsVoter. On error everything
// started so far is stopped.
func StartK3s(ctx context.Context, opts K3sOptions) (_ *K3s, err error) {
	opts = opts.withDefaults()
	k := &K3s{opts: opts, standIns: k3ssim.NewStandInKubelets()}
	defer func() {
		if err != nil {
			_ = k.Close()
		}
	}()
	if err := k.useAPIServer(opts.APIServer); err != nil {
		return nil, err
	}
	specs, err := k3sMembers(opts)
	if err != nil {
		return nil, err
	}
	if k.Etcd, err = etcdcluster.Start(ctx, etcdcluster.Options{Members: specs, DisableStrictReconfigCheck: opts.DisableStrictReconfigCheck}); err != nil {
		return nil, fmt.Errorf("failed to start the etcd cluster: %w", err)
	}
	var standIns k3ssim.Kubelet
	if !opts.NoKubelets {
		standIns = k.standIns
	}
	for _, s := range specs {
		if !opts.NoKubelets {
			if err := k.startKubelet(ctx, s.NodeName); err != nil {
				return nil, err
			}
		}
		k.Nodes = append(k.Nodes, s.NodeName)
	}
	if err := k.startSimulator(ctx, standIns, opts); err != nil {
		return nil, err
	}
	return k, k.waitReady(ctx)
}

func (o K3sOptions) withDefaults() K3sOptions {
	if o.Version == "" {
		o.Version = "v1.34.2+k3s1"
	}
	if o.Members == 0 {
		o.Members = 3
	}
	if o.NodePrefix == "" {
		o.NodePrefix = "cp"
	}
	if o.FirstIP == 0 {
		o.FirstIP = 10
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = DefaultHeartbeat
	}
	return o
}

// k3sMembers names each server's member as K3s does: <node>-<8 random hex chars>.
func k3sMembers(opts K3sOptions) ([]etcdcluster.MemberSpec, error) {
	var specs []etcdcluster.MemberSpec
	for i := range opts.Members {
		suffix := make([]byte, 4)
		if _, err := rand.Read(suffix); err != nil {
			return nil, fmt.Errorf("failed to pick a member name suffix: %w", err)
		}
		node := fmt.Sprintf("%s-%d", opts.NodePrefix, i)
		specs = append(specs, etcdcluster.MemberSpec{
			NodeName: node, MemberName: node + "-" + hex.EncodeToString(suffix), IP: fmt.Sprintf("127.0.0.%d", opts.FirstIP+i),
		})
	}
	return specs, nil
}

// startKubelet starts a server's kubelet stand-in. It reports the simulated version, or the
// simulator and the stand-in would overwrite each other's status.nodeInfo.kubeletVersion.
func (k *K3s) startKubelet(ctx context.Context, node string) error {
	kl, err := kubelet.Start(ctx, kubelet.Options{
		NodeName: node, Config: k.APIServer.Config, KubeletVersion: k.opts.Version, HeartbeatInterval: k.opts.Heartbeat,
	})
	if err != nil {
		return fmt.Errorf("failed to start the kubelet stand-in of Node %s: %w", node, err)
	}
	k.addKubelet(kl)
	k.standIns.Add(kl)
	return nil
}

// JoinServer starts a new server on Node node advertising ip (distinct from every other
// server's: K3s matches members by peer address): its kubelet stand-in (unless NoKubelets), then the simulator's
// join (an etcd learner under a fresh member name, promoted by the leader's K3s). It returns
// the member name.
func (k *K3s) JoinServer(ctx context.Context, node, ip string) (string, error) {
	if !k.opts.NoKubelets {
		if err := k.startKubelet(ctx, node); err != nil {
			return "", err
		}
	}
	k.Nodes = append(k.Nodes, node)
	return k.Simulator.JoinServer(ctx, node, ip)
}

func (k *K3s) startSimulator(ctx context.Context, standIns k3ssim.Kubelet, opts K3sOptions) error {
	simOpts := k3ssim.Options{
		Version: opts.Version, RESTConfig: k.APIServer.Config, Etcd: k.Etcd, Kubelet: standIns,
		Tick: opts.Tick, HeartbeatInterval: opts.HeartbeatInterval,
	}
	if opts.Simulator != nil {
		opts.Simulator(&simOpts)
	}
	sim, err := k3ssim.New(simOpts)
	if err != nil {
		return fmt.Errorf("failed to create the K3s simulator: %w", err)
	}
	if err := sim.Start(ctx); err != nil {
		return fmt.Errorf("failed to start the K3s simulator: %w", err)
	}
	k.Simulator = sim
	return nil
}

// waitReady waits until every Node carries its member name and, where the version writes it,
// an EtcdIsVoter condition.
func (k *K3s) waitReady(ctx context.Context) error {
	profile := k.Simulator.Profile()
	return wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range k.Nodes {
			n := &corev1.Node{}
			if err := k.APIServer.Client.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
				return false, nil //nolint:nilerr // not registered yet: keep waiting
			}
			member, running := k.Simulator.MemberName(name)
			if !running || n.Annotations[profile.Keys.NodeName] != member {
				return false, nil
			}
			if profile.HasEtcdIsVoter && !hasCondition(n, k3ssim.EtcdIsVoterCondition) {
				return false, nil
			}
		}
		return true, nil
	})
}

func hasCondition(n *corev1.Node, t corev1.NodeConditionType) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == t {
			return true
		}
	}
	return false
}

// Close stops the simulator, the kubelet stand-ins, etcd, and the apiserver when the cluster
// started it.
func (k *K3s) Close() error {
	if k.Simulator != nil {
		k.Simulator.Stop()
	}
	return k.close()
}
