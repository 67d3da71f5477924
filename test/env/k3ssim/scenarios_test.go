package k3ssim

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
)

// TestSimulator_mixedVersions: in a rolling upgrade each server's Node shows its own version,
// and EtcdIsVoter follows the leader's version: a 1.28.4 leader checks no health, so a dead
// member stays MemberNotLearner, while a 1.33.4 leader reports it Unhealthy.
func TestSimulator_mixedVersions(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	c := startK3sCluster(ctx, t, "v1.33.4+k3s1", "mixed", 3, func(o *Options) {
		o.Versions = map[string]string{"mixed-0": "v1.28.4+k3s1"}
	})
	c.waitReady(ctx, g)
	g.Expect(c.node(ctx, g, "mixed-0").Status.NodeInfo.KubeletVersion).To(Equal("v1.28.4+k3s1"))
	g.Expect(c.node(ctx, g, "mixed-1").Status.NodeInfo.KubeletVersion).To(Equal("v1.33.4+k3s1"))

	c.moveLeader(ctx, g, "mixed-0")
	g.Expect(c.sim.Quiesced(c.etcd.MemberOnNode("mixed-2").Kill)).To(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(c.reason(ctx, g, "mixed-2")).To(Equal(ReasonMemberNotLearner), "the 1.28.4 leader checks no health")
	}, 3*testCallTimeout, pollInterval).Should(Succeed())

	c.moveLeader(ctx, g, "mixed-1")
	g.Eventually(func(g Gomega) {
		g.Expect(c.reason(ctx, g, "mixed-2")).To(Equal(ReasonUnhealthy), "the 1.33.4 leader checks health")
	}, waitTimeout, pollInterval).Should(Succeed())
}

// TestSimulator_addressChange: a server whose address changed after its member joined gets a
// removed-node-name from K3s although its member stays in etcd, and its metadata controller
// writes node-name back.
func TestSimulator_addressChange(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	c := startK3sCluster(ctx, t, "v1.33.4+k3s1", "addr", 3)
	c.waitReady(ctx, g)
	keys := c.profile.Keys
	follower := c.follower(ctx, g)
	name, _ := c.sim.MemberName(follower)

	g.Expect(c.sim.ChangeAddress(ctx, follower, "127.0.0.99")).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.annotations(ctx, g, follower)).To(HaveKeyWithValue(keys.NodeAddress, "127.0.0.99"))
	}, waitTimeout, pollInterval).Should(Succeed())
	c.annotate(ctx, g, follower, keys.Remove, "true")
	g.Eventually(func(g Gomega) {
		g.Expect(c.annotations(ctx, g, follower)).To(HaveKeyWithValue(keys.RemovedNodeName, name), "K3s claims the removal")
	}, waitTimeout, pollInterval).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.annotations(ctx, g, follower)).To(HaveKeyWithValue(keys.NodeName, name), "the running server writes node-name back")
	}, waitTimeout, pollInterval).Should(Succeed())
	g.Expect(c.members(ctx, g)).To(HaveKey(name), "the member was never removed")
	g.Expect(c.readyStatus(ctx, g, follower)).To(Equal(corev1.ConditionTrue))
}

// TestSimulator_clusterReset: `--cluster-reset` leaves the survivor as the only member under a
// new name and deletes remove and removed-node-name on every etcd Node.
func TestSimulator_clusterReset(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	c := startK3sCluster(ctx, t, "v1.33.4+k3s1", "reset", 2)
	c.waitReady(ctx, g)
	keys := c.profile.Keys
	survivor, other := c.nodes[0], c.nodes[1]
	old, _ := c.sim.MemberName(survivor)
	oldID := c.members(ctx, g)[old].ID
	c.sim.StopMemberController()
	c.annotate(ctx, g, survivor, keys.Remove, "true")
	c.annotate(ctx, g, other, keys.RemovedNodeName, "something-earlier")

	renamed, err := c.sim.ClusterReset(ctx, survivor)
	g.Expect(err).ToNot(HaveOccurred())
	g.Expect(renamed).To(MatchRegexp("^" + survivor + "-[0-9a-f]{8}$"))
	g.Expect(renamed).ToNot(Equal(old))
	g.Expect(c.annotations(ctx, g, survivor)).ToNot(HaveKey(keys.Remove))
	g.Expect(c.annotations(ctx, g, other)).ToNot(HaveKey(keys.RemovedNodeName))
	g.Eventually(func(g Gomega) {
		g.Expect(c.annotations(ctx, g, survivor)).To(HaveKeyWithValue(keys.NodeName, renamed))
	}, waitTimeout, pollInterval).Should(Succeed())
	members := c.members(ctx, g)
	g.Expect(members).To(HaveLen(1))
	g.Expect(members[old].ID).To(Equal(oldID), "the same member, which the simulated K3s shows as "+renamed)
	_, running := c.sim.MemberName(other)
	g.Expect(running).To(BeFalse())
}

// TestSimulator_unhealthyClusterRefusal: removing a healthy member while another is down is
// refused by etcd as "unhealthy cluster"; K3s requeues it, remove=true stays as a standing
// order, and the member is removed once the cluster recovered.
func TestSimulator_unhealthyClusterRefusal(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	c := startK3sCluster(ctx, t, "v1.34.2+k3s1", "unhealthy", 3)
	c.waitReady(ctx, g)
	keys := c.profile.Keys
	leader := c.leaderNode(g)
	var down, target string
	for _, n := range c.nodes {
		switch {
		case n == leader:
		case down == "":
			down = n
		default:
			target = n
		}
	}
	name, _ := c.sim.MemberName(target)
	g.Expect(c.sim.Quiesced(c.etcd.MemberOnNode(down).Kill)).To(Succeed())
	c.annotate(ctx, g, target, keys.Remove, "true")
	g.Consistently(func(g Gomega) {
		ann := c.annotations(ctx, g, target)
		g.Expect(ann).To(HaveKeyWithValue(keys.Remove, "true"))
		g.Expect(ann).ToNot(HaveKey(keys.RemovedNodeName))
	}, 3*time.Second, pollInterval).Should(Succeed())
	g.Expect(c.members(ctx, g)).To(HaveKey(name))
	// Each failed sync waits on etcd calls to the dead member, so the first requeues can take a
	// while on a loaded machine.
	g.Eventually(func() int { return c.sim.Requeues(target) }, 3*waitTimeout, pollInterval).Should(BeNumerically(">", 0), "K3s requeues the refusal")
	g.Expect(c.annotations(ctx, g, target)).To(HaveKeyWithValue(keys.Remove, "true"), "a standing order")

	g.Expect(c.etcd.MemberOnNode(down).Restart(ctx)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.annotations(ctx, g, target)).To(HaveKeyWithValue(keys.RemovedNodeName, name))
	}, waitTimeout, pollInterval).Should(Succeed())
	g.Expect(c.members(ctx, g)).ToNot(HaveKey(name), "the standing order was carried out")
}

// TestSimulator_learnerVisibility: a joining server that runs an apiserver shows no node-name
// until its learner is promoted; an etcd-only server shows MemberIsLearner.
func TestSimulator_learnerVisibility(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	c := startK3sCluster(ctx, t, "v1.33.4+k3s1", "learn", 1)
	c.waitReady(ctx, g)
	keys := c.profile.Keys

	c.sim.HoldPromotion()
	name, err := c.sim.JoinServer(ctx, "learn-1", "127.0.0.21")
	g.Expect(err).ToNot(HaveOccurred())
	g.Expect(c.members(ctx, g)[name].IsLearner).To(BeTrue())
	g.Consistently(func(g Gomega) {
		g.Expect(c.annotations(ctx, g, "learn-1")).ToNot(HaveKey(keys.NodeName))
	}, 4*testTick, pollInterval).Should(Succeed())
	c.sim.ReleasePromotion()
	g.Eventually(func(g Gomega) {
		g.Expect(c.annotations(ctx, g, "learn-1")).To(HaveKeyWithValue(keys.NodeName, name))
		g.Expect(c.reason(ctx, g, "learn-1")).To(Equal(ReasonMemberNotLearner))
	}, waitTimeout, pollInterval).Should(Succeed())

	c.sim.HoldPromotion()
	etcdOnly, err := c.sim.JoinEtcdOnlyServer(ctx, "learn-2", "127.0.0.22")
	g.Expect(err).ToNot(HaveOccurred())
	g.Eventually(func(g Gomega) {
		n := c.node(ctx, g, "learn-2")
		g.Expect(n.Annotations).To(HaveKeyWithValue(keys.NodeName, etcdOnly))
		g.Expect(n.Labels).ToNot(HaveKey(ControlPlaneRoleLabel))
		g.Expect(c.reason(ctx, g, "learn-2")).To(Equal(ReasonMemberIsLearner))
	}, waitTimeout, pollInterval).Should(Succeed())
}

// TestSimulator_tombstoneBlocksRestart: a K3s that refuses to start after its member was
// removed does not come back on its own.
func TestSimulator_tombstoneBlocksRestart(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	c := startK3sCluster(ctx, t, "v1.34.2+k3s1", "tomb", 2, func(o *Options) { o.TombstoneBlocksRestart = true })
	c.waitReady(ctx, g)
	keys := c.profile.Keys
	follower := c.follower(ctx, g)
	name, _ := c.sim.MemberName(follower)
	c.annotate(ctx, g, follower, keys.Remove, "true")
	g.Eventually(func(g Gomega) {
		g.Expect(c.annotations(ctx, g, follower)).To(HaveKeyWithValue(keys.RemovedNodeName, name))
	}, waitTimeout, pollInterval).Should(Succeed())
	_, err := c.sim.RestartServer(ctx, follower)
	g.Expect(err).To(MatchError(ErrTombstone))
	g.Expect(c.readyStatus(ctx, g, follower)).ToNot(Equal(corev1.ConditionTrue))
	g.Expect(c.members(ctx, g)).To(HaveLen(1))
}
