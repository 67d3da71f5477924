package k3ssim

import (
	"context"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// flowProfiles covers every member-controller generation of K3s: legacy removal with and without
// EtcdIsVoter, the requeue-bug generation (with the exact member match), the leader-aware
// generation on both of its branches, and RKE2's keys.
var flowProfiles = []struct {
	version string
	program string
}{
	{"v1.26.5+k3s1", "k3s"},     // before EtcdIsVoter; legacy removal
	{"v1.27.10+k3s1", "k3s"},    // legacy removal; EtcdIsVoter with Unhealthy/NotAMember; prefix match
	{"v1.33.4+k3s1", "k3s"},     // 1.28.3 – 1.34.1: rejection clears remove, requeue-forever bug
	{"v1.34.2+k3s1", "k3s"},     // leader moved first, remove deleted on success
	{"v1.32.10+rke2r1", "rke2"}, // the 1.32 backport of the same, on RKE2 keys
}

// TestSimulator_memberLifecycle walks each profile through the whole member lifecycle on one
// 3-server cluster, asserting what K3s does at each step: removal of a follower by
// annotation, the requeue behaviour afterwards, rejoin under a new name as a learner and its
// promotion, removal of the leader, Node deletion with and without removed-node-name, and
// the rejection of removing the only voter.
func TestSimulator_memberLifecycle(t *testing.T) {
	for _, tt := range flowProfiles {
		t.Run(tt.version, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			c := startK3sCluster(ctx, t, tt.version, nodePrefix("life", tt.version), 3)
			f := &lifecycle{c: c, program: tt.program}
			for _, step := range []struct {
				name string
				run  func(context.Context, *testing.T)
			}{
				{"servers carry the metadata and the EtcdIsVoter condition of their version", f.metadata},
				{"remove=true on a follower removes its member and annotates the Node per version", f.removeFollower},
				{"after the removal only 1.28.3 – 1.34.1 requeues the Node forever", f.requeueAfterRemoval},
				{"the removed server rejoins as a learner under a new name and is promoted", f.rejoin},
				{"remove=true on the leader moves leadership first only from 1.34.2 / 1.32.10", f.removeLeader},
				{"deleting an etcd Node removes its member before the finalizer is released", f.deleteNode},
				{"a deleted Node that carries removed-node-name is let go at once", f.deleteRemovedNode},
				{"removing the only voter is rejected without removed-node-name", f.rejectLastVoter},
			} {
				if !t.Run(step.name, func(t *testing.T) { step.run(ctx, t) }) {
					return
				}
			}
		})
	}
}

// lifecycle is the state TestSimulator_memberLifecycle carries from step to step.
type lifecycle struct {
	c       *k3sCluster
	program string
	// follower was removed by annotation and rejoined; leader was removed by annotation;
	// other was deleted.
	follower, leader, other string
	followerMember          string
}

func (f *lifecycle) metadata(ctx context.Context, t *testing.T) {
	g := NewWithT(t)
	c, p := f.c, f.c.profile
	t.Logf("%s: 3-server cluster ready after %v", p.Version, c.waitReady(ctx, g))
	prefix := fmt.Sprintf("etcd.%s.cattle.io/", f.program)
	for _, node := range c.nodes {
		n := c.node(ctx, g, node)
		name, _ := c.sim.MemberName(node)
		g.Expect(name).To(MatchRegexp("^" + node + "-[0-9a-f]{8}$"))
		g.Expect(n.Annotations).To(HaveKeyWithValue(prefix+"node-name", name))
		g.Expect(n.Annotations).To(HaveKeyWithValue(prefix+"node-address", c.ips[node]))
		g.Expect(n.Labels).To(HaveKeyWithValue(EtcdRoleLabel, "true"))
		g.Expect(n.Labels).To(HaveKeyWithValue(ControlPlaneRoleLabel, "true"))
		if p.MasterLabel {
			g.Expect(n.Labels).To(HaveKeyWithValue(MasterRoleLabel, "true"))
		} else {
			g.Expect(n.Labels).ToNot(HaveKey(MasterRoleLabel))
		}
		g.Expect(n.Status.NodeInfo.KubeletVersion).To(Equal(p.Version))
		g.Expect(n.Finalizers).To(ContainElement(MemberControllerFinalizer))
		g.Expect(c.readyStatus(ctx, g, node)).To(Equal(corev1.ConditionTrue))
	}
	if !p.HasEtcdIsVoter {
		g.Consistently(func() []string {
			var reasons []string
			for _, node := range c.nodes {
				reasons = append(reasons, c.reason(ctx, g, node))
			}
			return reasons
		}, 4*testTick, pollInterval).Should(HaveEach(BeEmpty()), "a K3s before EtcdIsVoter writes no condition")
	}
}

func (f *lifecycle) removeFollower(ctx context.Context, t *testing.T) {
	g := NewWithT(t)
	c, keys := f.c, f.c.profile.Keys
	leader := c.leaderNode(g)
	for _, node := range c.nodes {
		if node != leader {
			f.follower = node
			break
		}
	}
	// Client rule that works on every K3s version: record node-name before setting remove.
	f.followerMember = c.annotations(ctx, g, f.follower)[keys.NodeName]
	g.Expect(f.followerMember).ToNot(BeEmpty())
	c.annotate(ctx, g, f.follower, keys.Remove, "true")

	g.Eventually(func() map[string]string { return c.annotations(ctx, g, f.follower) }, waitTimeout, pollInterval).
		Should(HaveKeyWithValue(keys.RemovedNodeName, f.followerMember))
	ann := c.annotations(ctx, g, f.follower)
	g.Expect(ann).ToNot(HaveKey(keys.NodeName))
	g.Expect(ann).ToNot(HaveKey(keys.NodeAddress))
	if c.profile.Removal == RemovalLeaderAware {
		g.Expect(ann).ToNot(HaveKey(keys.Remove))
	} else {
		g.Expect(ann).To(HaveKeyWithValue(keys.Remove, "true"))
	}
	g.Expect(c.members(ctx, g)).ToNot(HaveKey(f.followerMember))
	g.Eventually(func() bool { return c.etcd.Member(f.followerMember).Running() }, waitTimeout, pollInterval).Should(BeFalse())
	g.Eventually(func() corev1.ConditionStatus { return c.readyStatus(ctx, g, f.follower) }, waitTimeout, pollInterval).
		Should(Equal(corev1.ConditionUnknown))
	if c.profile.HasHealthReasons {
		g.Eventually(func() string { return c.reason(ctx, g, f.follower) }, waitTimeout, pollInterval).Should(Equal(ReasonNotAMember))
	}
}

func (f *lifecycle) requeueAfterRemoval(ctx context.Context, t *testing.T) {
	g := NewWithT(t)
	c := f.c
	before := c.sim.Requeues(f.follower)
	if c.profile.Removal == RemovalRequeueBug {
		g.Eventually(func() int { return c.sim.Requeues(f.follower) }, waitTimeout, pollInterval).
			Should(BeNumerically(">=", before+3), "the Node without node-name is requeued again and again")
		return
	}
	g.Consistently(func() int { return c.sim.Requeues(f.follower) }, 6*testTick, pollInterval).Should(Equal(before))
}

func (f *lifecycle) rejoin(ctx context.Context, t *testing.T) {
	g := NewWithT(t)
	c, keys := f.c, f.c.profile.Keys
	// Hold the learner: a server that runs an apiserver writes node-name only once its
	// learner was promoted (its apiserver waits for its own etcd), so until then K3s has not
	// seen the rejoin on the Node.
	c.sim.HoldPromotion()
	defer c.sim.ReleasePromotion()

	name, err := c.sim.RestartServer(ctx, f.follower)
	g.Expect(err).ToNot(HaveOccurred())
	g.Expect(name).To(MatchRegexp("^" + f.follower + "-[0-9a-f]{8}$"))
	g.Expect(name).ToNot(Equal(f.followerMember))
	g.Expect(c.members(ctx, g)[name].IsLearner).To(BeTrue())
	g.Eventually(func() corev1.ConditionStatus { return c.readyStatus(ctx, g, f.follower) }, waitTimeout, pollInterval).
		Should(Equal(corev1.ConditionTrue))
	g.Consistently(func() map[string]string { return c.annotations(ctx, g, f.follower) }, 4*testTick, pollInterval).
		ShouldNot(HaveKey(keys.NodeName), "a learner on a server with an apiserver is not on its Node yet")

	c.sim.ReleasePromotion()
	g.Eventually(func(g Gomega) {
		m, ok := c.members(ctx, g)[name]
		g.Expect(ok).To(BeTrue())
		g.Expect(m.IsLearner).To(BeFalse())
	}, waitTimeout, pollInterval).Should(Succeed(), "the leader promotes the learner")
	// Then node-name appears, and K3s clears the old removal (the rejoin check).
	g.Eventually(func() map[string]string { return c.annotations(ctx, g, f.follower) }, waitTimeout, pollInterval).Should(And(
		HaveKeyWithValue(keys.NodeName, name),
		HaveKeyWithValue(keys.NodeAddress, c.ips[f.follower]),
		Not(HaveKey(keys.RemovedNodeName)),
	))
	if c.profile.Removal == RemovalLegacy {
		g.Eventually(func() map[string]string { return c.annotations(ctx, g, f.follower) }, waitTimeout, pollInterval).
			Should(HaveKeyWithValue(keys.Remove, "false"))
	} else {
		g.Eventually(func() map[string]string { return c.annotations(ctx, g, f.follower) }, waitTimeout, pollInterval).
			ShouldNot(HaveKey(keys.Remove))
	}
	if c.profile.HasEtcdIsVoter {
		g.Eventually(func() string { return c.reason(ctx, g, f.follower) }, waitTimeout, pollInterval).Should(Equal(ReasonMemberNotLearner))
	}
	// The requeue-forever bug ends once node-name is back.
	settled := c.sim.Requeues(f.follower)
	g.Consistently(func() int { return c.sim.Requeues(f.follower) }, 4*testTick, pollInterval).Should(Equal(settled))
}

func (f *lifecycle) removeLeader(ctx context.Context, t *testing.T) {
	g := NewWithT(t)
	c, keys := f.c, f.c.profile.Keys
	f.leader = c.leaderNode(g)
	name := c.annotations(ctx, g, f.leader)[keys.NodeName]
	moves := c.sim.LeaderMoves()
	c.annotate(ctx, g, f.leader, keys.Remove, "true")

	g.Eventually(func() map[string]string { return c.annotations(ctx, g, f.leader) }, waitTimeout, pollInterval).
		Should(HaveKeyWithValue(keys.RemovedNodeName, name))
	g.Expect(c.members(ctx, g)).ToNot(HaveKey(name))
	if c.profile.Removal == RemovalLeaderAware {
		g.Expect(c.sim.LeaderMoves()).To(Equal(moves + 1))
	} else {
		g.Expect(c.sim.LeaderMoves()).To(Equal(moves))
	}
	g.Eventually(func(g Gomega) { g.Expect(c.leaderNode(g)).NotTo(Equal(f.leader)) }, waitTimeout, pollInterval).Should(Succeed())
}

func (f *lifecycle) deleteNode(ctx context.Context, t *testing.T) {
	g := NewWithT(t)
	c, keys := f.c, f.c.profile.Keys
	for _, node := range c.nodes {
		if node != f.follower && node != f.leader {
			f.other = node
		}
	}
	name := c.annotations(ctx, g, f.other)[keys.NodeName]
	g.Expect(name).ToNot(BeEmpty())

	// With the member controller stopped the Node is held by the finalizer and the member stays.
	c.sim.StopMemberController()
	g.Expect(c.client.Delete(ctx, c.node(ctx, g, f.other))).To(Succeed())
	g.Consistently(func(g Gomega) {
		n := c.node(ctx, g, f.other)
		g.Expect(n.DeletionTimestamp).ToNot(BeNil())
		g.Expect(c.members(ctx, g)).To(HaveKey(name))
	}, 4*testTick, pollInterval).Should(Succeed())

	g.Expect(c.sim.StartMemberController(ctx)).To(Succeed())
	g.Eventually(func() bool {
		err := c.client.Get(ctx, client.ObjectKey{Name: f.other}, &corev1.Node{})
		return apierrors.IsNotFound(err)
	}, waitTimeout, pollInterval).Should(BeTrue())
	g.Expect(c.members(ctx, g)).ToNot(HaveKey(name))
}

func (f *lifecycle) deleteRemovedNode(ctx context.Context, t *testing.T) {
	g := NewWithT(t)
	c := f.c
	before := c.members(ctx, g)
	g.Expect(c.client.Delete(ctx, c.node(ctx, g, f.leader))).To(Succeed())
	g.Eventually(func() bool {
		err := c.client.Get(ctx, client.ObjectKey{Name: f.leader}, &corev1.Node{})
		return apierrors.IsNotFound(err)
	}, waitTimeout, pollInterval).Should(BeTrue())
	g.Expect(c.members(ctx, g)).To(HaveLen(len(before)))
}

func (f *lifecycle) rejectLastVoter(ctx context.Context, t *testing.T) {
	g := NewWithT(t)
	c, keys := f.c, f.c.profile.Keys
	name := c.annotations(ctx, g, f.follower)[keys.NodeName]
	g.Expect(c.members(ctx, g)).To(HaveLen(1), "the rejoined follower is the only member left")
	before := c.sim.Requeues(f.follower)
	c.annotate(ctx, g, f.follower, keys.Remove, "true")

	if c.profile.Removal == RemovalLegacy {
		// Legacy K3s has no rejection case: the error is requeued and remove stays.
		g.Eventually(func() int { return c.sim.Requeues(f.follower) }, waitTimeout, pollInterval).Should(BeNumerically(">=", before+2))
		g.Expect(c.annotations(ctx, g, f.follower)).To(HaveKeyWithValue(keys.Remove, "true"))
	} else {
		g.Eventually(func() map[string]string { return c.annotations(ctx, g, f.follower) }, waitTimeout, pollInterval).
			ShouldNot(HaveKey(keys.Remove))
	}
	g.Expect(c.annotations(ctx, g, f.follower)).To(And(HaveKeyWithValue(keys.NodeName, name), Not(HaveKey(keys.RemovedNodeName))))
	g.Expect(c.members(ctx, g)).To(HaveKey(name))
}
