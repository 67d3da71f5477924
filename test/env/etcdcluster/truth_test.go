package etcdcluster

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// TestCluster_Leader checks the in-process leader probe against what each member answers over
// its client port (the Status RPC), before and after the leader stops.
func TestCluster_Leader(t *testing.T) {
	g := NewWithT(t)
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	leader, err := c.Leader()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(statusLeaders(ctx, g, c)).To(HaveEach(leader.ID()))

	g.Expect(leader.Stop()).To(Succeed())
	g.Eventually(func(g Gomega) {
		now, err := c.Leader()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(now.ID()).NotTo(Equal(leader.ID()))
		g.Expect(statusLeaders(ctx, g, c)).To(HaveEach(now.ID()))
	}, 30*time.Second).Should(Succeed())
}

// statusLeaders is the leader each running member reports over the Status RPC.
func statusLeaders(ctx context.Context, g Gomega, c *Cluster) []uint64 {
	var out []uint64
	for _, m := range c.Members() {
		if !m.Running() {
			continue
		}
		cli, err := m.NewClient(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		resp, err := cli.Status(ctx, m.ClientURL())
		_ = cli.Close()
		g.Expect(err).NotTo(HaveOccurred())
		out = append(out, resp.Leader)
	}
	g.Expect(out).NotTo(BeEmpty())
	return out
}

// TestCluster_MemberList checks the committed member list, through the cluster and through one
// member, and that a stopped member is still in it (stopping is not removal).
func TestCluster_MemberList(t *testing.T) {
	g := NewWithT(t)
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	names := func(ms []*pb.Member) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m.Name)
		}
		return out
	}

	got, err := c.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(got)).To(ConsistOf("node-0", "node-1", "node-2"))

	g.Expect(c.Member("node-2").Stop()).To(Succeed())
	got, err = c.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(got)).To(ConsistOf("node-0", "node-1", "node-2"), "a stopped member is still a member")

	got, err = c.Member("node-0").MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(names(got)).To(ConsistOf("node-0", "node-1", "node-2"))
}
