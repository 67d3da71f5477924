package kubeadm

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// startObserved starts a workload cluster of three members and a backend that observed them
// healthy.
func startObserved(t *testing.T, g Gomega) (*workloadCluster, *Backend, *faults, *etcd.Snapshot) {
	t.Helper()
	w := startWorkloadCluster(t, workload, 3)
	b := w.backend(t)
	return w, b, &faults{w: w}, observeHealthy(t.Context(), g, b, 3)
}

// removeUntilDone calls RemoveMember on every pass, as a controller does, and checks each answer
// against etcd itself: never Rejected, never an error, and Removed only when etcd's own member
// list no longer has the member.
func removeUntilDone(ctx context.Context, t *testing.T, b *Backend, f *faults, m etcd.Member) []etcd.Removal {
	t.Helper()
	var seen []etcd.Removal
	NewWithT(t).Eventually(func(g Gomega) {
		r, err := b.RemoveMember(ctx, m)
		g.Expect(err).NotTo(HaveOccurred())
		seen = append(seen, r)
		g.Expect(r.State).NotTo(Equal(etcd.RemovalRejected), r.Reason)
		if r.State == etcd.RemovalRemoved {
			has, err := f.HasMemberID(ctx, m.ID)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(has).To(BeFalse(), "RemoveMember said Removed while etcd still has the member: %s", r.Reason)
		}
		g.Expect(r.State).To(Equal(etcd.RemovalRemoved), r.Reason)
	}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
	return seen
}

func TestBackend_RemoveMember_leaderDirectly(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	_, b, f, s := startObserved(t, g)
	leader, ok := s.Leader()
	g.Expect(ok).To(BeTrue())
	// No leadership move first: the removal goes through a follower, and the leader steps down
	// once it applied its own removal.
	removeUntilDone(ctx, t, b, f, leader)
	g.Expect(f.MemberCount(ctx)).To(Equal(2))
	g.Eventually(func(g Gomega) {
		s, err := b.Observe(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.Members).To(HaveLen(2))
		g.Expect(s.LeaderID).NotTo(BeZero())
		g.Expect(s.LeaderID).NotTo(Equal(leader.ID))
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

func TestBackend_RemoveMember_leaderKilledDuringRemoval(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	w := startWorkloadCluster(t, workload, 5)
	b := w.backend(t)
	f := &faults{w: w}
	s := observeHealthy(ctx, g, b, 5)
	leader, _ := s.Leader()
	var target etcd.Member
	for _, m := range s.Members {
		if m.ID != leader.ID {
			target = m
		}
	}
	// The removal goes through the leader first; the leader is killed while the request runs.
	killed := make(chan string, 1)
	var once sync.Once
	b.beforeRemove = func(via string) {
		once.Do(func() {
			_ = w.etcd.MemberOnNode(via).Kill()
			killed <- via
		})
	}
	first, err := b.RemoveMember(ctx, target)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(<-killed).To(Equal(leader.NodeName), "the request went to the leader")
	g.Expect(first.State).NotTo(Equal(etcd.RemovalRejected), "a transient answer is not final: %s", first.Reason)
	if first.State == etcd.RemovalRemoved {
		g.Expect(f.HasMemberID(ctx, target.ID)).To(BeFalse(), first.Reason)
	}
	removeUntilDone(ctx, t, b, f, target)
	g.Expect(f.MemberCount(ctx)).To(Equal(4))
	g.Expect(f.HasMemberID(ctx, leader.ID)).To(BeTrue(), "only the target was removed")
}

func TestBackend_RemoveMember_neverStartedOnItsNode(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	w, b, f, _ := startObserved(t, g)
	// A Machine whose kubeadm join failed: its Node registered with its own address, and the
	// member added for it never started.
	joining := w.nodes[0] + "-joining"
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: joining}}
	g.Expect(w.APIServer.Client.Create(ctx, node)).To(Succeed())
	t.Cleanup(func() { _ = w.APIServer.Client.Delete(context.WithoutCancel(ctx), node) })
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.9"}}
	g.Expect(w.APIServer.Client.Status().Update(ctx, node)).To(Succeed())
	id, _, err := w.etcd.AddGhostLearnerOn(ctx, "127.0.0.9")
	g.Expect(err).NotTo(HaveOccurred())

	s, err := b.Observe(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	m, ok := s.MemberByID(id)
	g.Expect(ok).To(BeTrue())
	g.Expect(m.Started()).To(BeFalse())
	g.Expect(m.NodeName).To(Equal(joining), "placed on the Node whose InternalIP is its peer URL host")
	g.Expect(s.MembersOnNode(joining)).To(HaveLen(1))
	v := etcd.CanRemoveNode(s, time.Now(), joining)
	g.Expect(v.Allowed).To(BeTrue(), v.Message)
	removeUntilDone(ctx, t, b, f, m)
	g.Expect(f.MemberCount(ctx)).To(Equal(3))
}

func TestBackend_Observe_loneStrangerIsSplitBrain(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	w, b, f, s := startObserved(t, g)
	victim := w.nodes[2]
	member, _ := s.MemberByNode(victim)
	// Two members down and the third Node's etcd answering from a cluster of its own (a member
	// that lost its data and bootstrapped again): it is the only one that answers.
	g.Expect(f.KillMember(ctx, w.nodes[0])).To(Succeed())
	g.Expect(f.KillMember(ctx, w.nodes[1])).To(Succeed())
	g.Expect(f.SplitBrain(ctx, victim)).To(Succeed())
	g.Eventually(func(g Gomega) {
		s, err := b.Observe(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.Members).To(HaveLen(3), "the member list is the cluster's last one, not the stranger's")
		ev, ok := s.EvidenceFor(member.ID)
		g.Expect(ok).To(BeTrue())
		g.Expect(ev.Contact).To(Equal(etcd.ContactAnswered))
		v := etcd.AssessHealth(etcd.HealthInput{Snapshot: s, Machines: []etcd.Machine{{Name: victim, NodeName: victim}}, Now: time.Now()})
		g.Expect(v.Machines[victim].Status).To(Equal(metav1.ConditionFalse))
		g.Expect(v.Machines[victim].Message).To(ContainSubstring("split brain"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	for _, m := range s.Members {
		r, err := b.RemoveMember(ctx, m)
		if err == nil {
			g.Expect(r.State).NotTo(Equal(etcd.RemovalRemoved), "Removed on the word of a stranger: %s", r.Reason)
		} else {
			g.Expect(errors.Is(err, etcd.ErrUnreachable)).To(BeTrue(), "%v", err)
		}
	}
}

func TestBackend_Observe_alarmsOfARemovedMember(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	w, b, f, s := startObserved(t, g)
	victim, _ := s.MemberByNode(w.nodes[1])
	g.Expect(f.RaiseNoSpace(ctx, w.nodes[1])).To(Succeed())
	removeUntilDone(ctx, t, b, f, victim)
	g.Eventually(func(g Gomega) {
		s, err := b.Observe(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.Members).To(HaveLen(2))
		g.Expect(s.Alarms).To(ContainElement(etcd.ActiveAlarm{MemberID: victim.ID, Alarm: etcd.AlarmNoSpace}),
			"NOSPACE stays active on the cluster after its member is gone")
	}).WithTimeout(30 * time.Second).Should(Succeed())
}

// TestBackend_Observe_freshBackendAfterRemoval: a backend that just started (a manager that
// replaced the one that removed a member) never asks the removed member for Status while it
// still answers on its Node; etcd v3.6 panics on that ("failed to find local ID in cluster
// members"), which in this test binary ends every test.
func TestBackend_Observe_freshBackendAfterRemoval(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	w := startWorkloadCluster(t, workload, 3)
	f := &faults{w: w}
	s := observeHealthy(ctx, g, w.backend(t), 3)
	victim, _ := s.MemberByNode(w.nodes[2])
	removeUntilDone(ctx, t, w.backend(t), f, victim)
	for range 5 {
		fresh := w.backend(t)
		s, err := fresh.Observe(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		_, has := s.MemberByID(victim.ID)
		g.Expect(has).To(BeFalse(), "the removed member is no member: %+v", s.Members)
	}
}

// TestBackend_Observe_twoClustersInEqualNumbers: on a backend's first observation, one Node's
// etcd answering for the cluster and another's for a cluster of its own (the third member
// down) is refused with etcd.ErrInvalidInput, never guessed; a backend that observed the
// cluster before keeps its cluster ID and reports the stranger as split brain.
func TestBackend_Observe_twoClustersInEqualNumbers(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	w := startWorkloadCluster(t, workload, 3)
	before := w.backend(t)
	observeHealthy(ctx, g, before, 3)
	f := &faults{w: w}
	g.Expect(f.KillMember(ctx, w.nodes[0])).To(Succeed())
	g.Expect(f.SplitBrain(ctx, w.nodes[2])).To(Succeed())
	g.Eventually(func(g Gomega) {
		_, err := w.backend(t).Observe(ctx)
		g.Expect(errors.Is(err, etcd.ErrInvalidInput)).To(BeTrue(), "want ErrInvalidInput, got %v", err)
		g.Expect(err.Error()).To(ContainSubstring("equal numbers"))
	}).WithTimeout(30 * time.Second).Should(Succeed())
	s, err := before.Observe(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(s.Members).To(HaveLen(3))
	v := etcd.AssessHealth(etcd.HealthInput{Snapshot: s, Machines: []etcd.Machine{{Name: w.nodes[2], NodeName: w.nodes[2]}}, Now: time.Now()})
	g.Expect(v.Machines[w.nodes[2]].Message).To(ContainSubstring("split brain"))
}

// TestBackend_noSpaceOnEveryMember: every member of a real etcd with a NOSPACE alarm (each member
// that applies a put over its quota raises its own) still takes part in raft, so quorum is not
// lost: etcd itself commits a membership change then. etcd-adapter counts them as voting, not
// healthy: a removal that would leave no healthy majority is refused as WouldLoseQuorum, never as
// quorum already lost.
func TestBackend_noSpaceOnEveryMember(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	w, b, f, _ := startObserved(t, g)
	for _, node := range w.nodes {
		g.Expect(f.RaiseNoSpace(ctx, node)).To(Succeed())
	}

	var s *etcd.Snapshot
	g.Eventually(func(g Gomega) {
		var err error
		s, err = b.Observe(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(s.Alarms).To(HaveLen(3))
		for _, mh := range etcd.AssessMembers(s, time.Now()) {
			g.Expect(mh.Health).To(Equal(etcd.Unhealthy), mh.Message)
			g.Expect(mh.NoSpace).To(BeTrue(), "%s: %s", mh.Member, mh.Message)
		}
	}).WithTimeout(30 * time.Second).Should(Succeed())
	v := etcd.CanRemoveNode(s, time.Now(), w.nodes[0])
	g.Expect(v.Allowed).To(BeFalse())
	g.Expect(v.Reason).To(Equal(etcd.RemovalWouldLoseQuorumReason), v.Message)
	g.Expect(v.Message).To(ContainSubstring("0 of 2 voters are healthy (2 refuse writes with a NOSPACE alarm but still vote)"))

	// The oracle is etcd: a membership change commits while every member has the alarm.
	m, err := f.member(w.nodes[0])
	g.Expect(err).NotTo(HaveOccurred())
	cli, err := m.NewClient(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(cli.Close()).To(Succeed()) })
	_, err = cli.Put(ctx, "k", "v")
	g.Expect(err).To(MatchError(ContainSubstring("database space exceeded")), "every member refuses writes")
	// Note: etcd refuses a member add until the member asked has been connected to every voter
	// for 5 s (go.etcd.io/etcd/server/v3 etcdserver/server.go, mayAddMember with
	// --strict-reconfig-check; "unhealthy cluster"), which a cluster this young may not be.
	var added *clientv3.MemberAddResponse
	g.Eventually(func() error {
		added, err = cli.MemberAddAsLearner(ctx, []string{"https://127.0.0.1:1"})
		return err
	}).WithTimeout(30*time.Second).Should(Succeed(), "etcd commits a membership change under NOSPACE")
	_, err = cli.MemberRemove(ctx, added.Member.ID)
	g.Expect(err).NotTo(HaveOccurred())
}
