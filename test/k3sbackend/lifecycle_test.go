package k3sbackend_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/k3s"
)

// TestBackend_lifecycle walks every K3s version profile of the simulator through one 3-server
// cluster: observation, leader warnings, removal of a follower, repeated calls after success,
// a rejoin under a new member name, and a removal K3s refuses.
func TestBackend_lifecycle(t *testing.T) {
	for _, version := range profiles {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			started := time.Now()
			c := startCluster(t, version, 3, clusterOptions{})
			t.Logf("%s: cluster and backend ready in %v", version, time.Since(started).Round(time.Millisecond))
			l := &lifecycle{c: c}
			for _, step := range []struct {
				name string
				run  func(*testing.T)
			}{
				{"Observe reports the members K3s annotates, with health per version", l.observe},
				{"MoveLeader says who moves leadership on this version", l.moveLeader},
				{"RemoveMember on a follower is Removed once K3s writes removed-node-name", l.removeFollower},
				{"Calls after success, also from a restarted controller, report Removed and write nothing", l.removedAgain},
				{"A Node that rejoined under a new member name keeps its new member", l.rejoin},
				{"A removal etcd refuses while a member is down waits on K3s and says since when", l.waitsOnDownMember},
			} {
				if !t.Run(step.name, step.run) {
					return
				}
			}
		})
	}
}

type lifecycle struct {
	c *k3sCluster
	// removed is the Node whose member was removed; oldMember its member name.
	removed, oldMember string
}

// old is the removed member as a snapshot named it before the removal.
func (l *lifecycle) old() etcd.Member {
	return etcd.Member{ID: k3s.MemberID(l.oldMember), Name: l.oldMember, NodeName: l.removed}
}

func (l *lifecycle) observe(t *testing.T) {
	g := NewWithT(t)
	c := l.c
	v, _ := k3s.ParseVersion(c.version)
	s, err := c.backend.Observe(context.Background())
	g.Expect(err).ToNot(HaveOccurred())
	g.Expect(s.Backend).To(Equal("k3s"))
	g.Expect(s.BlindSpots).To(ContainElement(etcd.BlindSpotGhostMembers))
	g.Expect(s.SyntheticMemberIDs).To(BeTrue(), "K3s shows no etcd member IDs, so the snapshot must say its IDs are made up")
	g.Expect(s.Members).To(HaveLen(3))
	for _, node := range c.nodes {
		name, _ := c.sim.MemberName(node)
		m, ok := s.MemberByNode(node)
		g.Expect(ok).To(BeTrue(), node)
		g.Expect(m.Name).To(Equal(name))
		g.Expect(m.ID).To(Equal(k3s.MemberID(name)))
		g.Expect(m.PeerURLs).To(ConsistOf("https://" + c.ips[node] + ":2380"))
		ev, ok := s.EvidenceFor(m.ID)
		g.Expect(ok).To(BeTrue())
		switch {
		case !v.HasEtcdIsVoter():
			g.Expect(ev.Contact).To(Equal(etcd.ContactUnknown))
			g.Expect(ev.Error).To(ContainSubstring("writes no EtcdIsVoter condition"))
		case !v.HasHealthReasons():
			g.Expect(ev.Contact).To(Equal(etcd.ContactUnknown))
			g.Expect(ev.Error).To(ContainSubstring("checks no member health"))
		default:
			g.Expect(ev.Contact).To(Equal(etcd.ContactAnswered), ev.Error)
		}
	}
	verdict := etcd.AssessHealth(etcd.HealthInput{Snapshot: s, Now: time.Now(), Machines: machines(c.nodes)})
	t.Logf("%s: EtcdClusterHealthy=%s %s: %s", c.version, verdict.Cluster.Status, verdict.Cluster.Reason, verdict.Cluster.Message)
	if v.HasHealthReasons() {
		g.Expect(verdict.Cluster.Reason).To(Equal(v1alpha1.EtcdClusterHealthyReason))
	} else {
		g.Expect(verdict.Cluster.Reason).To(Equal(v1alpha1.EtcdClusterHealthUnknownReason))
	}
	g.Expect(verdict.Cluster.Message).To(ContainSubstring("ghost members"))
}

func machines(nodes []string) []etcd.Machine {
	var ms []etcd.Machine
	for _, n := range nodes {
		ms = append(ms, etcd.Machine{Name: "m-" + n, NodeName: n})
	}
	return ms
}

func (l *lifecycle) moveLeader(t *testing.T) {
	g := NewWithT(t)
	c := l.c
	v, _ := k3s.ParseVersion(c.version)
	move, err := c.backend.MoveLeader(context.Background(), c.memberOf(c.nodes[0]), c.memberOf(c.nodes[1]))
	g.Expect(err).ToNot(HaveOccurred())
	g.Expect(move.Outcome).To(Equal(etcd.LeaderMoveByBackend))
	if v.MovesLeader() {
		g.Expect(move.Warning).To(HavePrefix("done by K3s"))
	} else {
		g.Expect(move.Warning).To(ContainSubstring("causes a leader election"))
	}
	_, err = c.backend.MoveLeader(context.Background(), etcd.Member{Name: "x-00000000", NodeName: "no-such-node"}, c.memberOf(c.nodes[1]))
	g.Expect(err).To(MatchError(etcd.ErrInvalidInput))
}

func (l *lifecycle) removeFollower(t *testing.T) {
	g := NewWithT(t)
	c := l.c
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	l.removed = c.follower(g)
	l.oldMember, _ = c.sim.MemberName(l.removed)
	first, err := c.backend.RemoveMember(ctx, c.memberOf(l.removed))
	g.Expect(err).ToNot(HaveOccurred())
	g.Expect(first.State).To(BeElementOf(etcd.RemovalInProgress, etcd.RemovalRemoved))
	g.Expect(first.Member.Name).To(Equal(l.oldMember))

	started := time.Now()
	r, err := c.backend.WaitForRemoval(ctx, l.old())
	g.Expect(err).ToNot(HaveOccurred())
	t.Logf("%s: removal reported %s %v after the first call: %s", c.version, r.State, time.Since(started).Round(time.Millisecond), r.Reason)
	g.Expect(r.State).To(Equal(etcd.RemovalRemoved))
	g.Expect(r.Member.Name).To(Equal(l.oldMember))
	g.Expect(c.hasMember(g, l.oldMember)).To(BeFalse(), "etcd still lists the member")

	n := c.node(g, l.removed)
	g.Expect(n.Annotations).To(HaveKeyWithValue(k3s.RemovingMemberAnnotation, l.oldMember))
	g.Expect(n.Annotations).To(HaveKeyWithValue(c.keys.RemovedNodeName, l.oldMember))
	v, _ := k3s.ParseVersion(c.version)
	if v.KeepsRemoveAfterSuccess() {
		g.Expect(n.Annotations).To(HaveKeyWithValue(c.keys.Remove, "true"))
	} else {
		g.Expect(n.Annotations).ToNot(HaveKey(c.keys.Remove))
	}
	s, err := c.backend.Observe(ctx)
	g.Expect(err).ToNot(HaveOccurred())
	_, ok := s.MemberByNode(l.removed)
	g.Expect(ok).To(BeFalse(), "a removed member is not reported")
}

func (l *lifecycle) removedAgain(t *testing.T) {
	g := NewWithT(t)
	c := l.c
	before := c.node(g, l.removed).Annotations
	for range 3 {
		r, err := c.backend.RemoveMember(context.Background(), l.old())
		g.Expect(err).ToNot(HaveOccurred())
		g.Expect(r.State).To(Equal(etcd.RemovalRemoved))
		g.Expect(r.Member.Name).To(Equal(l.oldMember))
	}
	// A restarted controller (a new Backend with nothing in memory) reads the same outcome.
	restarted, err := k3s.New(k3s.Config{Client: c.client})
	g.Expect(err).ToNot(HaveOccurred())
	r, err := restarted.RemoveMember(context.Background(), l.old())
	g.Expect(err).ToNot(HaveOccurred())
	g.Expect(r.State).To(Equal(etcd.RemovalRemoved))
	g.Expect(r.Member.Name).To(Equal(l.oldMember))
	after := c.node(g, l.removed).Annotations
	g.Expect(after[k3s.RemovalRequestedAtAnnotation]).To(Equal(before[k3s.RemovalRequestedAtAnnotation]))
	g.Expect(after[c.keys.Remove]).To(Equal(before[c.keys.Remove]))
}

func (l *lifecycle) rejoin(t *testing.T) {
	g := NewWithT(t)
	c := l.c
	ctx := context.Background()
	newMember, err := c.sim.RestartServer(ctx, l.removed)
	g.Expect(err).ToNot(HaveOccurred())
	g.Expect(newMember).ToNot(Equal(l.oldMember))
	g.Eventually(func(g Gomega) {
		g.Expect(c.node(g, l.removed).Annotations).To(HaveKeyWithValue(c.keys.NodeName, newMember))
	}, waitTimeout, pollInterval).Should(Succeed())

	r, err := c.backend.RemoveMember(ctx, l.old())
	g.Expect(err).ToNot(HaveOccurred())
	t.Logf("%s: after the rejoin: %s: %s", c.version, r.State, r.Reason)
	g.Expect(r.State).To(Equal(etcd.RemovalRemoved))
	g.Expect(r.Member.Name).To(Equal(l.oldMember))
	requestedAt := c.node(g, l.removed).Annotations[k3s.RemovalRequestedAtAnnotation]
	// K3s clears the old request on a rejoin (step 2: deleted, or "false" before 1.28.3); the
	// backend must not set it again for the new member.
	g.Eventually(func(g Gomega) {
		g.Expect(c.node(g, l.removed).Annotations[c.keys.Remove]).ToNot(Equal("true"))
	}, waitTimeout, pollInterval).Should(Succeed())
	g.Consistently(func(g Gomega) {
		r, err := c.backend.RemoveMember(ctx, l.old())
		g.Expect(err).ToNot(HaveOccurred())
		g.Expect(r.State).To(Equal(etcd.RemovalRemoved))
		n := c.node(g, l.removed)
		g.Expect(n.Annotations[c.keys.Remove]).ToNot(Equal("true"), "the new member must not be asked to go")
		g.Expect(n.Annotations[k3s.RemovalRequestedAtAnnotation]).To(Equal(requestedAt))
		g.Expect(c.hasMember(g, newMember)).To(BeTrue())
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
	r, err = c.backend.RemoveMember(ctx, l.old())
	g.Expect(err).ToNot(HaveOccurred())
	t.Logf("%s: once K3s processed the rejoin: %s", c.version, r.Reason)
	g.Expect(r.State).To(Equal(etcd.RemovalRemoved), r.Reason)
	g.Expect(r.Member.Name).To(Equal(l.oldMember))
	// The rejoined learner is promoted before the next step needs a full cluster.
	g.Eventually(func(g Gomega) {
		s, err := c.backend.Observe(ctx)
		g.Expect(err).ToNot(HaveOccurred())
		m, ok := s.MemberByNode(l.removed)
		g.Expect(ok).To(BeTrue())
		g.Expect(m.Name).To(Equal(newMember))
		g.Expect(m.IsLearner).To(BeFalse())
	}, waitTimeout, pollInterval).Should(Succeed())
}

func (l *lifecycle) waitsOnDownMember(t *testing.T) {
	g := NewWithT(t)
	c := l.c
	ctx := context.Background()
	// With one of three members down, etcd refuses to remove another as "unhealthy cluster";
	// K3s requeues that with backoff and writes nothing (k3s pkg/etcd/member_controller.go).
	leader := c.leaderNode(g)
	var down, target string
	for _, n := range c.nodes {
		switch {
		case n == l.removed:
		case n != leader && down == "":
			down = n
		default:
			target = n
		}
	}
	downMember, _ := c.sim.MemberName(down)
	targetMember, _ := c.sim.MemberName(target)
	g.Expect(c.sim.Quiesced(c.etcd.Member(downMember).Kill)).To(Succeed())
	var r etcd.Removal
	g.Consistently(func(g Gomega) {
		var err error
		r, err = c.backend.RemoveMember(ctx, c.memberOf(target))
		g.Expect(err).ToNot(HaveOccurred())
		g.Expect(r.State).To(Equal(etcd.RemovalInProgress))
	}, 3*time.Second, 200*time.Millisecond).Should(Succeed())
	t.Logf("%s: %s", c.version, r.Reason)
	g.Expect(r.Reason).To(HavePrefix("waiting on K3s to remove etcd member " + targetMember))
	g.Expect(requestAge(g, r.Reason)).To(BeNumerically(">=", 2*time.Second), "the reason says how long the request has been waiting")
	g.Expect(c.hasMember(g, targetMember)).To(BeTrue())
}

// TestBackend_rejection has K3s refuse a removal for every profile: two started voters and one
// that never started (a failed join), so removing a started one would leave one started member
// of two, and etcd answers "not enough started members". The backend cannot see the unstarted
// member (a ghost: it has no Node), so only K3s's refusal stops the removal.
func TestBackend_rejection(t *testing.T) {
	for _, version := range profiles {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			c := startCluster(t, version, 2, clusterOptions{})
			ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
			defer cancel()
			c.addUnstartedVoter(ctx, g)
			target := c.nodes[1]
			targetMember, _ := c.sim.MemberName(target)

			v, _ := k3s.ParseVersion(c.version)
			if v.RetriesRejection() {
				var r etcd.Removal
				g.Consistently(func(g Gomega) {
					var err error
					r, err = c.backend.RemoveMember(ctx, c.memberOf(target))
					g.Expect(err).ToNot(HaveOccurred())
					g.Expect(r.State).To(Equal(etcd.RemovalInProgress))
					g.Expect(c.node(g, target).Annotations).To(HaveKeyWithValue(c.keys.Remove, "true"))
				}, 3*time.Second, 200*time.Millisecond).Should(Succeed())
				t.Logf("%s: %s", c.version, r.Reason)
				g.Expect(r.Reason).To(ContainSubstring("not enough started members"))
				g.Expect(c.hasMember(g, targetMember)).To(BeTrue())
				return
			}
			r, err := c.backend.WaitForRemoval(ctx, c.memberOf(target))
			g.Expect(err).ToNot(HaveOccurred())
			t.Logf("%s: %s: %s", c.version, r.State, r.Reason)
			g.Expect(r.State).To(Equal(etcd.RemovalRejected))
			g.Expect(r.Reason).To(ContainSubstring("K3s refused: it would leave too few started members"))
			g.Expect(r.Member.Name).To(Equal(targetMember))
			g.Consistently(func(g Gomega) {
				again, err := c.backend.RemoveMember(ctx, c.memberOf(target))
				g.Expect(err).ToNot(HaveOccurred())
				g.Expect(again.State).To(Equal(etcd.RemovalRejected))
				g.Expect(c.node(g, target).Annotations).ToNot(HaveKey(c.keys.Remove), "remove is never set again")
			}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
			g.Expect(c.hasMember(g, targetMember)).To(BeTrue())
		})
	}
}
