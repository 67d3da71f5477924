package etcdtest

import (
	"testing"
	"time"

	. "github.com/onsi/gomega" //nolint:revive // gomega's DSL reads best dot-imported

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

func testRemoveLosesQuorum(t *testing.T, env *Env) {
	g := NewWithT(t)
	ctx := caseContext(t)
	down, healthy := env.Nodes[1], env.Nodes[0]
	g.Expect(env.Faults.KillMember(ctx, down)).To(Succeed()) // a no-op after MemberKilled
	before := memberCount(ctx, g, env)
	g.Eventually(func(g Gomega) {
		snap, v := assess(ctx, g, env.Cluster, env.Nodes...)
		g.Expect(v.Machines[down].Status).NotTo(Equal(metav1.ConditionTrue), "the backend has not seen the member go down yet")
		// The down member itself may go: 2 of 2 stay healthy.
		g.Expect(etcd.CanRemoveMember(snap, time.Now(), memberOn(g, snap, down)).Allowed).To(BeTrue())
	}).WithContext(ctx).WithTimeout(eventually).WithPolling(pollInterval).Should(Succeed())
	v, asked := removeIfAllowed(ctx, g, env.Cluster, healthy)
	g.Expect(asked).To(BeFalse(), "the caller removed the member on %s: %s", healthy, v.Message)
	g.Expect(v.Reason).To(Equal(etcd.RemovalWouldLoseQuorumReason), v.Message)
	g.Expect(memberCount(ctx, g, env)).To(Equal(before))
	g.Expect(hasMember(ctx, g, env, healthy)).To(BeTrue())
	g.Expect(hasMember(ctx, g, env, down)).To(BeTrue())
}

func testUnknownNotRemovable(t *testing.T, env *Env) {
	g := NewWithT(t)
	ctx := caseContext(t)
	eventuallyHealthy(ctx, t, env.Cluster, env.Nodes)
	hidden, healthy := env.Nodes[2], env.Nodes[0]
	before := memberCount(ctx, g, env)
	g.Expect(env.Faults.HideMember(ctx, hidden)).To(Succeed())
	g.Eventually(func(g Gomega) {
		snap, v := assess(ctx, g, env.Cluster, env.Nodes...)
		g.Expect(v.Machines[hidden].Status).NotTo(Equal(metav1.ConditionTrue), v.Machines[hidden].Message)
		g.Expect(v.Cluster.Status).NotTo(Equal(metav1.ConditionTrue), v.Cluster.Message)
		for _, mh := range etcd.AssessMembers(snap, time.Now()) {
			if mh.Member.NodeName == hidden {
				g.Expect(mh.Health).NotTo(Equal(etcd.Healthy), "member %s: %s", mh.Member, mh.Message)
			}
		}
	}).WithContext(ctx).WithTimeout(eventually).WithPolling(pollInterval).Should(Succeed())
	v, asked := removeIfAllowed(ctx, g, env.Cluster, healthy)
	g.Expect(asked).To(BeFalse(), "the caller removed the member on %s while another member's health is unknown: %s", healthy, v.Message)
	g.Expect(memberCount(ctx, g, env)).To(Equal(before))
	for _, n := range env.Nodes {
		g.Expect(hasMember(ctx, g, env, n)).To(BeTrue(), "member on %s", n)
	}
}

func testRemoveLeader(t *testing.T, env *Env) {
	g := NewWithT(t)
	ctx := caseContext(t)
	snap := eventuallyHealthy(ctx, t, env.Cluster, env.Nodes)
	leavingNode, err := env.Faults.LeaderNode(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	if !snap.Blind(etcd.BlindSpotLeader) {
		g.Expect(leaderNode(g, snap)).To(Equal(leavingNode), "the snapshot names the leader etcd names")
	}
	leaving := memberOn(g, snap, leavingNode)
	if v := etcd.CanRemoveMember(snap, time.Now(), leaving); !v.Allowed {
		t.Fatalf("removing the leader of a healthy cluster must be allowed: %s", v.Message)
	}
	candidates := etcd.LeaderCandidates(etcd.AssessMembers(snap, time.Now()), machines(env.Nodes...), leaving)
	g.Expect(candidates).To(HaveLen(len(env.Nodes) - 1))
	var moved etcd.Member
	byBackend := false
	for _, c := range candidates {
		mv, err := env.Cluster.MoveLeader(ctx, leaving, c)
		if err != nil {
			t.Logf("MoveLeader(%s, %s) failed, trying the next candidate: %v", leaving, c, err)
			continue
		}
		g.Expect(mv.Outcome).To(BeElementOf(etcd.LeaderMoved, etcd.LeaderMoveByBackend), "MoveLeader off the leader")
		if mv.Outcome == etcd.LeaderMoved {
			moved = c
		} else {
			g.Expect(mv.Warning).NotTo(BeEmpty(), "ByBackend says what happens instead")
			byBackend = true
		}
		break
	}
	g.Expect(moved.ID != 0 || byBackend).To(BeTrue(), "no candidate took leadership, and the backend did not say it moves leadership itself")
	if moved.ID != 0 {
		g.Eventually(func() (string, error) { return env.Faults.LeaderNode(ctx) }).
			WithTimeout(eventually).WithPolling(pollInterval).Should(Equal(moved.NodeName))
		mv, err := env.Cluster.MoveLeader(ctx, leaving, moved)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(mv.Outcome).To(Equal(etcd.LeaderNotOnNode), "the leaving member does not lead any more")
	}
	r := removeUntilDone(ctx, t, env.Cluster, leaving)
	g.Expect(r.State).To(Equal(etcd.RemovalRemoved), r.Reason)
	g.Expect(hasMember(ctx, g, env, leavingNode)).To(BeFalse())
	remaining := others(env.Nodes, leavingNode)
	for _, n := range remaining {
		g.Expect(hasMember(ctx, g, env, n)).To(BeTrue())
	}
	env.Nodes = remaining
}

func testRemoveRemoved(t *testing.T, env *Env) {
	g := NewWithT(t)
	ctx := caseContext(t)
	// After RemoveLeader, Nodes lists the remaining members; remove one, then remove it again.
	gone := env.Nodes[len(env.Nodes)-1]
	member := memberOn(g, observe(ctx, g, env.Cluster), gone)
	r := removeUntilDone(ctx, t, env.Cluster, member)
	g.Expect(r.State).To(Equal(etcd.RemovalRemoved), r.Reason)
	g.Expect(hasMember(ctx, g, env, gone)).To(BeFalse())
	for range 2 {
		r, err := env.Cluster.RemoveMember(ctx, member)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.State).To(Equal(etcd.RemovalRemoved), r.Reason)
	}
	for _, n := range others(env.Nodes, gone) {
		g.Expect(hasMember(ctx, g, env, n)).To(BeTrue())
	}
}

func testRemoveLeaderDirectly(t *testing.T, env *Env) {
	g := NewWithT(t)
	ctx := caseContext(t)
	snap := eventuallyHealthy(ctx, t, env.Cluster, env.Nodes)
	leaderNode, err := env.Faults.LeaderNode(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	leader := memberOn(g, snap, leaderNode)
	r := removeConfirmed(ctx, t, env, leader)
	g.Expect(r.State).To(Equal(etcd.RemovalRemoved), r.Reason)
	remaining := others(env.Nodes, leaderNode)
	g.Expect(memberCount(ctx, g, env)).To(Equal(len(remaining)))
	for _, n := range remaining {
		g.Expect(hasMember(ctx, g, env, n)).To(BeTrue(), "member on %s", n)
	}
	env.Nodes = remaining
}

func testTransientDuringRemoval(t *testing.T, env *Env) {
	g := NewWithT(t)
	ctx := caseContext(t)
	snap := eventuallyHealthy(ctx, t, env.Cluster, env.Nodes)
	leaderNode, err := env.Faults.LeaderNode(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	target := memberOn(g, snap, others(env.Nodes, leaderNode)[0])

	type answer struct {
		r   etcd.Removal
		err error
	}
	first := make(chan answer, 1)
	go func() {
		r, err := env.Cluster.RemoveMember(ctx, target)
		first <- answer{r, err}
	}()
	g.Expect(env.Faults.KillMember(ctx, leaderNode)).To(Succeed())
	answers := []answer{<-first}
	for range 2 {
		r, err := env.Cluster.RemoveMember(ctx, target)
		answers = append(answers, answer{r, err})
	}
	g.Expect(env.Faults.RestartMember(ctx, leaderNode)).To(Succeed())
	for i, a := range answers {
		t.Logf("answer %d while the leader was down: %s %q %v", i, a.r.State, a.r.Reason, a.err)
		if a.err == nil {
			g.Expect(a.r.State).NotTo(Equal(etcd.RemovalRejected), "a removal interrupted by a leader failure is not final: %s", a.r.Reason)
		}
		if a.err == nil && a.r.State == etcd.RemovalRemoved {
			g.Expect(hasMemberID(ctx, g, env, target.ID)).To(BeFalse(), "Removed was reported but etcd still has %s", target)
		}
	}
	r := removeConfirmed(ctx, t, env, target)
	g.Expect(r.State).To(Equal(etcd.RemovalRemoved), r.Reason)
	remaining := others(env.Nodes, target.NodeName)
	g.Expect(memberCount(ctx, g, env)).To(Equal(len(remaining)))
	for _, n := range remaining {
		g.Expect(hasMember(ctx, g, env, n)).To(BeTrue(), "member on %s", n)
	}
}

func expectNoRemoval(t *testing.T, env *Env, healthy *etcd.Snapshot, node string) {
	t.Helper()
	g := NewWithT(t)
	ctx := caseContext(t)
	r, err := env.Cluster.RemoveMember(ctx, memberOn(g, healthy, node))
	if err == nil {
		g.Expect(r.State).NotTo(Equal(etcd.RemovalRemoved), "RemoveMember claims success: %s", r.Reason)
	}
	g.Expect(hasMember(ctx, g, env, node)).To(BeTrue(), "the member must still be there")
}
