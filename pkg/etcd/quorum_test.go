package etcd

import (
	"testing"

	. "github.com/onsi/gomega"
)

// members builds member verdicts from a compact spec: one letter per member, V/L for voter or
// learner, then h/u/? for healthy, unhealthy or unknown, or n for unhealthy only because of a
// NOSPACE alarm. Member i has ID i+1.
func members(spec ...string) []MemberHealth {
	out := make([]MemberHealth, 0, len(spec))
	for i, s := range spec {
		h := map[byte]Health{'h': Healthy, 'u': Unhealthy, '?': Unknown, 'n': Unhealthy}[s[1]]
		out = append(out, MemberHealth{Member: Member{ID: uint64(i + 1), Name: node(i), NodeName: node(i), IsLearner: s[0] == 'L'}, Health: h, NoSpace: s[1] == 'n'})
	}
	return out
}

func TestProjectRemoval(t *testing.T) {
	tests := []struct {
		name    string
		members []MemberHealth
		target  uint64
		allowed bool
		reason  string
		message string
	}{
		{
			name:    "Can remove a healthy member from three healthy voters",
			members: members("Vh", "Vh", "Vh"), target: 1, allowed: true, reason: RemovalSafeReason,
			message: "removing etcd member cp-0 keeps quorum: after it 2 of 2 voters are healthy",
		},
		{
			name:    "Can't remove a healthy member from three voters with one down",
			members: members("Vh", "Vh", "Vu"), target: 1, reason: RemovalWouldLoseQuorumReason,
			message: "removing etcd member cp-0 would lose quorum: after it 1 of 2 voters are healthy",
		},
		{
			name:    "Can remove the down member from three voters with one down",
			members: members("Vh", "Vh", "Vu"), target: 3, allowed: true, reason: RemovalSafeReason,
		},
		{
			name:    "Can remove a down member from five voters with two down",
			members: members("Vh", "Vh", "Vh", "Vu", "Vu"), target: 4, allowed: true, reason: RemovalSafeReason,
			message: "removing etcd member cp-3 keeps quorum: after it 3 of 4 voters are healthy",
		},
		{
			name:    "Can't remove a healthy member from five voters with two down",
			members: members("Vh", "Vh", "Vh", "Vu", "Vu"), target: 1, reason: RemovalWouldLoseQuorumReason,
		},
		{
			name:    "Voters with a NOSPACE alarm still vote, so quorum is not lost; removing a healthy one would leave no healthy majority",
			members: members("Vn", "Vn", "Vh"), target: 3, reason: RemovalWouldLoseQuorumReason,
			message: "removing etcd member cp-2 would lose quorum: after it 0 of 2 voters are healthy (2 refuse writes with a NOSPACE alarm but still vote)",
		},
		{
			name:    "Every voter with a NOSPACE alarm: no removal, and quorum is not lost",
			members: members("Vn", "Vn", "Vn"), target: 1, reason: RemovalWouldLoseQuorumReason,
		},
		{
			name:    "Can remove a NOSPACE voter when the healthy voters stay a majority: it votes for its own removal",
			members: members("Vh", "Vh", "Vn", "Vn"), target: 3, allowed: true, reason: RemovalSafeReason,
			message: "removing etcd member cp-2 keeps quorum: after it 2 of 3 voters are healthy (1 refuse writes with a NOSPACE alarm but still vote)",
		},
		{
			name:    "Voters that do not answer do not vote: quorum is lost",
			members: members("Vu", "Vu", "Vn"), target: 3, reason: RemovalQuorumLostReason,
			message: "quorum is already lost: 0 of 3 voters are healthy (1 refuse writes with a NOSPACE alarm but still vote); etcd cannot commit a membership change",
		},
		{
			name:    "Unknown health counts as unhealthy",
			members: members("Vh", "Vh", "V?"), target: 2, reason: RemovalWouldLoseQuorumReason,
		},
		{
			name:    "A learner may be promoted at any moment and then counts as an unhealthy voter",
			members: members("Vh", "Vh", "Lh"), target: 1, reason: RemovalWouldLoseQuorumReason,
			message: "removing etcd member cp-0 would lose quorum: after it 1 of 1 voters are healthy, and 1 learner(s) may be promoted at any moment",
		},
		{
			name:    "Removing the learner itself from two healthy voters is safe",
			members: members("Vh", "Vh", "Lu"), target: 3, allowed: true, reason: RemovalSafeReason,
		},
		{
			name:    "Never the last member",
			members: members("Vh"), target: 1, reason: RemovalLastMemberReason,
			message: "etcd member cp-0 is the last member; removing it would destroy the cluster",
		},
		{
			name:    "Never the last voter, even with a learner left",
			members: members("Vh", "Lh"), target: 1, reason: RemovalWouldLoseQuorumReason,
			message: "removing etcd member cp-0 would lose quorum: after it 0 of 0 voters are healthy, and 1 learner(s) may be promoted at any moment",
		},
		{
			name:    "Can remove a learner that never caught up from a failed 1 to 2 join",
			members: members("Vh", "Lu"), target: 2, allowed: true, reason: RemovalSafeReason,
			message: "removing etcd member cp-1 keeps quorum: after it 1 of 1 voters are healthy",
		},
		{
			name:    "Can remove the learner from three voters with one down and a learner",
			members: members("Vh", "Vh", "Vu", "Lu"), target: 4, allowed: true, reason: RemovalSafeReason,
		},
		{
			name:    "Can remove the down voter from three voters with one down and a learner",
			members: members("Vh", "Vh", "Vu", "Lh"), target: 3, allowed: true, reason: RemovalSafeReason,
			message: "removing etcd member cp-2 keeps quorum: after it 2 of 2 voters are healthy, and 1 learner(s) may be promoted at any moment",
		},
		{
			name:    "Can't remove a healthy voter from three voters with one down and a learner",
			members: members("Vh", "Vh", "Vu", "Lh"), target: 1, reason: RemovalWouldLoseQuorumReason,
		},
		{
			name:    "Nothing is safe once quorum is lost, not even removing a down member",
			members: members("Vh", "Vu"), target: 2, reason: RemovalQuorumLostReason,
			message: "quorum is already lost: 1 of 2 voters are healthy; etcd cannot commit a membership change",
		},
		{
			name:    "Every voter unknown is not quorum lost: whether etcd can commit is unknown",
			members: members("V?", "V?", "V?"), target: 1, reason: RemovalHealthUnknownReason,
			message: "whether etcd has quorum is unknown: 0 of 3 voters are healthy (the health of 3 is unknown); no membership change is known to be safe until enough of them are known to be healthy",
		},
		{
			name:    "One healthy and one unknown of three voters: quorum depends on the unknown one",
			members: members("Vh", "V?", "Vu"), target: 3, reason: RemovalHealthUnknownReason,
		},
		{
			name:    "Quorum is lost when even every unknown voter being healthy would not make a majority",
			members: members("V?", "Vu", "Vu"), target: 2, reason: RemovalQuorumLostReason,
		},
		{
			name:    "A target that is not a member changes nothing",
			members: members("Vh", "Vh", "Vh"), target: 42, allowed: true, reason: RemovalNoMemberReason,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := ProjectRemoval(tt.members, tt.target)
			g.Expect(got.Allowed).To(Equal(tt.allowed))
			g.Expect(got.Reason).To(Equal(tt.reason))
			if tt.message != "" {
				g.Expect(got.Message).To(Equal(tt.message))
			}
		})
	}
}

func TestCanRemoveNode(t *testing.T) {
	tests := []struct {
		name     string
		snapshot *Snapshot
		node     string
		allowed  bool
		reason   string
	}{
		{name: "healthy three, remove one", snapshot: cluster(3), node: "cp-1", allowed: true, reason: RemovalSafeReason},
		{name: "no snapshot is never safe", snapshot: nil, node: "cp-1", reason: RemovalHealthUnknownReason},
		{name: "a Node without a member changes nothing", snapshot: cluster(3), node: "worker-0", allowed: true, reason: RemovalNoMemberReason},
		{
			name:     "a ghost voter that cannot be asked counts against quorum",
			snapshot: with(cluster(2), addMember(Member{ID: 9, Name: "ghost"})),
			node:     "cp-1", reason: RemovalWouldLoseQuorumReason,
		},
		{
			name:     "a never-started member added as a voter counts against quorum",
			snapshot: with(cluster(2), addMember(Member{ID: 0xab})),
			node:     "cp-1", reason: RemovalWouldLoseQuorumReason,
		},
		{
			name:     "a split-brain member is not a healthy voter",
			snapshot: with(cluster(3), evidence(3, func(e *MemberEvidence) { e.ClusterID = 0xbad })),
			node:     "cp-0", reason: RemovalWouldLoseQuorumReason,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := CanRemoveNode(tt.snapshot, testNow, tt.node)
			g.Expect(got.Allowed).To(Equal(tt.allowed), got.Message)
			g.Expect(got.Reason).To(Equal(tt.reason))
			g.Expect(got.Message).NotTo(BeEmpty())
		})
	}
}

func TestCanRemediate(t *testing.T) {
	g := NewWithT(t)
	s := with(cluster(3), evidence(3, unreachable("connection refused")))

	g.Expect(CanRemediate(s, testNow, Machine{Name: "m-cp-2", NodeName: "cp-2"}).Allowed).To(BeTrue(), "the broken Machine can go")
	g.Expect(CanRemediate(s, testNow, Machine{Name: "m-cp-0", NodeName: "cp-0"}).Allowed).To(BeFalse(), "a healthy one can't while another is down")
	v := CanRemediate(s, testNow, Machine{Name: "m-new"})
	g.Expect(v.Allowed).To(BeTrue())
	g.Expect(v.Reason).To(Equal(RemovalNoMemberReason))
}
