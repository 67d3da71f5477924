package k3sbackend_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/k3s"
	"github.com/etcd-adapter/etcd-adapter/test/env/k3ssim"
)

// TestBackend_addressChanged: the Node's address changed after its member joined, so K3s finds
// no member at node-address, counts that as removed and writes removed-node-name, while the
// member stays in etcd and its server writes node-name back. The backend never says Removed.
func TestBackend_addressChanged(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	c := startCluster(t, "v1.33.4+k3s1", 3, clusterOptions{})
	node := c.follower(g)
	m := c.memberOf(node)
	g.Expect(c.sim.ChangeAddress(ctx, node, "127.0.0.99")).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.node(g, node).Annotations).To(HaveKeyWithValue(c.keys.NodeAddress, "127.0.0.99"))
	}, waitTimeout, pollInterval).Should(Succeed())

	r, err := c.backend.WaitForRemoval(ctx, m)
	g.Expect(err).ToNot(HaveOccurred())
	t.Logf("%s: %s", r.State, r.Reason)
	g.Expect(r.State).To(Equal(etcd.RemovalRejected), r.Reason)
	g.Expect(r.Reason).To(ContainSubstring("is still running"))
	g.Expect(c.hasMember(g, m.Name)).To(BeTrue())
	g.Consistently(func(g Gomega) {
		r, err := c.backend.RemoveMember(ctx, m)
		g.Expect(err).ToNot(HaveOccurred())
		g.Expect(r.State).ToNot(Equal(etcd.RemovalRemoved), r.Reason)
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
}

// TestBackend_clusterReset: a removal was requested, then `--cluster-reset` on that server
// renamed its member and wiped the removal annotations. The renamed member is the same member,
// so the recorded one is never reported Removed, and the survivor is the last member.
func TestBackend_clusterReset(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	c := startCluster(t, "v1.33.4+k3s1", 2, clusterOptions{})
	survivor := c.memberOf(c.nodes[0])
	c.sim.StopMemberController()
	r, err := c.backend.RemoveMember(ctx, survivor)
	g.Expect(err).ToNot(HaveOccurred())
	g.Expect(r.State).To(Equal(etcd.RemovalInProgress), r.Reason)

	renamed, err := c.sim.ClusterReset(ctx, c.nodes[0])
	g.Expect(err).ToNot(HaveOccurred())
	g.Expect(c.sim.StartMemberController(ctx)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.node(g, c.nodes[0]).Annotations).To(HaveKeyWithValue(c.keys.NodeName, renamed))
	}, waitTimeout, pollInterval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		r, err := c.backend.RemoveMember(ctx, survivor)
		g.Expect(err).ToNot(HaveOccurred())
		g.Expect(r.State).To(Equal(etcd.RemovalRejected), r.Reason)
		g.Expect(r.Reason).To(ContainSubstring("cluster reset"))
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())

	// The survivor is now the only member; the dead server's Node, marked NotAMember by K3s,
	// hosts none, so the survivor is never asked to go.
	now := etcd.Member{ID: k3s.MemberID(renamed), Name: renamed, NodeName: c.nodes[0]}
	g.Eventually(func(g Gomega) {
		r, err := c.backend.RemoveMember(ctx, now)
		g.Expect(err).ToNot(HaveOccurred())
		g.Expect(r.State).To(Equal(etcd.RemovalRejected), r.Reason)
		g.Expect(r.Reason).To(ContainSubstring("last etcd member"))
	}, waitTimeout, pollInterval).Should(Succeed())
	g.Expect(c.node(g, c.nodes[0]).Annotations).ToNot(HaveKey(c.keys.Remove))
}

// TestBackend_unhealthyClusterStandingOrder: with a member down, etcd refuses to remove another
// ("unhealthy cluster"); K3s keeps remove=true as a standing order, which the backend reports,
// and WithdrawRemoval withdraws, so the member stays when the cluster recovers.
func TestBackend_unhealthyClusterStandingOrder(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx := context.Background()
	c := startCluster(t, "v1.34.2+k3s1", 3, clusterOptions{})
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
	m := c.memberOf(target)
	g.Expect(c.sim.Quiesced(c.etcd.Member(c.memberOf(down).Name).Kill)).To(Succeed())
	g.Eventually(func(g Gomega) {
		r, err := c.backend.RemoveMember(ctx, m)
		g.Expect(err).ToNot(HaveOccurred())
		g.Expect(r.State).To(Equal(etcd.RemovalInProgress))
		g.Expect(r.Reason).To(ContainSubstring("unhealthy cluster"))
		g.Expect(r.Reason).To(ContainSubstring("standing order"))
	}, waitTimeout, pollInterval).Should(Succeed())

	g.Expect(c.backend.WithdrawRemoval(ctx, m)).To(Succeed())
	n := c.node(g, target)
	g.Expect(n.Annotations).ToNot(HaveKey(c.keys.Remove))
	g.Expect(n.Annotations).ToNot(HaveKey(k3s.RemovingMemberAnnotation))
	g.Expect(c.etcd.Member(c.memberOf(down).Name).Restart(ctx)).To(Succeed())
	g.Eventually(func(g Gomega) {
		s, err := c.backend.Observe(ctx)
		g.Expect(err).ToNot(HaveOccurred())
		g.Expect(healthOf(c.nodes)(s)).To(Equal(v1alpha1.EtcdClusterHealthyReason))
	}, waitTimeout, pollInterval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(c.hasMember(g, m.Name)).To(BeTrue(), "the withdrawn order is not carried out")
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
}

// TestBackend_mixedVersions: one server still runs 1.28.4, whose K3s checks no member health
// and may lead, so no member's health is read from Nodes, whichever version its own Node runs.
func TestBackend_mixedVersions(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	c := startCluster(t, "v1.33.4+k3s1", 3, clusterOptions{simTune: func(o *k3ssim.Options) {
		o.Versions = map[string]string{"cp-2": "v1.28.4+k3s1"}
	}})
	s, err := c.backend.Observe(context.Background())
	g.Expect(err).ToNot(HaveOccurred())
	g.Expect(s.Members).To(HaveLen(3))
	for _, ev := range s.Evidence {
		g.Expect(ev.Contact).To(Equal(etcd.ContactUnknown), ev.NodeName)
		g.Expect(ev.Error).To(ContainSubstring("v1.28.4+k3s1 (the oldest of the etcd servers' versions"))
	}
	v := etcd.CanRemoveMember(s, time.Now(), c.memberOf(c.nodes[0]))
	g.Expect(v.Allowed).To(BeFalse(), v.Message)
}

// TestBackend_rejoinedMemberRemovable: the Node still carries the record of the member removed
// earlier; the member that rejoined on it is removed on request all the same.
func TestBackend_rejoinedMemberRemovable(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	defer cancel()
	c := startCluster(t, "v1.34.2+k3s1", 3, clusterOptions{})
	node := c.follower(g)
	old := c.memberOf(node)
	r, err := c.backend.WaitForRemoval(ctx, old)
	g.Expect(err).ToNot(HaveOccurred())
	g.Expect(r.State).To(Equal(etcd.RemovalRemoved), r.Reason)

	renamed, err := c.sim.RestartServer(ctx, node)
	g.Expect(err).ToNot(HaveOccurred())
	var rejoined etcd.Member
	g.Eventually(func(g Gomega) {
		s, err := c.backend.Observe(ctx)
		g.Expect(err).ToNot(HaveOccurred())
		m, ok := s.MemberByNode(node)
		g.Expect(ok).To(BeTrue())
		g.Expect(m.Name).To(Equal(renamed))
		ev, _ := s.EvidenceFor(m.ID)
		g.Expect(ev.Contact).To(Equal(etcd.ContactAnswered), ev.Error)
		rejoined = m
	}, waitTimeout, pollInterval).Should(Succeed())
	g.Expect(c.node(g, node).Annotations).To(HaveKeyWithValue(k3s.RemovingMemberAnnotation, old.Name), "the old record is still there")

	r, err = c.backend.WaitForRemoval(ctx, rejoined)
	g.Expect(err).ToNot(HaveOccurred())
	g.Expect(r.State).To(Equal(etcd.RemovalRemoved), r.Reason)
	g.Expect(r.Member.Name).To(Equal(renamed))
	g.Expect(c.hasMember(g, renamed)).To(BeFalse())
}
