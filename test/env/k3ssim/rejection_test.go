package k3ssim

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
)

// TestSimulator_rejectionNotEnoughStartedMembers: etcd rejects removing a running follower
// when the remaining voters would have too few started members, here because a third voter
// was added but never started. K3s 1.28.3+ then deletes `remove` and writes no
// removed-node-name (K3s PR 8392); older K3s requeues it like any other error.
func TestSimulator_rejectionNotEnoughStartedMembers(t *testing.T) {
	for _, version := range []string{"v1.26.5+k3s1", "v1.33.4+k3s1", "v1.34.2+k3s1"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			ctx := context.Background()
			c := startK3sCluster(ctx, t, version, nodePrefix("reject", version), 2)
			c.waitReady(ctx, g)
			keys := c.profile.Keys

			// etcd refuses to add a voter until the peers have been connected for its health
			// interval (5 s), so this is retried.
			cli, err := c.etcd.NewClient(ctx)
			g.Expect(err).ToNot(HaveOccurred())
			defer func() { _ = cli.Close() }()
			g.Eventually(func() error {
				_, err := cli.MemberAdd(ctx, []string{"https://127.0.0.99:1"})
				return err
			}, waitTimeout, pollInterval).Should(Succeed())

			follower := c.nodes[0]
			if follower == c.leaderNode(g) {
				follower = c.nodes[1]
			}
			name := c.annotations(ctx, g, follower)[keys.NodeName]
			before := c.sim.Requeues(follower)
			c.annotate(ctx, g, follower, keys.Remove, "true")

			if c.profile.Removal == RemovalLegacy {
				g.Eventually(func() int { return c.sim.Requeues(follower) }, waitTimeout, pollInterval).Should(BeNumerically(">=", before+2))
				g.Expect(c.annotations(ctx, g, follower)).To(HaveKeyWithValue(keys.Remove, "true"))
			} else {
				g.Eventually(func() map[string]string { return c.annotations(ctx, g, follower) }, waitTimeout, pollInterval).
					ShouldNot(HaveKey(keys.Remove))
			}
			g.Expect(c.annotations(ctx, g, follower)).To(And(HaveKeyWithValue(keys.NodeName, name), Not(HaveKey(keys.RemovedNodeName))))
			g.Expect(c.members(ctx, g)).To(HaveKey(name))
		})
	}
}
