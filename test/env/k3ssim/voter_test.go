package k3ssim

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestSimulator_etcdIsVoter checks the reasons that need a fault: a stopped member and an etcd
// Node that matches no member, on a version with and one without the health reasons.
func TestSimulator_etcdIsVoter(t *testing.T) {
	tests := []struct {
		version string
		// stoppedReason is the reason of a stopped member's Node.
		stoppedReason string
		// ghostReason is the reason of an etcd Node without member; "" means no condition.
		ghostReason string
	}{
		{"v1.33.4+k3s1", ReasonUnhealthy, ReasonNotAMember},
		{"v1.28.4+k3s1", ReasonMemberNotLearner, ""},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			ctx := context.Background()
			c := startK3sCluster(ctx, t, tt.version, nodePrefix("voter", tt.version), 3)
			c.waitReady(ctx, g)

			ghost := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: c.nodes[0][:len(c.nodes[0])-1] + "9", Labels: map[string]string{
				EtcdRoleLabel: "true", clusterLabel: c.sim.opts.ClusterLabels[clusterLabel],
			}}}
			g.Expect(c.client.Create(ctx, ghost)).To(Succeed())

			leader := c.leaderNode(g)
			stopped := c.nodes[0]
			if stopped == leader {
				stopped = c.nodes[1]
			}
			name, _ := c.sim.MemberName(stopped)
			g.Expect(c.etcd.StopMember(ctx, name)).To(Succeed())

			if tt.stoppedReason == ReasonUnhealthy {
				g.Eventually(func(g Gomega) {
					cond := voterCondition(c.node(ctx, g, stopped))
					g.Expect(cond).ToNot(BeNil())
					g.Expect(cond.Reason).To(Equal(ReasonUnhealthy))
					g.Expect(cond.Status).To(Equal(corev1.ConditionFalse))
					g.Expect(cond.Message).To(HavePrefix("failed to check etcd member status: "))
				}, waitTimeout, pollInterval).Should(Succeed())
				t.Logf("Unhealthy message: %s", voterCondition(c.node(ctx, g, stopped)).Message)
			} else {
				g.Consistently(func() string { return c.reason(ctx, g, stopped) }, 3*testCallTimeout, pollInterval).Should(Equal(tt.stoppedReason))
			}
			if tt.ghostReason != "" {
				g.Eventually(func(g Gomega) {
					cond := voterCondition(c.node(ctx, g, ghost.Name))
					g.Expect(cond).ToNot(BeNil())
					g.Expect(cond.Status).To(Equal(corev1.ConditionFalse))
					g.Expect(cond.Message).To(Equal(MessageNotAMember))
				}, waitTimeout, pollInterval).Should(Succeed())
			} else {
				g.Consistently(func() string { return c.reason(ctx, g, ghost.Name) }, 4*testTick, pollInterval).Should(BeEmpty())
			}

			g.Expect(c.etcd.Member(name).Restart(ctx)).To(Succeed())
			g.Eventually(func() string { return c.reason(ctx, g, stopped) }, waitTimeout, pollInterval).Should(Equal(ReasonMemberNotLearner))
		})
	}
}

// TestSimulator_staleHeartbeat shows K3s's heartbeat rule: an unchanged EtcdIsVoter is
// re-written only every heartbeat interval, and stops moving when the leader's writer stops.
func TestSimulator_staleHeartbeat(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const heartbeat = 2 * time.Second
	c := startK3sCluster(ctx, t, "v1.33.4+k3s1", "heartbeat", 3, func(o *Options) { o.HeartbeatInterval = heartbeat })
	c.waitReady(ctx, g)
	node := c.nodes[0]
	beat := func(g Gomega) time.Time { return voterCondition(c.node(ctx, g, node)).LastHeartbeatTime.Time }

	first := beat(g)
	g.Eventually(beat, 3*heartbeat, pollInterval).Should(BeTemporally(">", first), "the heartbeat moves while the writer runs")
	moved := beat(g)
	g.Eventually(beat, 3*heartbeat, pollInterval).Should(BeTemporally(">", moved))
	// Heartbeats are stored in whole seconds and a write happens once now - stored >= the
	// interval, so consecutive stored heartbeats are at least one interval apart, not a tick.
	g.Expect(beat(g).Sub(moved)).To(BeNumerically(">=", heartbeat), "an unchanged condition is not re-written every tick")

	c.sim.StopConditionWriter()
	stale := beat(g)
	g.Consistently(beat, 2*heartbeat, pollInterval).Should(Equal(stale))
	g.Expect(time.Since(stale)).To(BeNumerically(">", heartbeat), "the heartbeat is stale")
	g.Expect(voterCondition(c.node(ctx, g, node)).Reason).To(Equal(ReasonMemberNotLearner), "the stale condition still says voter")

	c.sim.StartConditionWriter()
	g.Eventually(beat, 2*heartbeat, pollInterval).Should(BeTemporally(">", stale))
}
