package kcp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
	"github.com/etcd-adapter/etcd-adapter/test/env/kubelet"
	"github.com/etcd-adapter/etcd-adapter/test/env/pki"
	"github.com/etcd-adapter/etcd-adapter/test/env/workload"
)

// Timings of the kubelet stand-ins on KCP's Nodes.
const (
	heartbeatInterval = 2 * time.Second
	podSyncInterval   = time.Second
)

// controlPlaneRoleLabel and its NoSchedule taint are what `kubeadm init`/`join`
// (mark-control-plane) put on a control-plane Node; KCP lists control-plane Nodes by the label.
const controlPlaneRoleLabel = "node-role.kubernetes.io/control-plane"

// workloadCluster is the workload side of one Cluster: its apiserver, the etcd cluster that
// the first Machine's `kubeadm init` starts, and one Node per provisioned Machine.
type workloadCluster struct {
	api            *workloadAPIServer
	kubeletVersion string

	// etcdStartDelay is how long a Node-first join's etcd takes to start once its Machine has
	// its nodeRef (Options.EtcdStartDelay).
	etcdStartDelay time.Duration

	mu           sync.Mutex
	etcd         *etcdcluster.Cluster
	kubelets     map[string]*kubelet.Kubelet
	guards       map[string]*memberGuard
	joins        map[string][]workload.JoinStep
	nodeFirst    map[string]*nodeFirstJoin
	ips          int
	failNextJoin bool
}

func newWorkloadCluster(api *workloadAPIServer, kubeletVersion string, etcdStartDelay time.Duration) *workloadCluster {
	return &workloadCluster{
		api: api, kubeletVersion: kubeletVersion, etcdStartDelay: etcdStartDelay,
		kubelets: map[string]*kubelet.Kubelet{}, guards: map[string]*memberGuard{}, joins: map[string][]workload.JoinStep{},
		nodeFirst: map[string]*nodeFirstJoin{},
	}
}

// provision does on the Machine's host what the bootstrap data says: `kubeadm init` starts a
// one-member etcd cluster and uploads kubeadm's objects; `kubeadm join` adds a learner, starts
// it and promotes it. The Node registers (providerID set) and its static Pods appear after the
// member started, except for a join without ControlPlaneKubeletLocalMode, whose Node registers
// first and whose etcd joins once bound says the Machine has its nodeRef (joinNodeFirst). A
// Node already provisioned is left alone.
func (w *workloadCluster) provision(ctx context.Context, nodeName, providerID string, bd *bootstrapData, bound boundFunc) error {
	if w.kubelet(nodeName) != nil {
		return nil
	}
	if !bd.Init {
		order, err := w.joinOrder(ctx)
		if err != nil {
			return err
		}
		if order == workload.JoinNodeFirst {
			return w.joinNodeFirst(ctx, nodeName, providerID, bound)
		}
	}
	member, err := w.startMember(ctx, nodeName, bd)
	if err != nil || member == nil {
		return err
	}
	if !bd.Init {
		return w.joinNode(ctx, nodeName, providerID, member)
	}
	cfg, err := bd.clusterConfiguration()
	if err != nil {
		return err
	}
	if err := uploadKubeadmObjects(ctx, w.api.Client, cfg); err != nil {
		return err
	}
	return w.startNode(ctx, nodeName, providerID, member)
}

// joinNode ends `kubeadm join --control-plane` with ControlPlaneKubeletLocalMode: the member
// runs, so the kubelet registers the Node (see workload.JoinEtcdFirst).
func (w *workloadCluster) joinNode(ctx context.Context, nodeName, providerID string, member *etcdcluster.Member) error {
	if err := w.startKubelet(ctx, nodeName, providerID, ""); err != nil {
		return err
	}
	w.recordJoinStep(nodeName, workload.JoinNodeRegistered)
	return w.attachMember(ctx, nodeName, member)
}

// recordJoinStep records steps of the Node's join as it plays them.
func (w *workloadCluster) recordJoinStep(nodeName string, steps ...workload.JoinStep) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.joins[nodeName] = append(w.joins[nodeName], steps...)
}

// joinSteps returns the steps the Node's join played so far, in order.
func (w *workloadCluster) joinSteps(nodeName string) []workload.JoinStep {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.joins[nodeName])
}

// startMember starts the Node's etcd member the way kubeadm does. It returns nil and no error
// when a join was set to fail (FailNextJoin): the learner is added but never starts.
func (w *workloadCluster) startMember(ctx context.Context, nodeName string, bd *bootstrapData) (*etcdcluster.Member, error) {
	if bd.Init {
		return w.initEtcd(ctx, nodeName, bd)
	}
	c, fail, err := w.joiningEtcd(nodeName)
	if err != nil {
		return nil, err
	}
	if fail {
		_, _, err := c.AddGhostLearner(ctx)
		return nil, err
	}
	m, err := c.AddLearner(ctx, etcdcluster.MemberSpec{NodeName: nodeName})
	if err != nil {
		return nil, fmt.Errorf("failed to join the etcd member of Node %s: %w", nodeName, err)
	}
	w.recordJoinStep(nodeName, workload.JoinLearnerAdded, workload.JoinEtcdStarted)
	if err := c.PromoteMember(ctx, m.Name()); err != nil {
		return nil, err
	}
	w.recordJoinStep(nodeName, workload.JoinPromoted)
	return m, nil
}

// initEtcd starts the etcd cluster with its first member, certificates from the etcd CA in the
// bootstrap data (KCP's `<cluster>-etcd`).
func (w *workloadCluster) initEtcd(ctx context.Context, nodeName string, bd *bootstrapData) (*etcdcluster.Member, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.etcd != nil {
		return nil, fmt.Errorf("failed to run kubeadm init on Node %s: etcd was initialized already", nodeName)
	}
	certPEM, keyPEM, err := bd.etcdCA()
	if err != nil {
		return nil, err
	}
	ca, err := pki.CAFromPEM(certPEM, keyPEM)
	if err != nil {
		return nil, err
	}
	c, err := etcdcluster.Start(ctx, etcdcluster.Options{Members: []etcdcluster.MemberSpec{{NodeName: nodeName}}, CA: ca})
	if err != nil {
		return nil, fmt.Errorf("failed to start etcd on Node %s: %w", nodeName, err)
	}
	w.etcd = c
	return c.MemberOnNode(nodeName), nil
}

// startNode registers the control-plane Node, starts its kubelet stand-in and attaches the
// member.
func (w *workloadCluster) startNode(ctx context.Context, nodeName, providerID string, member *etcdcluster.Member) error {
	if err := w.startKubelet(ctx, nodeName, providerID, ""); err != nil {
		return err
	}
	return w.attachMember(ctx, nodeName, member)
}

// startKubelet registers the control-plane Node with InternalIP ip (empty: kubelet.NodeIP) and
// starts its kubelet stand-in, reporting the version KCP was asked for, forwarding the
// kube-apiserver Pod's 6443 to the apiserver; the etcd Pod's 2379 goes nowhere until
// attachMember.
func (w *workloadCluster) startKubelet(ctx context.Context, nodeName, providerID, ip string) error {
	if err := w.registerNode(ctx, nodeName, providerID); err != nil {
		return err
	}

	apiAddr, err := w.api.HostPort()
	if err != nil {
		return err
	}
	kl, err := kubelet.Start(ctx, kubelet.Options{
		NodeName: nodeName, Config: w.api.Config, ProviderID: providerID, KubeletVersion: w.kubeletVersion, NodeIP: ip,
		Targets:           map[int32]string{apiServerPort: apiAddr},
		HeartbeatInterval: heartbeatInterval, PodSyncInterval: podSyncInterval,
	})
	if err != nil {
		return fmt.Errorf("failed to start the kubelet stand-in of Node %s: %w", nodeName, err)
	}
	w.mu.Lock()
	w.kubelets[nodeName] = kl
	w.mu.Unlock()
	return nil
}

// attachMember forwards the etcd Pod's 2379 on the Node to the member, through a memberGuard,
// and creates the static Pods, as the kubelet shows them once it runs them.
func (w *workloadCluster) attachMember(ctx context.Context, nodeName string, member *etcdcluster.Member) error {
	guard, err := startGuard(member, w.members)
	if err != nil {
		return err
	}
	w.mu.Lock()
	w.guards[nodeName] = guard
	kl := w.kubelets[nodeName]
	w.mu.Unlock()
	if kl == nil {
		return fmt.Errorf("failed to attach the etcd member of Node %s: no kubelet stand-in", nodeName)
	}
	kl.Retarget(kubelet.EtcdPort, guard.Address())
	return createStaticPods(ctx, w.api.Client, nodeName)
}

// registerNode creates the Node with its providerID and kubeadm's control-plane label and
// taint; the kubelet stand-in adopts it.
func (w *workloadCluster) registerNode(ctx context.Context, nodeName, providerID string) error {
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: nodeName, Labels: map[string]string{controlPlaneRoleLabel: ""}},
		Spec: corev1.NodeSpec{
			ProviderID: providerID,
			Taints:     []corev1.Taint{{Key: controlPlaneRoleLabel, Effect: corev1.TaintEffectNoSchedule}},
		},
	}
	if err := w.api.Client.Create(ctx, node); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return fmt.Errorf("failed to register Node %s: %w", nodeName, err)
	}
	node.Status.Conditions = pressureConditions()
	if err := w.api.Client.Status().Update(ctx, node); err != nil {
		return fmt.Errorf("failed to report Node %s conditions: %w", nodeName, err)
	}
	return nil
}

// pressureConditions are the kubelet's resource-pressure conditions, all False. Cluster API's
// Machine controller requires them for NodeHealthy (and with it Ready and Available); the
// kubelet stand-in writes only Ready, and its heartbeat patch keeps these.
func pressureConditions() []corev1.NodeCondition {
	now := metav1.Now()
	var cs []corev1.NodeCondition
	for _, t := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure} {
		cs = append(cs, corev1.NodeCondition{
			Type: t, Status: corev1.ConditionFalse, Reason: "KubeletHas" + "No" + string(t),
			LastHeartbeatTime: now, LastTransitionTime: now,
		})
	}
	return cs
}

// release stops what the Machine's host ran: its join if it still runs, its kubelet stand-in,
// its etcd member (as a powered-off machine would, without leaving the cluster) and its mirror
// Pods.
func (w *workloadCluster) release(ctx context.Context, nodeName string) error {
	w.stopJoin(nodeName)
	w.mu.Lock()
	kl, guard, c := w.kubelets[nodeName], w.guards[nodeName], w.etcd
	delete(w.kubelets, nodeName)
	delete(w.guards, nodeName)
	w.mu.Unlock()
	var errs []error
	if kl != nil {
		errs = append(errs, kl.Stop())
	}
	if guard != nil {
		errs = append(errs, guard.Close())
	}
	if c != nil {
		if m := c.MemberOnNode(nodeName); m != nil {
			errs = append(errs, m.Kill())
		}
	}
	errs = append(errs, deleteStaticPods(ctx, w.api.Client, nodeName))
	return errors.Join(errs...)
}

// kubelet returns the Node's kubelet stand-in, or nil.
func (w *workloadCluster) kubelet(nodeName string) *kubelet.Kubelet {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.kubelets[nodeName]
}

// members returns the etcd cluster's members, none before kubeadm init.
func (w *workloadCluster) members() []*etcdcluster.Member {
	if c := w.etcdCluster(); c != nil {
		return c.Members()
	}
	return nil
}

// etcdCluster returns the etcd cluster, nil before kubeadm init.
func (w *workloadCluster) etcdCluster() *etcdcluster.Cluster {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.etcd
}

// close stops every kubelet stand-in and etcd; the apiserver is stopped by its owner.
//
// Note: nothing is stopped under w.mu, because a memberGuard's watch takes it (members).
func (w *workloadCluster) close() error {
	w.stopJoins()
	w.mu.Lock()
	kubelets, guards, c := w.kubelets, w.guards, w.etcd
	w.kubelets, w.guards = map[string]*kubelet.Kubelet{}, map[string]*memberGuard{}
	w.mu.Unlock()
	var errs []error
	for _, kl := range kubelets {
		errs = append(errs, kl.Stop())
	}
	for _, g := range guards {
		errs = append(errs, g.Close())
	}
	if c != nil {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
