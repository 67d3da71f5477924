package k3sbackend_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/k3s"
	"github.com/etcd-adapter/etcd-adapter/test/env"
)

// TestBackend_clusterCache runs the backend as a controller under a management cluster would:
// reads from CAPI's ClusterCache (GetReader), writes through its uncached client, and is
// woken by a Watch on the workload cluster's Node informer (Backend.Watcher).
func TestBackend_clusterCache(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	mgmt, err := env.StartManagement(ctx)
	g.Expect(err).ToNot(HaveOccurred())
	t.Cleanup(func() { _ = mgmt.Stop() })
	c := startCluster(t, "v1.34.2+k3s1", 3, clusterOptions{})
	cluster, err := env.RegisterCluster(ctx, mgmt.Client, env.ClusterInput{Namespace: "default", Name: "k3s", Workload: c.api.Config})
	g.Expect(err).ToNot(HaveOccurred())
	key := client.ObjectKeyFromObject(cluster)

	var reader client.Reader
	g.Eventually(func() error {
		reader, err = mgmt.ClusterCache.GetReader(ctx, key)
		return err
	}, waitTimeout, pollInterval).Should(Succeed())
	live, err := mgmt.ClusterCache.GetUncachedClient(ctx, key)
	g.Expect(err).ToNot(HaveOccurred())
	b, err := k3s.New(k3s.Config{Client: live, Reader: reader, HeartbeatInterval: testHeartbeat, Tick: testTick, ClockSkew: time.Second})
	g.Expect(err).ToNot(HaveOccurred())
	g.Expect(mgmt.ClusterCache.Watch(ctx, key, b.Watcher())).To(Succeed())

	s, err := b.Observe(ctx)
	g.Expect(err).ToNot(HaveOccurred())
	g.Expect(s.Members).To(HaveLen(3))
	node := c.follower(g)
	wait, cancel := context.WithTimeout(ctx, waitTimeout)
	defer cancel()
	r, err := b.WaitForRemoval(wait, c.memberOf(node))
	g.Expect(err).ToNot(HaveOccurred())
	g.Expect(r.State).To(Equal(etcd.RemovalRemoved), r.Reason)
	name, _ := c.sim.MemberName(node)
	g.Expect(c.hasMember(g, name)).To(BeFalse())
}
