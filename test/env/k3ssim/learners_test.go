package k3ssim

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestSimulator_stalledLearner: the leader's K3s removes a learner whose applied index does
// not advance, here the leftover of a failed join that never started.
func TestSimulator_stalledLearner(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	c := startK3sCluster(ctx, t, "v1.33.4+k3s1", "stall", 1, func(o *Options) { o.LearnerStallTimeout = time.Second })
	c.waitReady(ctx, g)

	ghost, _, err := c.etcd.AddGhostLearner(ctx)
	g.Expect(err).ToNot(HaveOccurred())
	g.Expect(c.members(ctx, g)).To(HaveKey(""), "the ghost learner has no name")
	g.Eventually(func(g Gomega) {
		for _, m := range c.members(ctx, g) {
			g.Expect(m.ID).ToNot(Equal(ghost))
		}
	}, waitTimeout, pollInterval).Should(Succeed())
	g.Expect(c.members(ctx, g)).To(HaveLen(1))
}

// TestSimulator_joinServer: a new server joins as a learner under `<node>-<8 hex>`, gets its
// Node registered and annotated, and is promoted by the leader.
func TestSimulator_joinServer(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	c := startK3sCluster(ctx, t, "v1.34.2+k3s1", "join", 1)
	c.waitReady(ctx, g)

	node, ip := "join-1", "127.0.0.21"
	name, err := c.sim.JoinServer(ctx, node, ip)
	g.Expect(err).ToNot(HaveOccurred())
	g.Expect(name).To(MatchRegexp("^join-1-[0-9a-f]{8}$"))
	g.Expect(c.sim.Servers()).To(Equal([]string{"join-0", node}))
	g.Eventually(func(g Gomega) {
		n := c.node(ctx, g, node)
		g.Expect(n.Annotations).To(HaveKeyWithValue(c.profile.Keys.NodeName, name))
		g.Expect(n.Annotations).To(HaveKeyWithValue(c.profile.Keys.NodeAddress, ip))
		g.Expect(n.Labels).To(HaveKeyWithValue(clusterLabel, "join"))
		g.Expect(voterCondition(n)).ToNot(BeNil())
		g.Expect(voterCondition(n).Reason).To(Equal(ReasonMemberNotLearner))
	}, waitTimeout, pollInterval).Should(Succeed())
	g.Expect(c.members(ctx, g)[name].IsLearner).To(BeFalse())
}
