package k3ssim

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-adapter/etcd-adapter/test/env/kubelet"
)

// TestStandInKubelets: with the kubelet stand-ins of test/env/kubelet keeping the Nodes
// Ready, a removed server's Node goes NotReady (Unknown) and comes back Ready when the server
// rejoins, while kubeletVersion stays the simulated K3s version.
func TestStandInKubelets(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	const version, prefix = "v1.34.2+k3s1", "standin"
	standIns := NewStandInKubelets()
	for i := range 2 {
		k, err := kubelet.Start(ctx, kubelet.Options{
			NodeName: fmt.Sprintf("%s-%d", prefix, i), Config: workload.Config,
			KubeletVersion: version, HeartbeatInterval: 200 * time.Millisecond,
		})
		g.Expect(err).ToNot(HaveOccurred())
		t.Cleanup(func() { _ = k.Stop() })
		standIns.Add(k)
	}
	c := startK3sCluster(ctx, t, version, prefix, 2, func(o *Options) { o.Kubelet = standIns })
	c.waitReady(ctx, g)
	follower := c.nodes[0]
	if follower == c.leaderNode(g) {
		follower = c.nodes[1]
	}
	g.Expect(c.readyStatus(ctx, g, follower)).To(Equal(corev1.ConditionTrue))

	c.annotate(ctx, g, follower, c.profile.Keys.Remove, "true")
	g.Eventually(func() map[string]string { return c.annotations(ctx, g, follower) }, waitTimeout, pollInterval).
		Should(HaveKey(c.profile.Keys.RemovedNodeName))
	g.Eventually(func() corev1.ConditionStatus { return c.readyStatus(ctx, g, follower) }, waitTimeout, pollInterval).
		Should(Equal(corev1.ConditionUnknown))

	_, err := c.sim.RestartServer(ctx, follower)
	g.Expect(err).ToNot(HaveOccurred())
	g.Eventually(func() corev1.ConditionStatus { return c.readyStatus(ctx, g, follower) }, waitTimeout, pollInterval).
		Should(Equal(corev1.ConditionTrue))
	g.Consistently(func(g Gomega) string { return c.node(ctx, g, follower).Status.NodeInfo.KubeletVersion }, 4*testTick, pollInterval).
		Should(Equal(version))
}
