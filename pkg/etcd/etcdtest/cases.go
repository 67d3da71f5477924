package etcdtest

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega" //nolint:revive // gomega's DSL reads best dot-imported

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// testHealthy: every member answers, the verdict is healthy and the leader is the one etcd
// names. With more than one member, MoveLeader off a follower is a no-op; with one, the last
// member is never removed.
func testHealthy(t *testing.T, env *Env) {
	g := NewWithT(t)
	ctx := caseContext(t)
	snap := eventuallyHealthy(ctx, t, env.Cluster, env.Nodes)
	g.Expect(snap.Members).To(HaveLen(len(env.Nodes)))
	g.Expect(snap.Backend).NotTo(BeEmpty())
	if !snap.Blind(etcd.BlindSpotLeader) {
		truth, err := env.Faults.LeaderNode(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(leaderNode(g, snap)).To(Equal(truth))
	}
	if len(env.Nodes) == 1 {
		node := env.Nodes[0]
		m := memberOn(g, snap, node)
		v := etcd.CanRemoveMember(snap, time.Now(), m)
		g.Expect(v.Allowed).To(BeFalse())
		g.Expect(v.Reason).To(Equal(v1alpha1.MemberRemovalLastMemberReason))
		r, err := env.Cluster.RemoveMember(ctx, m)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(r.State).To(Equal(etcd.RemovalRejected), "the backend refuses the last member itself: %s", r.Reason)
		g.Expect(r.Reason).NotTo(BeEmpty())
		g.Expect(hasMember(ctx, g, env, node)).To(BeTrue())
		return
	}
	if snap.Blind(etcd.BlindSpotLeader) {
		return
	}
	follower := others(env.Nodes, leaderNode(g, snap))[0]
	mv, err := env.Cluster.MoveLeader(ctx, memberOn(g, snap, follower), memberOn(g, snap, others(env.Nodes, follower)[0]))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mv.Outcome).To(Equal(etcd.LeaderNotOnNode))
}

// testMemberKilled: the killed member's Machine is NotHealthy because the member is not
// answering (not because it answered badly), and the cluster is NotHealthy.
func testMemberKilled(t *testing.T, env *Env) {
	g := NewWithT(t)
	ctx := caseContext(t)
	victim := env.Nodes[1]
	g.Expect(env.Faults.KillMember(ctx, victim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		snap, v := assess(ctx, g, env.Cluster, env.Nodes...)
		c := v.Machines[victim]
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse), c.Message)
		g.Expect(c.Reason).To(Equal(v1alpha1.EtcdMemberNotHealthyReason))
		g.Expect(c.Message).To(ContainSubstring("not answering"))
		m, ok := snap.MemberByNode(victim)
		g.Expect(ok).To(BeTrue(), "the killed member is still in the member list")
		ev, _ := snap.EvidenceFor(m.ID)
		g.Expect(ev.Contact).To(Equal(etcd.ContactUnreachable))
		g.Expect(ev.Error).NotTo(BeEmpty())
		g.Expect(v.Cluster.Status).To(Equal(metav1.ConditionFalse))
		for _, n := range others(env.Nodes, victim) {
			g.Expect(v.Machines[n].Status).To(Equal(metav1.ConditionTrue), "Machine %s: %s", n, v.Machines[n].Message)
		}
	}).WithContext(ctx).WithTimeout(eventually).WithPolling(pollInterval).Should(Succeed())
}

// testRemoveLosesQuorum: with one of three members down, removing a healthy member would lose
// quorum. The caller-side verdict refuses, so the backend is never asked, and the member stays.
func testRemoveLosesQuorum(t *testing.T, env *Env) {
	g := NewWithT(t)
	ctx := caseContext(t)
	down, healthy := env.Nodes[1], env.Nodes[0]
	g.Expect(env.Faults.KillMember(ctx, down)).To(Succeed()) // a no-op after MemberKilled
	g.Eventually(func(g Gomega) {
		snap := observe(ctx, g, env.Cluster)
		v := etcd.CanRemoveMember(snap, time.Now(), memberOn(g, snap, healthy))
		g.Expect(v.Allowed).To(BeFalse(), v.Message)
		g.Expect(v.Reason).To(Equal(v1alpha1.MemberRemovalWouldLoseQuorumReason), v.Message)
		// The down member itself may go: 2 of 2 stay healthy.
		g.Expect(etcd.CanRemoveMember(snap, time.Now(), memberOn(g, snap, down)).Allowed).To(BeTrue())
	}).WithContext(ctx).WithTimeout(eventually).WithPolling(pollInterval).Should(Succeed())
	g.Expect(hasMember(ctx, g, env, healthy)).To(BeTrue())
	g.Expect(hasMember(ctx, g, env, down)).To(BeTrue())
}

// testMemberRestarted: a killed member that comes back is healthy again, through the same
// backend (a broken connection is replaced).
func testMemberRestarted(t *testing.T, env *Env) {
	g := NewWithT(t)
	ctx := caseContext(t)
	victim := env.Nodes[1]
	g.Expect(env.Faults.KillMember(ctx, victim)).To(Succeed()) // a no-op after MemberKilled
	g.Eventually(func(g Gomega) {
		_, v := assess(ctx, g, env.Cluster, env.Nodes...)
		g.Expect(v.Machines[victim].Status).To(Equal(metav1.ConditionFalse))
	}).WithContext(ctx).WithTimeout(eventually).WithPolling(pollInterval).Should(Succeed())
	g.Expect(env.Faults.RestartMember(ctx, victim)).To(Succeed())
	eventuallyHealthy(ctx, t, env.Cluster, env.Nodes)
}

// testNoSpaceAlarm: the alarmed member is NotHealthy, and the message names NOSPACE.
func testNoSpaceAlarm(t *testing.T, env *Env) {
	g := NewWithT(t)
	ctx := caseContext(t)
	victim := env.Nodes[2]
	g.Expect(env.Faults.RaiseNoSpace(ctx, victim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		snap, v := assess(ctx, g, env.Cluster, env.Nodes...)
		if snap.Blind(etcd.BlindSpotAlarms) {
			g.Expect(v.Cluster.Message).To(ContainSubstring("alarms"))
			return
		}
		c := v.Machines[victim]
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse), c.Message)
		g.Expect(c.Message).To(ContainSubstring(string(etcd.AlarmNoSpace)))
		g.Expect(v.Cluster.Status).To(Equal(metav1.ConditionFalse))
	}).WithContext(ctx).WithTimeout(eventually).WithPolling(pollInterval).Should(Succeed())
}

// testLearner: a learner is in the member list as a learner, its evidence says it answered
// (learners reject most RPCs: a fact, not a failure), its Machine waits for promotion, and the
// quorum projection counts it as a voter that may be promoted at any moment.
func testLearner(t *testing.T, env *Env) {
	g := NewWithT(t)
	ctx := caseContext(t)
	eventuallyHealthy(ctx, t, env.Cluster, env.Nodes)
	learner := env.Nodes[0] + "-learner"
	g.Expect(env.Faults.AddLearner(ctx, learner)).To(Succeed())
	all := append(append([]string{}, env.Nodes...), learner)
	g.Eventually(func(g Gomega) {
		snap, v := assess(ctx, g, env.Cluster, all...)
		m, ok := snap.MemberByNode(learner)
		g.Expect(ok).To(BeTrue(), "no member on Node %s in %v", learner, snap.Members)
		g.Expect(m.IsLearner).To(BeTrue())
		ev, ok := snap.EvidenceFor(m.ID)
		g.Expect(ok).To(BeTrue())
		g.Expect(ev.Contact).To(Equal(etcd.ContactAnswered), "a learner that answers is not unreachable: %s", ev.Error)
		c := v.Machines[learner]
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Message).To(ContainSubstring("learner"))
		for _, n := range env.Nodes {
			g.Expect(v.Machines[n].Status).To(Equal(metav1.ConditionTrue), "Machine %s: %s", n, v.Machines[n].Message)
		}
		r := etcd.CanRemoveMember(snap, time.Now(), memberOn(g, snap, env.Nodes[0]))
		g.Expect(r.Message).To(ContainSubstring("learner"), "the projection counts the learner as a voter to be")
	}).WithContext(ctx).WithTimeout(eventually).WithPolling(pollInterval).Should(Succeed())
}

// testNeverStarted: a member added but never started is in the snapshot, and the cluster is
// NotHealthy saying so.
func testNeverStarted(t *testing.T, env *Env) {
	g := NewWithT(t)
	ctx := caseContext(t)
	id, err := env.Faults.AddNeverStarted(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		snap, v := assess(ctx, g, env.Cluster, env.Nodes...)
		m, ok := snap.MemberByID(id)
		g.Expect(ok).To(BeTrue(), "member %x not in %v", id, snap.Members)
		g.Expect(m.Started()).To(BeFalse())
		g.Expect(v.Cluster.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(v.Cluster.Message).To(ContainSubstring("never started"))
	}).WithContext(ctx).WithTimeout(eventually).WithPolling(pollInterval).Should(Succeed())
}

// testSplitBrain: one Node's etcd answers from another cluster; the cluster is NotHealthy and
// says split brain.
func testSplitBrain(t *testing.T, env *Env) {
	g := NewWithT(t)
	ctx := caseContext(t)
	eventuallyHealthy(ctx, t, env.Cluster, env.Nodes)
	victim := env.Nodes[2]
	g.Expect(env.Faults.SplitBrain(ctx, victim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		_, v := assess(ctx, g, env.Cluster, env.Nodes...)
		g.Expect(v.Cluster.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(v.Cluster.Message).To(ContainSubstring("split brain"))
		g.Expect(v.Machines[victim].Status).To(Equal(metav1.ConditionFalse))
	}).WithContext(ctx).WithTimeout(eventually).WithPolling(pollInterval).Should(Succeed())
}

// testRemoveLeader: the Machine hosting the leader is deleted as the pre-terminate hook does it:
// check quorum, move leadership to the first candidate that takes it, remove the member.
func testRemoveLeader(t *testing.T, env *Env) {
	g := NewWithT(t)
	ctx := caseContext(t)
	snap := eventuallyHealthy(ctx, t, env.Cluster, env.Nodes)
	leavingNode := leaderNode(g, snap)
	leaving := memberOn(g, snap, leavingNode)
	if v := etcd.CanRemoveMember(snap, time.Now(), leaving); !v.Allowed {
		t.Fatalf("removing the leader of a healthy cluster must be allowed: %s", v.Message)
	}
	candidates := etcd.LeaderCandidates(etcd.AssessMembers(snap, time.Now()), machines(env.Nodes...), leaving)
	g.Expect(candidates).To(HaveLen(len(env.Nodes) - 1))
	var moved etcd.Member
	for _, c := range candidates {
		mv, err := env.Cluster.MoveLeader(ctx, leaving, c)
		if err != nil {
			t.Logf("MoveLeader(%s, %s) failed, trying the next candidate: %v", leaving, c, err)
			continue
		}
		g.Expect(mv.Outcome).To(BeElementOf(etcd.LeaderMoved, etcd.LeaderMoveByBackend))
		if mv.Outcome == etcd.LeaderMoved {
			moved = c
		} else {
			g.Expect(mv.Warning).NotTo(BeEmpty(), "ByBackend says what happens instead")
		}
		break
	}
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

// testRemoveRemoved: removing a member that is gone already reports Removed again, and
// nothing else changes.
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

// testWrongCA: with an unrelated CA in the Secret (after connections were warm), the backend
// gives a configuration error or reports every member's TLS failure, and removes nothing.
func testWrongCA(t *testing.T, env *Env) {
	g := NewWithT(t)
	ctx := caseContext(t)
	env.healthy = eventuallyHealthy(ctx, t, env.Cluster, env.Nodes)
	g.Expect(env.Faults.BreakCA(ctx)).To(Succeed())
	g.Eventually(func(g Gomega) {
		snap, err := env.Cluster.Observe(ctx)
		if err != nil {
			g.Expect(errors.Is(err, etcd.ErrInvalidInput)).To(BeTrue(), "want ErrInvalidInput, got %v", err)
			return
		}
		for _, ev := range snap.Evidence {
			g.Expect(ev.Contact).NotTo(Equal(etcd.ContactAnswered), "a member answered through a wrong CA")
		}
	}).WithContext(ctx).WithTimeout(eventually).WithPolling(pollInterval).Should(Succeed())
	expectNoRemoval(t, env, env.healthy, env.Nodes[1])
}

// testMissingCA: without the CA Secret the backend says which Secret is missing
// (ErrInvalidInput) and removes nothing.
func testMissingCA(t *testing.T, env *Env) {
	g := NewWithT(t)
	ctx := caseContext(t)
	g.Expect(env.Faults.DeleteCA(ctx)).To(Succeed())
	g.Eventually(func(g Gomega) {
		_, err := env.Cluster.Observe(ctx)
		g.Expect(err).To(HaveOccurred())
		g.Expect(errors.Is(err, etcd.ErrInvalidInput)).To(BeTrue(), "want ErrInvalidInput, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("Secret"))
		g.Expect(etcd.ConditionReasonFor(err)).To(Equal(v1alpha1.EtcdClusterInspectionFailedReason))
	}).WithContext(ctx).WithTimeout(eventually).WithPolling(pollInterval).Should(Succeed())
	expectNoRemoval(t, env, env.healthy, env.Nodes[1])
}

// testAPIServerDown: with the workload apiserver gone, Observe fails with ErrUnreachable
// (condition reason ConnectionDown, status Unknown) and nothing is removed.
func testAPIServerDown(t *testing.T, env *Env) {
	g := NewWithT(t)
	ctx := caseContext(t)
	healthy := eventuallyHealthy(ctx, t, env.Cluster, env.Nodes)
	g.Expect(env.Faults.StopAPIServer(ctx)).To(Succeed())
	g.Eventually(func(g Gomega) {
		_, err := env.Cluster.Observe(ctx)
		g.Expect(err).To(HaveOccurred())
		g.Expect(errors.Is(err, etcd.ErrUnreachable)).To(BeTrue(), "want ErrUnreachable, got %v", err)
		g.Expect(etcd.ConditionReasonFor(err)).To(Equal(v1alpha1.EtcdClusterConnectionDownReason))
		v := etcd.AssessHealth(etcd.HealthInput{ObserveErr: err, Machines: machines(env.Nodes...), Now: time.Now()})
		g.Expect(v.Cluster.Status).To(Equal(metav1.ConditionUnknown))
		g.Expect(v.Cluster.Reason).To(Equal(v1alpha1.EtcdClusterConnectionDownReason))
	}).WithContext(ctx).WithTimeout(2*eventually).WithPolling(pollInterval).Should(Succeed(),
		"a stopping apiserver may keep serving open port-forwards while it drains")
	r, err := env.Cluster.RemoveMember(ctx, memberOn(g, healthy, env.Nodes[1]))
	g.Expect(err).To(HaveOccurred(), "RemoveMember reported %s: %s", r.State, r.Reason)
	g.Expect(errors.Is(err, etcd.ErrUnreachable)).To(BeTrue(), "want ErrUnreachable, got %v", err)
	g.Expect(hasMember(ctx, g, env, env.Nodes[1])).To(BeTrue())
}

// expectNoRemoval asserts that RemoveMember of the member on node (as the healthy snapshot gave
// it) does not report the member removed and that etcd still has it.
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
