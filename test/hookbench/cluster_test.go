package hookbench

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
	"github.com/etcd-adapter/etcd-adapter/test/env/k3ssim"
	"github.com/etcd-adapter/etcd-adapter/test/env/workload"
)

const (
	// members is the size every control plane returns to after a deletion.
	members = 3
	// observationInterval is the ControlPlaneEtcds' spec.observationInterval. Hook release does
	// not depend on it (Machine and Node events drive the flow); a kubeadm member failure does,
	// since no Kubernetes object changes when etcd stops answering.
	observationInterval = 5 * time.Second
	// k3sTick is the simulated K3s's period: short, so the simulator answers at once and the
	// figures are etcd-adapter's (K3s itself runs its etcd controllers every 15 s).
	k3sTick = 50 * time.Millisecond
	// inFlightGrace lets etcd calls that were in flight when a kubelet stopped forwarding end
	// before their member stops.
	inFlightGrace = 200 * time.Millisecond
)

// cluster is one workload cluster the benchmark deletes Machines from and adds members to.
type cluster struct {
	p         *platform
	cluster   *clusterv1.Cluster
	cpe       *v1alpha1.ControlPlaneEtcd
	wl        client.Client
	wlConfig  *rest.Config
	k3sKeys   *k3ssim.Keys // the annotation keys of a K3s cluster; nil for kubeadm
	etcd      *etcdcluster.Cluster
	nodes     []string // oldest first
	machines  map[string]*clusterv1.Machine
	memberOf  func(node string) string
	join      func(ctx context.Context, node string) error
	afterGone func(node string) error
	// stopMember and restartMember fail the member and bring it back without any client
	// asking it for Status while it stops: etcd v3.6 panics on a Status call that races a hard
	// stop (its storage is closed under it), which in this process would end the benchmark.
	stopMember, restartMember func(ctx context.Context, node, name string) error
	seq                       int // Nodes created so far, for new Node names and addresses
}

// startK3s starts a K3s workload cluster (simulated v1.34.2) and registers it.
func startK3s(ctx context.Context, b *testing.B, p *platform) *cluster {
	b.Helper()
	wl, err := workload.StartK3s(ctx, workload.K3sOptions{Members: members, NodePrefix: "k3s", Tick: k3sTick})
	if err != nil {
		b.Fatalf("failed to start the K3s workload cluster: %v", err)
	}
	b.Cleanup(func() { _ = wl.Close() })
	keys := wl.Simulator.Profile().Keys
	c := &cluster{p: p, wl: wl.APIServer.Client, etcd: wl.Etcd, nodes: slices.Clone(wl.Nodes), seq: members, k3sKeys: &keys,
		memberOf: func(node string) string { name, _ := wl.Simulator.MemberName(node); return name },
		// The machine is gone: its kubelet goes with it.
		afterGone: func(node string) error { return wl.Kubelet(node).Stop() },
		// The simulated K3s processes are the only ones asking etcd for Status.
		stopMember: func(ctx context.Context, _, name string) error {
			return wl.Simulator.Quiesced(func() error { return wl.Etcd.StopMember(ctx, name) })
		},
		restartMember: func(ctx context.Context, _, name string) error { return wl.Etcd.Member(name).Restart(ctx) },
	}
	// A new server on its own address (K3s matches members by peer address): its etcd joins
	// as a learner and the leader's K3s promotes it.
	c.join = func(ctx context.Context, node string) error {
		_, err := wl.JoinServer(ctx, node, fmt.Sprintf("127.0.0.%d", 10+c.seq))
		return err
	}
	c.register(ctx, b, v1alpha1.BackendK3s, wl.APIServer.Config)
	return c
}

// startKubeadm starts a kubeadm workload cluster (real etcd behind the port-forward) and
// registers it with its etcd CA.
func startKubeadm(ctx context.Context, b *testing.B, p *platform) *cluster {
	b.Helper()
	wl, err := workload.StartKubeadm(ctx, workload.KubeadmOptions{Members: members, NodePrefix: "kubeadm"})
	if err != nil {
		b.Fatalf("failed to start the kubeadm workload cluster: %v", err)
	}
	b.Cleanup(func() { _ = wl.Close() })
	c := &cluster{p: p, wl: wl.APIServer.Client, etcd: wl.Etcd, nodes: slices.Clone(wl.Nodes), seq: members,
		memberOf: func(node string) string { return wl.Etcd.MemberOnNode(node).Name() },
		// kubeadm join: the member is added as a learner, started, promoted, and its Node and
		// static Pod appear.
		join: func(ctx context.Context, node string) error {
			m, err := wl.Etcd.AddLearner(ctx, etcdcluster.MemberSpec{NodeName: node})
			if err != nil {
				return err
			}
			if err := wl.Etcd.PromoteMember(ctx, m.Name()); err != nil {
				return err
			}
			return wl.AddNode(ctx, m)
		},
		// The machine is gone: its kubelet goes with it (its etcd stopped itself on removal).
		afterGone: func(node string) error { return wl.Kubelet(node).Stop() },
		// etcd-adapter is the only one asking etcd for Status, through the Node's kubelet: the
		// kubelet stops forwarding first (the member is unreachable for etcd-adapter from then
		// on), calls in flight end, then etcd stops.
		stopMember: func(ctx context.Context, node, name string) error {
			wl.Kubelet(node).Break()
			time.Sleep(inFlightGrace)
			return wl.Etcd.StopMember(ctx, name)
		},
		restartMember: func(ctx context.Context, node, name string) error {
			if err := wl.Etcd.Member(name).Restart(ctx); err != nil {
				return err
			}
			wl.Kubelet(node).Repair()
			return nil
		},
	}
	c.register(ctx, b, v1alpha1.BackendKubeadm, wl.APIServer.Config)
	return c
}

// register creates the Cluster, its ControlPlaneEtcd in Manage mode and a Machine per Node, and
// waits for the healthy steady state.
func (c *cluster) register(ctx context.Context, b *testing.B, backend v1alpha1.Backend, wl *rest.Config) {
	b.Helper()
	c.wlConfig = wl
	name := string(backend)
	cl, err := env.RegisterCluster(ctx, c.p.c, env.ClusterInput{Namespace: namespace, Name: name, Workload: wl,
		EtcdCACert: c.etcd.CA().CertPEM(), EtcdCAKey: c.etcd.CA().KeyPEM()})
	if err != nil {
		b.Fatal(err)
	}
	c.cluster = cl
	c.cpe = &v1alpha1.ControlPlaneEtcd{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: cl.Name, UID: cl.UID,
		}}},
		Spec: v1alpha1.ControlPlaneEtcdSpec{ClusterName: name, Backend: backend, Mode: v1alpha1.ModeManage,
			ObservationInterval: &metav1.Duration{Duration: observationInterval}},
	}
	if err := c.p.c.Create(ctx, c.cpe); err != nil {
		b.Fatal(err)
	}
	c.machines = map[string]*clusterv1.Machine{}
	for _, node := range c.nodes {
		m, err := c.p.createMachine(ctx, cl, node)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.p.bindNode(ctx, m, cl, c.wl, node); err != nil {
			b.Fatal(err)
		}
		c.machines[node] = m
	}
	if err := c.waitSteady(ctx); err != nil {
		b.Fatal(err)
	}
}
