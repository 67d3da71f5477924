package etcd

import (
	"testing"

	. "github.com/onsi/gomega"
)

// TestProjectRemovals states what raft's majority rule allows when several members go one after
// the other: each removal is a membership change that commits only if a strict majority of the
// voters of the configuration it is proposed in is healthy, and after it healthy voters must
// still be a strict majority of the voters left; a cluster with no member left is destroyed.
func TestProjectRemovals(t *testing.T) {
	ids := func(members []MemberHealth, idx ...int) []Member {
		out := make([]Member, 0, len(idx))
		for _, i := range idx {
			out = append(out, members[i].Member)
		}
		return out
	}
	tests := []struct {
		name    string
		members []MemberHealth
		targets []int
		allowed bool
		reason  string
		message string
	}{
		{
			name:    "Three healthy, deleting two: 2 of 2 after the first, 1 of 1 after the second, both commit",
			members: members("Vh", "Vh", "Vh"), targets: []int{0, 1}, allowed: true, reason: RemovalSafeReason,
			message: "removing etcd member cp-0 keeps quorum: after it 2 of 2 voters are healthy; then removing etcd member cp-1 keeps quorum: after it 1 of 1 voters are healthy",
		},
		{
			name:    "Three healthy, deleting all three: the third would leave no member at all",
			members: members("Vh", "Vh", "Vh"), targets: []int{0, 1, 2}, reason: RemovalLastMemberReason,
			message: "removing etcd members cp-0, cp-1, cp-2 would remove every member; removing the last one would destroy the cluster",
		},
		{
			name:    "Every member going is refused even when their health is unknown",
			members: members("V?", "V?"), targets: []int{1, 0}, reason: RemovalLastMemberReason,
		},
		{
			name:    "Four voters with one down, deleting one healthy: 2 of 3 healthy after it",
			members: members("Vh", "Vh", "Vh", "Vu"), targets: []int{0}, allowed: true, reason: RemovalSafeReason,
		},
		{
			name:    "Four voters with one down, the second of two deletes of healthy members is refused: 1 of 2 healthy after it",
			members: members("Vh", "Vh", "Vh", "Vu"), targets: []int{0, 1}, reason: RemovalWouldLoseQuorumReason,
			message: "once etcd member cp-0 is removed, removing etcd member cp-1 would lose quorum: after it 1 of 2 voters are healthy",
		},
		{
			name:    "Four voters with one down, deleting a healthy one and then the down one keeps quorum",
			members: members("Vh", "Vh", "Vh", "Vu"), targets: []int{0, 3}, allowed: true, reason: RemovalSafeReason,
		},
		{
			name:    "Three voters with one down, deleting the down one and then a healthy one keeps quorum: 2 of 2, then 1 of 1",
			members: members("Vh", "Vh", "Vu"), targets: []int{2, 0}, allowed: true, reason: RemovalSafeReason,
		},
		{
			name:    "Three voters with one down, deleting a healthy one first is refused in that order: 1 of 2 after it",
			members: members("Vh", "Vh", "Vu"), targets: []int{0, 2}, reason: RemovalWouldLoseQuorumReason,
		},
		{
			name:    "Five healthy, deleting three: 2 of 2 are left, each step commits",
			members: members("Vh", "Vh", "Vh", "Vh", "Vh"), targets: []int{0, 1, 2}, allowed: true, reason: RemovalSafeReason,
		},
		{
			name:    "A member named twice is removed once",
			members: members("Vh", "Vh", "Vh"), targets: []int{0, 0}, allowed: true, reason: RemovalSafeReason,
		},
		{
			name:    "No target is a member: nothing changes",
			members: members("Vh", "Vh", "Vh"), allowed: true, reason: RemovalNoMemberReason,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := ProjectRemovals(tt.members, ids(tt.members, tt.targets...))
			g.Expect(got.Allowed).To(Equal(tt.allowed), got.Message)
			g.Expect(got.Reason).To(Equal(tt.reason), got.Message)
			if tt.message != "" {
				g.Expect(got.Message).To(Equal(tt.message))
			}
		})
	}
}

func TestCanRemoveMachines(t *testing.T) {
	tests := []struct {
		name     string
		snapshot *Snapshot
		going    []Machine
		// all are the Cluster's other control-plane Machines, besides going.
		all     []Machine
		allowed bool
		reason  string
		// noRemover leaves every going Machine without a MemberRemover; otherwise each has one.
		noRemover bool
	}{
		{name: "Two of three healthy Machines going keeps quorum", snapshot: cluster(3),
			going: []Machine{{Name: "m-cp-0", NodeName: "cp-0"}, {Name: "m-cp-1", NodeName: "cp-1"}}, allowed: true, reason: RemovalSafeReason},
		{name: "All three Machines going would remove the last member", snapshot: cluster(3),
			going: []Machine{{Name: "m-cp-0", NodeName: "cp-0"}, {Name: "m-cp-1", NodeName: "cp-1"}, {Name: "m-cp-2", NodeName: "cp-2"}}, reason: RemovalLastMemberReason},
		{name: "A Machine without a Node and without a member does not count", snapshot: cluster(3),
			going: []Machine{{Name: "m-new"}, {Name: "m-cp-0", NodeName: "cp-0"}}, allowed: true, reason: RemovalSafeReason},
		{name: "A Machine whose Node is missing counts with the member its name ties to it",
			snapshot: with(cluster(2), addMember(Member{ID: 7, Name: "m-gone", PeerURLs: []string{"https://10.0.0.7:2380"}})),
			going:    []Machine{{Name: "m-gone"}, {Name: "m-cp-0", NodeName: "cp-0"}, {Name: "m-cp-1", NodeName: "cp-1"}},
			reason:   RemovalLastMemberReason},
		{name: "A Machine without a Node counts with the member whose peer URL is on its address",
			snapshot: with(cluster(2), addMember(Member{ID: 7, PeerURLs: []string{"https://10.0.0.7:2380"}})),
			going:    []Machine{{Name: "m-new", Addresses: []string{"10.0.0.7"}}, {Name: "m-cp-0", NodeName: "cp-0"}, {Name: "m-cp-1", NodeName: "cp-1"}},
			reason:   RemovalLastMemberReason},
		{name: "A peer URL on a Machine's address does not tie a member another Machine names",
			snapshot: cluster(3),
			all:      []Machine{{Name: "m-cp-2", NodeName: "cp-2"}},
			going:    []Machine{{Name: "m-reused", Addresses: []string{"10.0.0.3"}}, {Name: "m-cp-0", NodeName: "cp-0"}},
			allowed:  true, reason: RemovalSafeReason},
		{name: "A healthy Machine going after another while a member is down is refused",
			snapshot: with(cluster(4), evidence(4, unreachable("connection refused"))),
			going:    []Machine{{Name: "m-cp-0", NodeName: "cp-0"}, {Name: "m-cp-1", NodeName: "cp-1"}}, reason: RemovalWouldLoseQuorumReason},
		{name: "A broken member's Machine deleted after a healthy one goes first, which keeps quorum for both (the repair path)",
			snapshot: with(cluster(3), evidence(3, unreachable("connection refused"))),
			going:    []Machine{{Name: "m-cp-0", NodeName: "cp-0"}, {Name: "m-cp-2", NodeName: "cp-2"}}, allowed: true, reason: RemovalSafeReason},
		{name: "No snapshot is never safe", going: []Machine{{Name: "m-cp-0", NodeName: "cp-0"}}, reason: RemovalHealthUnknownReason},
		{name: "One of three healthy Machines going without a remover leaves 2 of 3 voters healthy", snapshot: cluster(3), noRemover: true,
			going: []Machine{{Name: "m-cp-0", NodeName: "cp-0"}}, allowed: true, reason: RemovalSafeReason},
		{name: "Two of three healthy Machines going without a remover leave 1 of 3 voters healthy", snapshot: cluster(3), noRemover: true,
			going: []Machine{{Name: "m-cp-0", NodeName: "cp-0"}, {Name: "m-cp-1", NodeName: "cp-1"}}, reason: RemovalWouldLoseQuorumReason},
		{name: "The last Machine going without a remover leaves its member, not answering: the cluster is destroyed", snapshot: cluster(1), noRemover: true,
			going: []Machine{{Name: "m-cp-0", NodeName: "cp-0"}}, reason: RemovalLastMemberReason},
		{name: "A broken member's Machine going without a remover changes nothing", noRemover: true,
			snapshot: with(cluster(3), evidence(3, unreachable("connection refused"))),
			going:    []Machine{{Name: "m-cp-2", NodeName: "cp-2"}}, allowed: true, reason: RemovalNoMemberReason},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			going := append([]Machine(nil), tt.going...)
			for i := range going {
				if !tt.noRemover {
					going[i].MemberRemover = "a pre-terminate hook"
				}
			}
			got := CanRemoveMachines(tt.snapshot, testNow, going, append(tt.all, going...))
			g.Expect(got.Allowed).To(Equal(tt.allowed), got.Message)
			g.Expect(got.Reason).To(Equal(tt.reason), got.Message)
		})
	}
}

// TestProjectChanges: a member whose Machine's infrastructure is deleted while nothing removed it
// stays a voter that no longer answers, so it counts toward the quorum size and not as healthy.
func TestProjectChanges(t *testing.T) {
	pick := func(members []MemberHealth, idx ...int) []Member {
		out := make([]Member, 0, len(idx))
		for _, i := range idx {
			out = append(out, members[i].Member)
		}
		return out
	}
	tests := []struct {
		name              string
		members           []MemberHealth
		removed, stopping []int
		allowed           bool
		reason            string
		message           string
	}{
		{
			name:    "Three healthy, one stops answering: 2 of 3 voters healthy",
			members: members("Vh", "Vh", "Vh"), stopping: []int{0}, allowed: true, reason: RemovalSafeReason,
			message: "once etcd member cp-0, which nothing removes before its Machine's infrastructure is deleted, stops answering, quorum holds: 2 of 3 voters are healthy",
		},
		{
			name:    "Three healthy, two stop answering: 1 of 3 voters healthy",
			members: members("Vh", "Vh", "Vh"), stopping: []int{0, 1}, reason: RemovalWouldLoseQuorumReason,
			message: "once etcd members cp-0, cp-1, which nothing removes before their Machines' infrastructure is deleted, stop answering, quorum is lost: 1 of 3 voters are healthy",
		},
		{
			name:    "Three healthy, one removed and one stops answering: removing it leaves 1 of 2",
			members: members("Vh", "Vh", "Vh"), removed: []int{0}, stopping: []int{1}, reason: RemovalWouldLoseQuorumReason,
			message: "once etcd member cp-1, which nothing removes before its Machine's infrastructure is deleted, stops answering, removing etcd member cp-0 would lose quorum: after it 1 of 2 voters are healthy",
		},
		{
			name:    "Five healthy, one removed and one stops answering: 2 of 3 once removed",
			members: members("Vh", "Vh", "Vh", "Vh", "Vh"), removed: []int{0}, stopping: []int{1}, allowed: true, reason: RemovalSafeReason,
		},
		{
			name:    "A down voter that stops answering changes nothing",
			members: members("Vh", "Vh", "Vu"), stopping: []int{2}, allowed: true, reason: RemovalNoMemberReason,
		},
		{
			name:    "A NOSPACE voter that stops answering loses its vote; the healthy majority holds",
			members: members("Vh", "Vh", "Vn"), stopping: []int{2}, allowed: true, reason: RemovalSafeReason,
			message: "once etcd member cp-2, which nothing removes before its Machine's infrastructure is deleted, stops answering, quorum holds: 2 of 3 voters are healthy",
		},
		{
			name:    "Two NOSPACE voters of three that stop answering take quorum with them",
			members: members("Vh", "Vn", "Vn"), stopping: []int{1, 2}, reason: RemovalWouldLoseQuorumReason,
			message: "once etcd members cp-1, cp-2, which nothing removes before their Machines' infrastructure is deleted, stop answering, quorum is lost: 1 of 3 voters are healthy",
		},
		{
			name:    "The only member stops answering: 0 of 1, no member that answers is left",
			members: members("Vh"), stopping: []int{0}, reason: RemovalLastMemberReason,
			message: "every etcd member is removed or stops answering, which destroys the cluster: once etcd member cp-0, which nothing removes before its Machine's infrastructure is deleted, stops answering, quorum is lost: 0 of 1 voters are healthy",
		},
		{
			name:    "Three healthy, two removed and the third stops answering: no member that answers is left",
			members: members("Vh", "Vh", "Vh"), removed: []int{0, 1}, stopping: []int{2}, reason: RemovalLastMemberReason,
		},
		{
			name:    "Quorum already lost: nothing may stop answering",
			members: members("Vh", "Vh", "Vu", "Vu"), stopping: []int{0}, reason: RemovalQuorumLostReason,
		},
		{
			name:    "Whether quorum holds is unknown: nothing may stop answering",
			members: members("Vh", "V?", "Vu"), stopping: []int{0}, reason: RemovalHealthUnknownReason,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := ProjectChanges(tt.members, pick(tt.members, tt.removed...), pick(tt.members, tt.stopping...))
			g.Expect(got.Allowed).To(Equal(tt.allowed), got.Message)
			g.Expect(got.Reason).To(Equal(tt.reason), got.Message)
			if tt.message != "" {
				g.Expect(got.Message).To(Equal(tt.message))
			}
		})
	}
}

func TestCanRemoveMember_notAMember(t *testing.T) {
	g := NewWithT(t)
	s := cluster(3)
	s.SyntheticMemberIDs = true
	v := CanRemoveMember(s, testNow, Member{ID: 0x1b57f0c2aa9d3e41, Name: "cp-9-3f2a9c1e", NodeName: "cp-9"})
	g.Expect(v.Allowed).To(BeTrue())
	g.Expect(v.Reason).To(Equal(RemovalNoMemberReason))
	g.Expect(v.Message).To(Equal("etcd member cp-9-3f2a9c1e is not in the cluster; removing it changes nothing"), "named as given, not by an ID etcd may not have assigned")
}
