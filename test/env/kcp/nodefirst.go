package kcp

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
	"github.com/etcd-adapter/etcd-adapter/test/env/workload"
)

// nodeRefPoll is how often a Node-first join checks whether its Machine has its nodeRef.
const nodeRefPoll = 100 * time.Millisecond

// boundFunc reports whether Cluster API set the Machine's nodeRef, i.e. bound it to its Node.
type boundFunc func(context.Context) (bool, error)

// nodeFirstJoin is the part of a Node-first `kubeadm join --control-plane` that runs after
// kubelet-start, on the host, while Cluster API goes on: control-plane-join. done is closed
// when it returned; err is what it failed with.
type nodeFirstJoin struct {
	cancel context.CancelFunc
	done   chan struct{}
	err    error
}

// joinNodeFirst plays `kubeadm join --control-plane` without ControlPlaneKubeletLocalMode
// (workload.JoinNodeFirst). kubeadm's join phases (k8s.io/kubernetes v1.36.3
// cmd/kubeadm/app/cmd/join.go) run kubelet-start, which with the gate off waits for the
// kubelet's TLS bootstrap (phases/join/kubelet.go runKubeletStartJoinPhase), so the Node
// registers with the address kubeadm advertises; it returns then, so that the provisioner
// reports the host up and Cluster API binds the Machine to the Node while the join goes on
// (controlPlaneJoin). The Node gets a loopback address of its own, which its member's URLs
// use too, so that a learner that has not started can be placed on its Node by its peer URL.
func (w *workloadCluster) joinNodeFirst(ctx context.Context, nodeName, providerID string, bound boundFunc) error {
	ip := w.nextIP()
	if err := w.startKubelet(ctx, nodeName, providerID, ip); err != nil {
		return err
	}
	w.recordJoinStep(nodeName, workload.JoinNodeRegistered)
	joinCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	j := &nodeFirstJoin{cancel: cancel, done: make(chan struct{})}
	w.mu.Lock()
	w.nodeFirst[nodeName] = j
	w.mu.Unlock()
	go func() {
		defer close(j.done)
		j.err = w.controlPlaneJoin(joinCtx, nodeName, ip, bound)
	}()
	return nil
}

// controlPlaneJoin plays kubeadm's control-plane-join phase of a Node-first join: its etcd
// step (phases/join/controlplanejoin.go runEtcdPhase, phases/etcd/local.go
// CreateStackedEtcdStaticPodManifestFile) adds the learner (MemberAddAsLearner), which etcd
// lists with its peer URL and no name, and writes the etcd static Pod's manifest; the learner
// starts only once the kubelet pulled etcd's image and ran the Pod, which can take minutes.
// The harness starts it Options.EtcdStartDelay after it was added, and not before the Machine
// has its nodeRef, so that etcd-adapter sees the learner not started on a bound Machine's Node
// for that long; then kubeadm promotes it (MemberPromote). A join set to fail (FailNextJoin)
// leaves a learner on the Node's address that never starts.
func (w *workloadCluster) controlPlaneJoin(ctx context.Context, nodeName, ip string, bound boundFunc) error {
	c, fail, err := w.joiningEtcd(nodeName)
	if err != nil {
		return err
	}
	if fail {
		_, _, err := c.AddGhostLearnerOn(ctx, ip)
		return err
	}
	m, err := c.AddLearnerNotStarted(ctx, etcdcluster.MemberSpec{NodeName: nodeName, IP: ip})
	if err != nil {
		return fmt.Errorf("failed to add the etcd learner of Node %s: %w", nodeName, err)
	}
	w.recordJoinStep(nodeName, workload.JoinLearnerAdded)
	if err := waitPulled(ctx, nodeName, bound, time.Now().Add(w.etcdStartDelay)); err != nil {
		return err
	}
	if err := c.StartLearner(ctx, m); err != nil {
		return fmt.Errorf("failed to start the etcd learner of Node %s: %w", nodeName, err)
	}
	w.recordJoinStep(nodeName, workload.JoinEtcdStarted)
	if err := c.PromoteMember(ctx, m.Name()); err != nil {
		return err
	}
	w.recordJoinStep(nodeName, workload.JoinPromoted)
	return w.attachMember(ctx, nodeName, m)
}

// waitPulled waits until the Machine has its nodeRef and the etcd image pull is over (pulled).
func waitPulled(ctx context.Context, nodeName string, bound boundFunc, pulled time.Time) error {
	if err := wait.PollUntilContextCancel(ctx, nodeRefPoll, true, wait.ConditionWithContextFunc(bound)); err != nil {
		return fmt.Errorf("failed to wait for the nodeRef of the Machine of Node %s: %w", nodeName, err)
	}
	select {
	case <-ctx.Done():
		return fmt.Errorf("failed to wait for the etcd image pull on Node %s: %w", nodeName, context.Cause(ctx))
	case <-time.After(time.Until(pulled)):
		return nil
	}
}

// joiningEtcd returns the etcd cluster a join adds its learner to, and whether the join was set
// to fail (FailNextJoin), which it consumes.
func (w *workloadCluster) joiningEtcd(nodeName string) (*etcdcluster.Cluster, bool, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	c, fail := w.etcd, w.failNextJoin
	w.failNextJoin = false
	if c == nil {
		return nil, false, fmt.Errorf("failed to join Node %s: no Machine ran kubeadm init yet", nodeName)
	}
	return c, fail, nil
}

// nextIP returns a loopback address no other Node of this workload cluster has.
func (w *workloadCluster) nextIP() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.ips++
	return fmt.Sprintf("127.20.%d.%d", w.ips/250, w.ips%250+1)
}

// joinError returns what the Node's Node-first join failed with; nil while it runs, when it
// completed, or when the Node joined otherwise.
func (w *workloadCluster) joinError(nodeName string) error {
	w.mu.Lock()
	j := w.nodeFirst[nodeName]
	w.mu.Unlock()
	if j == nil {
		return nil
	}
	select {
	case <-j.done:
		return j.err
	default:
		return nil
	}
}

// stopJoin stops the Node's Node-first join, as a host powered off, and waits until it returned.
func (w *workloadCluster) stopJoin(nodeName string) {
	w.mu.Lock()
	j := w.nodeFirst[nodeName]
	w.mu.Unlock()
	if j != nil {
		j.cancel()
		<-j.done
	}
}

// stopJoins stops every Node-first join still running.
func (w *workloadCluster) stopJoins() {
	w.mu.Lock()
	var nodes []string
	for n := range w.nodeFirst {
		nodes = append(nodes, n)
	}
	w.mu.Unlock()
	for _, n := range nodes {
		w.stopJoin(n)
	}
}
