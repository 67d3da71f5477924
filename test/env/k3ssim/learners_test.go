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
