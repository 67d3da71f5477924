package etcdtest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega" //nolint:revive // gomega's DSL reads best dot-imported

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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
	expectStatusFigures(g, snap, env.EtcdVersion)
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
		g.Expect(v.Reason).To(Equal(etcd.RemovalLastMemberReason))
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

// expectStatusFigures: a backend that asks etcd itself (it sees member lists) passes on each
// answering member's own Status figures (etcdserverpb.StatusResponse: a live member has a
// database, a term and applied entries); one that does not (K3s reads Nodes) passes none.
// The quota is passed on as etcd reports it: etcd v3.6 added dbSizeQuota to StatusResponse
// (go.etcd.io/etcd/api/v3 etcdserverpb/rpc.proto, field 12, etcd_version_field "3.6"), so a
// v3.5 member reports none and the backend must not make one up.
func expectStatusFigures(g Gomega, snap *etcd.Snapshot, etcdVersion string) {
	for _, ev := range snap.Evidence {
		if snap.Blind(etcd.BlindSpotMemberLists) {
			g.Expect(ev.Status).To(BeNil(), "member %x", ev.MemberID)
			continue
		}
		g.Expect(ev.Contact).To(Equal(etcd.ContactAnswered))
		g.Expect(ev.Status).NotTo(BeNil(), "member %x answered but its Status figures are missing", ev.MemberID)
		g.Expect(ev.Status.DBSize).To(BeNumerically(">", 0))
		g.Expect(ev.Status.DBSizeInUse).To(And(BeNumerically(">", 0), BeNumerically("<=", ev.Status.DBSize)))
		g.Expect(ev.Status.RaftTerm).To(BeNumerically(">", 0))
		g.Expect(ev.Status.RaftAppliedIndex).To(BeNumerically(">", 0))
		// etcd v3.6 reports its quota: the default 2 GiB unless --quota-backend-bytes says otherwise.
		if reportsQuota(etcdVersion) {
			g.Expect(ev.Status.DBSizeQuota).To(BeNumerically(">", 0))
		} else {
			g.Expect(ev.Status.DBSizeQuota).To(BeZero(), "etcd %s reports no quota", etcdVersion)
		}
	}
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
		g.Expect(c.Reason).To(Equal(etcd.MemberNotHealthyReason))
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
// quorum. A caller that removes whatever the quorum projection allows does not ask the backend,
// and every member stays.
// testUnknownNotRemovable: a member whose health the backend cannot learn is not reported
// healthy, and it counts against quorum: a caller that removes what the projection allows does not
// remove a healthy member because of it.
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

// testNoSpaceAlarm: the alarmed member is not healthy, whatever the backend can see: NOSPACE
// stops writes, and a backend blind to alarms still learns that the member's status reports
// errors. A backend that sees alarms names NOSPACE.
func testNoSpaceAlarm(t *testing.T, env *Env) {
	g := NewWithT(t)
	ctx := caseContext(t)
	victim := env.Nodes[2]
	g.Expect(env.Faults.RaiseNoSpace(ctx, victim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		snap, v := assess(ctx, g, env.Cluster, env.Nodes...)
		c := v.Machines[victim]
		g.Expect(c.Status).NotTo(Equal(metav1.ConditionTrue), "Machine %s: %s", victim, c.Message)
		g.Expect(v.Cluster.Status).NotTo(Equal(metav1.ConditionTrue), v.Cluster.Message)
		if !snap.Blind(etcd.BlindSpotAlarms) {
			g.Expect(c.Message).To(ContainSubstring(string(etcd.AlarmNoSpace)))
			g.Expect(v.Cluster.Message).To(ContainSubstring(string(etcd.AlarmNoSpace)))
		}
	}).WithContext(ctx).WithTimeout(eventually).WithPolling(pollInterval).Should(Succeed())
}

// testLearner: a learner is in the member list as a learner, its evidence says it answered
// (learners reject most RPCs: a fact, not a failure), its Machine waits for promotion, and the
// quorum projection counts it as a voter that may be promoted at any moment.
func testLearner(t *testing.T, env *Env) {
	g := NewWithT(t)
	ctx := caseContext(t)
	eventuallyHealthy(ctx, t, env.Cluster, env.Nodes)
	// The name shares no prefix with the other Nodes or their members, so a backend that maps
	// members to Nodes by prefix (older K3s) reads it as it reads any other Node.
	learner := fmt.Sprintf("joiner-%d", time.Now().UnixNano()%1_000_000)
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

// testNeverStarted: a member added but never started is in the snapshot, the cluster is
// NotHealthy saying so, and the member is removed by its ID through another member without
// touching any other member.
func testNeverStarted(t *testing.T, env *Env) {
	g := NewWithT(t)
	ctx := caseContext(t)
	id, err := env.Faults.AddNeverStarted(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	var m etcd.Member
	g.Eventually(func(g Gomega) {
		snap, v := assess(ctx, g, env.Cluster, env.Nodes...)
		var ok bool
		m, ok = snap.MemberByID(id)
		g.Expect(ok).To(BeTrue(), "member %x not in %v", id, snap.Members)
		g.Expect(m.Started()).To(BeFalse())
		g.Expect(v.Cluster.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(v.Cluster.Message).To(ContainSubstring("never started"))
	}).WithContext(ctx).WithTimeout(eventually).WithPolling(pollInterval).Should(Succeed())
	before := memberCount(ctx, g, env)
	r := removeUntilDone(ctx, t, env.Cluster, m)
	g.Expect(r.State).To(Equal(etcd.RemovalRemoved), r.Reason)
	g.Expect(hasMemberID(ctx, g, env, id)).To(BeFalse())
	g.Expect(memberCount(ctx, g, env)).To(Equal(before - 1))
	for _, n := range env.Nodes {
		g.Expect(hasMember(ctx, g, env, n)).To(BeTrue(), "member on %s", n)
	}
	eventuallyHealthy(ctx, t, env.Cluster, env.Nodes)
}

// testDuplicateName: a second member carries the name of a running member. Both are reported as a
// problem; removing any member that carries the name under another ID removes exactly that
// member, and nothing the backend does removes the running one.
func testDuplicateName(t *testing.T, env *Env) {
	g := NewWithT(t)
	ctx := caseContext(t)
	healthy := eventuallyHealthy(ctx, t, env.Cluster, env.Nodes)
	node := env.Nodes[2]
	live := memberOn(g, healthy, node)
	g.Expect(env.Faults.AddDuplicateName(ctx, node)).To(Succeed())
	var snap *etcd.Snapshot
	g.Eventually(func(g Gomega) {
		s, v := assess(ctx, g, env.Cluster, env.Nodes...)
		g.Expect(v.Cluster.Status).NotTo(Equal(metav1.ConditionTrue), v.Cluster.Message)
		g.Expect(v.Cluster.Message).To(ContainSubstring(live.Name))
		g.Expect(v.Machines[node].Status).NotTo(Equal(metav1.ConditionTrue), v.Machines[node].Message)
		snap = s
	}).WithContext(ctx).WithTimeout(eventually).WithPolling(pollInterval).Should(Succeed())
	for _, m := range snap.Members {
		switch {
		case m.Name != live.Name:
		case m.ID != live.ID:
			r := removeUntilDone(ctx, t, env.Cluster, m)
			g.Expect(r.State).To(Equal(etcd.RemovalRemoved), "the member that shares the name under ID %x: %s", m.ID, r.Reason)
			g.Expect(hasMemberID(ctx, g, env, m.ID)).To(BeFalse())
		case m.NodeName != node:
			// The same member claimed by a second Node: asking to remove it there must not
			// remove the member that runs on node.
			r, err := env.Cluster.RemoveMember(ctx, m)
			if err == nil {
				g.Expect(r.State).NotTo(Equal(etcd.RemovalRemoved), "RemoveMember claims the running member %s was removed: %s", m, r.Reason)
			}
		}
	}
	g.Expect(hasMemberID(ctx, g, env, live.ID)).To(BeTrue(), "the running member %s must stay", live)
	for _, n := range env.Nodes {
		g.Expect(hasMemberID(ctx, g, env, memberOn(g, healthy, n).ID)).To(BeTrue(), "member on %s", n)
	}
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
// testRemoveRemoved: removing a member that is gone already reports Removed again, and
// nothing else changes.
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
		for _, n := range env.Nodes {
			ev, ok := evidenceThrough(snap, n)
			g.Expect(ok).To(BeTrue(), "Observe succeeded but says nothing about the member on Node %s", n)
			g.Expect(ev.Contact).NotTo(Equal(etcd.ContactAnswered), "the member on Node %s answered through a wrong CA", n)
			g.Expect(ev.Error).NotTo(BeEmpty(), "the member on Node %s: why it did not answer", n)
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
		g.Expect(etcd.ConditionReasonFor(err)).To(Equal(etcd.ClusterInspectionFailedReason))
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
		g.Expect(etcd.ConditionReasonFor(err)).To(Equal(etcd.ClusterConnectionDownReason))
		v := etcd.AssessHealth(etcd.HealthInput{ObserveErr: err, Machines: machines(env.Nodes...), Now: time.Now()})
		g.Expect(v.Cluster.Status).To(Equal(metav1.ConditionUnknown))
		g.Expect(v.Cluster.Reason).To(Equal(etcd.ClusterConnectionDownReason))
	}).WithContext(ctx).WithTimeout(2*eventually).WithPolling(pollInterval).Should(Succeed(),
		"a stopping apiserver may keep serving open port-forwards while it drains")
	r, err := env.Cluster.RemoveMember(ctx, memberOn(g, healthy, env.Nodes[1]))
	g.Expect(err).To(HaveOccurred(), "RemoveMember reported %s: %s", r.State, r.Reason)
	g.Expect(errors.Is(err, etcd.ErrUnreachable)).To(BeTrue(), "want ErrUnreachable, got %v", err)
	g.Expect(hasMember(ctx, g, env, env.Nodes[1])).To(BeTrue())
}

// testRemoveLeaderDirectly: the leader is removed with no leadership move first. etcd may answer
// with a leader change or a timeout while the old leader steps down after applying its own
// removal; the backend must report that as not yet known, never as a final refusal, and say
// Removed only once etcd confirms it.
// testTransientDuringRemoval: the leader is killed while a follower's removal runs. Until the
// leader is back, every answer is InProgress, an error, or a Removed that etcd confirms; after
// it, the removal completes and no other member is removed.
// expectNoRemoval asserts that RemoveMember of the member on node (as the healthy snapshot gave
// it) does not report the member removed and that etcd still has it.
