package workload

import (
	"context"
	"fmt"
	"slices"

	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
	"github.com/etcd-adapter/etcd-adapter/test/env/kubelet"
)

// JoinOrder is the order in which `kubeadm join --control-plane` registers the Node and adds
// the etcd learner, which depends on kubeadm's ControlPlaneKubeletLocalMode (KEP-4471).
type JoinOrder int

const (
	// JoinNodeFirst is a join without ControlPlaneKubeletLocalMode (kubeadm v1.31 and v1.32, or
	// v1.33 to v1.35 with the gate off): kubelet-start points the kubelet at the control-plane
	// endpoint and waits for its TLS bootstrap, so the Node registers; only then does
	// control-plane-join add the etcd learner (MemberAddAsLearner) and write its static Pod,
	// wait for the learner to start and promote it (k8s.io/kubernetes v1.32
	// cmd/kubeadm/app/cmd/phases/join/kubelet.go runKubeletStartJoinPhase, which runs
	// runKubeletWaitBootstrapPhase when the gate is off, and controlplanejoin.go).
	JoinNodeFirst JoinOrder = iota
	// JoinEtcdFirst is a join with ControlPlaneKubeletLocalMode (on by default from v1.33; GA
	// in v1.36, where KubeadmControlPlane stops setting it): etcd-join adds the learner, writes
	// its static Pod, waits for it to start and promotes it; kubelet-wait-bootstrap then waits
	// for the kubelet, which talks to the local apiserver, to register the Node (k8s.io/kubernetes
	// v1.36.3 cmd/kubeadm/app/cmd/join.go: preflight, control-plane-prepare, check-etcd,
	// kubelet-start, etcd-join, kubelet-wait-bootstrap, control-plane-join, wait-control-plane;
	// phases/etcd/local.go CreateStackedEtcdStaticPodManifestFile).
	JoinEtcdFirst
)

// JoinStep is a step of a control-plane join that the workload cluster shows.
type JoinStep string

const (
	// JoinNodeRegistered is the step where the kubelet registered the Node, with its providerID
	// and InternalIP.
	JoinNodeRegistered JoinStep = "NodeRegistered"
	// JoinLearnerAdded is the step where the etcd learner was added; its static Pod has not
	// started, so etcd lists it with its peer URL (on the Node's address) and no name.
	JoinLearnerAdded JoinStep = "LearnerAdded"
	// JoinEtcdStarted is the step where the etcd static Pod started, so the learner has its
	// name; its mirror Pod exists once the Node does.
	JoinEtcdStarted JoinStep = "EtcdStarted"
	// JoinPromoted is the step where kubeadm promoted the learner to a voter (MemberPromote).
	JoinPromoted JoinStep = "Promoted"
)

// Steps returns the join's steps in the order kubeadm plays them.
func (o JoinOrder) Steps() []JoinStep {
	if o == JoinEtcdFirst {
		return []JoinStep{JoinLearnerAdded, JoinEtcdStarted, JoinPromoted, JoinNodeRegistered}
	}
	return []JoinStep{JoinNodeRegistered, JoinLearnerAdded, JoinEtcdStarted, JoinPromoted}
}

// String names the order for test output.
func (o JoinOrder) String() string {
	if o == JoinEtcdFirst {
		return "etcd first (ControlPlaneKubeletLocalMode)"
	}
	return "Node first (no ControlPlaneKubeletLocalMode)"
}

// JoinOptions shape one control-plane join.
type JoinOptions struct {
	// Member is the joining member: its Node, and the loopback address (IP) that is both the
	// Node's InternalIP and the host of the member's URLs, as kubeadm advertises the Node's
	// address. Give each joining Node an address of its own (the initial Nodes share
	// etcdcluster.DefaultIP), so that the learner can be placed on its Node by its peer URL.
	Member etcdcluster.MemberSpec
	// Order is the order the join plays its steps in.
	Order JoinOrder
	// ProviderID is the Node's spec.providerID, which Cluster API matches to its Machine.
	ProviderID string
}

// Join is one `kubeadm join --control-plane` played step by step (RunUntil), so that a test can
// act between the steps.
type Join struct {
	k      *Kubeadm
	opts   JoinOptions
	member *etcdcluster.Member
	played int
}

// NewJoin prepares a join of a new control-plane Node; nothing is played yet.
func (k *Kubeadm) NewJoin(opts JoinOptions) *Join { return &Join{k: k, opts: opts} }

// Member returns the joining etcd member; nil before JoinLearnerAdded.
func (j *Join) Member() *etcdcluster.Member { return j.member }

// Run plays every step that is left.
func (j *Join) Run(ctx context.Context) error {
	steps := j.opts.Order.Steps()
	return j.RunUntil(ctx, steps[len(steps)-1])
}

// RunUntil plays the steps in the join's order up to and including step; steps already played
// are not played again.
func (j *Join) RunUntil(ctx context.Context, step JoinStep) error {
	steps := j.opts.Order.Steps()
	last := slices.Index(steps, step)
	if last < 0 {
		return fmt.Errorf("failed to join Node %s: no step %q", j.opts.Member.NodeName, step)
	}
	for ; j.played <= last; j.played++ {
		if err := j.play(ctx, steps[j.played]); err != nil {
			return fmt.Errorf("failed to join Node %s at step %s: %w", j.opts.Member.NodeName, steps[j.played], err)
		}
	}
	return nil
}

// Played reports whether step was played.
func (j *Join) Played(step JoinStep) bool {
	i := slices.Index(j.opts.Order.Steps(), step)
	return i >= 0 && i < j.played
}

func (j *Join) play(ctx context.Context, step JoinStep) error {
	node := j.opts.Member.NodeName
	switch step {
	case JoinNodeRegistered:
		ip := j.opts.Member.IP
		if ip == "" {
			ip = etcdcluster.DefaultIP
		}
		targets := map[int32]string{}
		if j.member != nil {
			targets[kubelet.EtcdPort] = j.member.ClientAddress()
		}
		if err := j.k.startKubelet(ctx, node, ip, j.opts.ProviderID, targets); err != nil {
			return err
		}
		if j.Played(JoinEtcdStarted) {
			return j.k.createEtcdPod(ctx, node)
		}
	case JoinLearnerAdded:
		m, err := j.k.Etcd.AddLearnerNotStarted(ctx, j.opts.Member)
		if err != nil {
			return err
		}
		j.member = m
		if kl := j.k.Kubelet(node); kl != nil {
			kl.Retarget(kubelet.EtcdPort, m.ClientAddress())
		}
	case JoinEtcdStarted:
		if err := j.k.Etcd.StartLearner(ctx, j.member); err != nil {
			return err
		}
		if j.k.Kubelet(node) != nil {
			return j.k.createEtcdPod(ctx, node)
		}
	case JoinPromoted:
		return j.k.Etcd.PromoteMember(ctx, j.member.Name())
	}
	return nil
}
