package etcdcluster

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// answers reports whether the member answers MemberList within a second.
func answers(ctx context.Context, m *Member) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err := memberList(ctx, m)
	return err == nil
}

func TestMember_Stop(t *testing.T) {
	g := NewWithT(t)
	c := startCluster(t, 3)
	m := c.Members()[1]

	g.Expect(m.Stop()).To(Succeed())
	g.Expect(m.Running()).To(BeFalse())
	g.Expect(answers(t.Context(), m)).To(BeFalse())
	g.Expect(answers(t.Context(), c.Members()[0])).To(BeTrue(), "the other members keep quorum")
	g.Expect(m.Stop()).To(Succeed(), "stopping a stopped member is a no-op")
	g.Expect(c.StopMember(t.Context(), c.Members()[2].Name())).To(Succeed())
	g.Expect(c.StopMember(t.Context(), "nope")).NotTo(Succeed())
}

func TestMember_Restart(t *testing.T) {
	for _, tt := range []struct {
		name string
		stop func(*Member) error
	}{
		{name: "after Stop", stop: (*Member).Stop},
		{name: "after Kill", stop: (*Member).Kill},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			c := startCluster(t, 3)
			m := c.Members()[0]
			id := m.ID()

			g.Expect(tt.stop(m)).To(Succeed())
			g.Expect(answers(t.Context(), m)).To(BeFalse())

			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			g.Expect(m.Restart(ctx)).To(Succeed())
			resp, err := memberList(ctx, m)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(resp.Header.MemberId).To(Equal(id), "same member ID")
			g.Expect(resp.Members).To(HaveLen(3))
		})
	}
}

func TestMember_Kill_leader(t *testing.T) {
	g := NewWithT(t)
	c := startCluster(t, 3)
	leader, err := c.Leader()
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(leader.Kill()).To(Succeed())
	g.Expect(answers(t.Context(), leader)).To(BeFalse())
	// The survivors elect a new leader on their own: Kill did not hand leadership over. "No
	// leader" (ID 0) is not a new leader.
	g.Eventually(func(g Gomega) {
		now, err := c.Leader()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(now.ID()).NotTo(Equal(leader.ID()))
	}, 10*time.Second).Should(Succeed(), "a running member other than the old leader leads")
}

func TestMember_Wipe(t *testing.T) {
	g := NewWithT(t)
	c := startCluster(t, 3)
	m := c.Members()[2]

	g.Expect(m.Wipe()).To(Succeed())
	g.Expect(m.Wiped()).To(BeTrue())
	g.Expect(m.DataDir()).NotTo(BeADirectory())
	g.Expect(answers(t.Context(), m)).To(BeFalse())
	g.Expect(m.Restart(t.Context())).To(MatchError(ErrWiped))

	resp, err := memberList(t.Context(), c.Members()[0])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Members).To(HaveLen(3), "the wiped member is still a member")
}

func TestCluster_RaiseNoSpace(t *testing.T) {
	g := NewWithT(t)
	c := startCluster(t, 3)
	m := c.Members()[1]

	g.Expect(c.RaiseNoSpace(t.Context(), m.Name())).To(Succeed())
	for _, other := range c.Members() {
		cli, err := other.NewClient(t.Context())
		g.Expect(err).NotTo(HaveOccurred())
		resp, err := cli.AlarmList(t.Context())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.Alarms).To(ConsistOf(&pb.AlarmMember{MemberID: m.ID(), Alarm: pb.AlarmType_NOSPACE}))
		_, err = cli.Put(t.Context(), "k", "v")
		g.Expect(err).To(MatchError(ContainSubstring("database space exceeded")))
		g.Expect(cli.Close()).To(Succeed())
	}

	g.Expect(c.RaiseNoSpace(t.Context(), "nobody")).To(MatchError(ContainSubstring("no etcd member nobody")))
}

// TestCluster_alarmsConfirmedOnEveryMember checks the alarm handles against each member asked
// alone, with one member stopped (its Node down): the running members are asked, the stopped
// one is not, and disarming leaves no alarm anywhere, so writes work again.
func TestCluster_alarmsConfirmedOnEveryMember(t *testing.T) {
	g := NewWithT(t)
	c := startCluster(t, 3)
	alarmed, stopped := c.Members()[0], c.Members()[2]
	g.Expect(stopped.Stop()).To(Succeed())

	g.Expect(c.RaiseNoSpace(t.Context(), alarmed.Name())).To(Succeed())
	byMember, err := c.AlarmsByMember(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	want := []*pb.AlarmMember{{MemberID: alarmed.ID(), Alarm: pb.AlarmType_NOSPACE}}
	g.Expect(byMember).To(Equal(map[string][]*pb.AlarmMember{
		c.Members()[0].Name(): want,
		c.Members()[1].Name(): want,
	}))

	g.Expect(c.DisarmAlarms(t.Context())).To(Succeed())
	byMember, err = c.AlarmsByMember(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(byMember).To(HaveLen(2))
	for name, alarms := range byMember {
		g.Expect(alarms).To(BeEmpty(), "member %s", name)
	}
	cli, err := c.NewClient(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = cli.Close() }()
	_, err = cli.Put(t.Context(), "k", "v")
	g.Expect(err).NotTo(HaveOccurred())
}

func TestCluster_AddDuplicate(t *testing.T) {
	g := NewWithT(t)
	c := startCluster(t, 3)
	orig := c.Members()[1]

	dup, err := c.AddDuplicate(t.Context(), orig.NodeName())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(dup.Running()).To(BeFalse(), "the old member does not run")
	g.Expect(c.MemberOnNode(orig.NodeName())).To(BeIdenticalTo(orig), "the Node's member is still the running one")
	resp, err := memberList(t.Context(), c.Members()[0])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Members).To(HaveLen(4))
	var named []uint64
	for _, m := range resp.Members {
		if m.Name == orig.Name() {
			named = append(named, m.ID)
			g.Expect(m.IsLearner).To(BeFalse(), "a voter, as the never-removed old member was")
		}
	}
	g.Expect(named).To(ConsistOf(orig.ID(), dup.ID()), "two members carry the name")
	g.Expect(dup.PeerURL()).NotTo(Equal(orig.PeerURL()))
	g.Expect(answers(t.Context(), orig)).To(BeTrue())
}

func TestCluster_AddGhostLearnerOn(t *testing.T) {
	g := NewWithT(t)
	c := startCluster(t, 3)

	id, peerURL, err := c.AddGhostLearnerOn(t.Context(), "127.0.0.9")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(peerURL).To(HavePrefix("https://127.0.0.9:"))
	resp, err := memberList(t.Context(), c.Members()[0])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Members).To(ContainElement(And(HaveField("ID", id), HaveField("PeerURLs", ConsistOf(peerURL)))))
}

func TestCluster_AddGhostLearner(t *testing.T) {
	g := NewWithT(t)
	c := startCluster(t, 3)

	id, peerURL, err := c.AddGhostLearner(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := memberList(t.Context(), c.Members()[0])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Members).To(HaveLen(4))
	g.Expect(resp.Members).To(ContainElement(And(
		HaveField("ID", id), HaveField("Name", ""), HaveField("IsLearner", true),
		HaveField("PeerURLs", ConsistOf(peerURL)), HaveField("ClientURLs", BeEmpty()))))

	_, err = c.AddLearner(t.Context(), MemberSpec{NodeName: "late"})
	g.Expect(err).To(MatchError(ContainSubstring("too many learner")), "etcd allows one learner")
}

func TestCluster_StartSeparate(t *testing.T) {
	g := NewWithT(t)
	c := startCluster(t, 3)
	node := c.Members()[0].NodeName()

	s, err := c.StartSeparate(t.Context(), node)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Members()).To(HaveLen(1))
	g.Expect(s.Members()[0].NodeName()).To(Equal(node))

	mainID, err := c.ClusterID(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	otherID, err := s.ClusterID(t.Context())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(otherID).NotTo(Equal(mainID))

	// The separate cluster trusts the same client certificate and CA.
	cfg, err := c.ClientConfig(s.Members()[0].ClientURL())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(connectAndList(t.Context(), cfg)).To(Succeed())
}

func TestCluster_AddLearner(t *testing.T) {
	g := NewWithT(t)
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()

	// As a K3s server that rejoins under a new member name, on its own address.
	g.Expect(c.JoinLearner(ctx, "node-0-5d1f2a", "127.0.0.2")).To(Succeed())
	m := c.Member("node-0-5d1f2a")
	g.Expect(m).NotTo(BeNil())
	g.Expect(m.PeerURL()).To(HavePrefix("https://127.0.0.2:"))
	g.Expect(isLearner(ctx, g, c, m.ID())).To(BeTrue())

	g.Expect(c.PromoteMember(ctx, m.Name())).To(Succeed())
	g.Expect(isLearner(ctx, g, c, m.ID())).To(BeFalse())
	resp, err := memberList(ctx, m)
	g.Expect(err).NotTo(HaveOccurred(), "the promoted member serves clients")
	g.Expect(resp.Members).To(HaveLen(4))
}

// isLearner reports whether member id is a learner.
func isLearner(ctx context.Context, g *WithT, c *Cluster, id uint64) bool {
	members, err := c.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	for _, m := range members {
		if m.ID == id {
			return m.IsLearner
		}
	}
	g.Expect(id).To(BeNil(), "member not found")
	return false
}

func TestMember_removed(t *testing.T) {
	g := NewWithT(t)
	c := startCluster(t, 3)
	m := c.Members()[2]
	cli, err := c.NewClient(t.Context(), c.Members()[0].ClientURL())
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = cli.Close() }()

	// etcd's strict reconfiguration check refuses removals for a few seconds after start.
	g.Eventually(func() error {
		_, err := cli.MemberRemove(t.Context(), m.ID())
		return err
	}, 10*time.Second, 200*time.Millisecond).Should(Succeed())
	g.Eventually(m.Running, 5*time.Second).Should(BeFalse(), "a removed member stops itself")
	g.Expect(m.Stop()).To(Succeed())
}
