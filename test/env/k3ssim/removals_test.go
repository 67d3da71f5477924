package k3ssim

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
)

// TestSimulator_removalAppliedButUnanswered: etcd applies a MemberRemove and still fails the
// call when the request reached the member being removed ("etcdserver: server stopped"). The
// member is gone all the same: its server stops, and it is listed among the removals exactly
// once, not again when the requeued pass finds it gone. A MemberRemove that failed and was not
// applied is not counted until a later pass removes the member.
func TestSimulator_removalAppliedButUnanswered(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	c := startK3sCluster(ctx, t, "v1.34.2+k3s1", "unanswered", 4)
	c.waitReady(ctx, g)

	followers := c.followers(ctx, g)
	applied, notApplied := followers[0], followers[1]
	name, _ := c.sim.MemberName(applied)
	m := c.members(ctx, g)[name]
	cli, err := c.etcd.NewClient(ctx)
	g.Expect(err).ToNot(HaveOccurred())
	defer func() { _ = cli.Close() }()
	// Note: Eventually, because etcd refuses to remove a member until the others have been
	// connected for a while ("etcdserver: unhealthy cluster").
	g.Eventually(func() error { _, err := cli.MemberRemove(ctx, m.ID); return err }, waitTimeout, pollInterval).Should(Succeed())

	c.sim.opMu.Lock()
	c.sim.removalUnanswered(ctx, m)
	c.sim.opMu.Unlock()
	g.Expect(c.sim.MemberRemovals()).To(Equal([]string{name}))
	_, running := c.sim.MemberName(applied)
	g.Expect(running).To(BeFalse(), "the removed server stops")

	g.Expect(c.sim.removePeer(ctx, name, c.ips[applied])).To(Succeed(), "the requeued pass finds the member gone")
	g.Expect(c.sim.MemberRemovals()).To(Equal([]string{name}), "counted once")

	other, _ := c.sim.MemberName(notApplied)
	c.sim.opMu.Lock()
	c.sim.removalUnanswered(ctx, c.members(ctx, g)[other])
	c.sim.opMu.Unlock()
	g.Expect(c.sim.MemberRemovals()).To(Equal([]string{name}), "a member still listed is not counted")
	_, running = c.sim.MemberName(notApplied)
	g.Expect(running).To(BeTrue())

	g.Eventually(func() error { return c.sim.removePeer(ctx, other, c.ips[notApplied]) }, waitTimeout, pollInterval).Should(Succeed())
	g.Expect(c.sim.MemberRemovals()).To(Equal([]string{name, other}))
	g.Expect(c.members(ctx, g)).ToNot(HaveKey(other))
}
