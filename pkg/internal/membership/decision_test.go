package membership

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

func members(names ...string) []etcd.Member {
	out := make([]etcd.Member, 0, len(names))
	for i, n := range names {
		out = append(out, etcd.Member{ID: uint64(i + 1), Name: n})
	}
	return out
}

func answered(where string, selfID, cluster, leader uint64, ms []etcd.Member) Answer {
	return Answer{Where: where, At: time.Now(), SelfID: selfID, ClusterID: cluster, LeaderID: leader, Members: ms}
}

func down(where string) Answer { return Answer{Where: where, Err: errors.New("down")} }

func withTerm(a Answer, term uint64) Answer { a.RaftTerm = term; return a }

func TestDecide(t *testing.T) {
	three := members("a", "b", "c")
	a, b, c := etcd.Member{ID: 1}, etcd.Member{ID: 2}, etcd.Member{ID: 3}
	tests := []struct {
		name        string
		answers     []Answer
		known       uint64
		last        []etcd.Member
		wantErr     error
		wantCluster uint64
		wantLeader  uint64
		wantMembers []etcd.Member
	}{
		{
			name:        "all agree",
			answers:     []Answer{answered("a", 1, 7, 1, three), answered("b", 2, 7, 1, three), answered("c", 3, 7, 1, three)},
			wantCluster: 7, wantLeader: 1, wantMembers: three,
		},
		{
			name: "split brain on one place: the majority's cluster, list and leader win",
			answers: []Answer{answered("a", 1, 7, 2, three), answered("b", 2, 7, 2, three),
				answered("c", 99, 8, 99, members("c"))},
			wantCluster: 7, wantLeader: 2, wantMembers: three,
		},
		{
			name:    "a stranger answering alone: the member list seen last, for the cluster ID seen first",
			answers: []Answer{down("a"), answered("c", 99, 8, 99, members("c"))},
			known:   7, last: three,
			wantCluster: 7, wantMembers: three,
		},
		{
			name:    "a stranger answering alone, nothing seen before: no member list",
			answers: []Answer{down("a"), answered("c", 99, 8, 99, members("c"))},
			known:   7, wantErr: ErrNoMemberList,
		},
		{
			name:        "the cluster ID seen first wins against a majority of strangers",
			answers:     []Answer{answered("a", 1, 7, 1, three), answered("b", 98, 8, 98, members("b")), answered("c", 99, 8, 98, members("b"))},
			known:       7,
			wantCluster: 7, wantLeader: 1, wantMembers: three,
		},
		{
			name:        "the leader is the member that says it leads, not the one most followers name",
			answers:     []Answer{answered("a", 1, 7, 1, three), answered("b", 2, 7, 1, three), withTerm(answered("c", 3, 7, 3, three), 5)},
			wantCluster: 7, wantLeader: 3, wantMembers: three,
		},
		{
			name:        "the leader did not answer: the followers' word",
			answers:     []Answer{down("a"), answered("b", 2, 7, 1, three), answered("c", 3, 7, 1, three)},
			wantCluster: 7, wantLeader: 1, wantMembers: three,
		},
		{
			name:        "a learner's answer has no member list",
			answers:     []Answer{answered("a", 1, 7, 1, three), answered("d", 4, 7, 1, nil)},
			wantCluster: 7, wantLeader: 1, wantMembers: three,
		},
		{
			name:        "a removed member's answer does not count for the cluster ID",
			answers:     []Answer{answered("a", 1, 7, 1, []etcd.Member{a}), {Where: "b", SelfID: 2, ClusterID: 8, Removed: "removed"}},
			wantCluster: 7, wantLeader: 1, wantMembers: []etcd.Member{a},
		},
		{
			name:    "another cluster's list is never taken",
			answers: []Answer{answered("a", 7, 8, 7, []etcd.Member{c})}, known: 9,
			wantErr: ErrNoMemberList,
		},
		{
			name: "without the leader, the list most members report",
			answers: []Answer{answered("b", 2, 9, 1, []etcd.Member{a, b, c}), answered("c", 3, 9, 1, []etcd.Member{a, b, c}),
				answered("d", 4, 9, 1, []etcd.Member{a, b})},
			wantCluster: 9, wantLeader: 1, wantMembers: []etcd.Member{a, b, c},
		},
		{
			name:    "nobody answered",
			answers: []Answer{down("a")}, wantErr: ErrNoMemberList,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			v, err := Decide(tt.answers, tt.known, tt.last)
			if tt.wantErr != nil {
				g.Expect(err).To(MatchError(tt.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(v.ClusterID).To(Equal(tt.wantCluster))
			g.Expect(v.LeaderID).To(Equal(tt.wantLeader))
			g.Expect(v.Members).To(Equal(tt.wantMembers))
		})
	}
}

// TestDecide_removedMember: a member the cluster removed that has not applied its removal
// answers with its stale member list; with one member left that list would tie with the
// remaining member's and win when its key sorts first, keeping the removed member in every
// snapshot.
func TestDecide_removedMember(t *testing.T) {
	g := NewWithT(t)
	remaining := etcd.Member{ID: 0x9, Name: "a"}
	zombie := Answer{Where: "b", SelfID: 1, ClusterID: 7, Removed: "member 1 was removed from the cluster and has not applied its removal yet"}
	g.Expect(zombie.Answered()).To(BeTrue(), "it did answer")
	v, err := Decide([]Answer{answered("a", remaining.ID, 7, remaining.ID, []etcd.Member{remaining}), zombie}, 7, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Members).To(Equal([]etcd.Member{remaining}))
}

func TestDecide_alarms(t *testing.T) {
	g := NewWithT(t)
	three := members("a", "b", "c")
	a := answered("a", 1, 7, 1, three)
	a.Alarms = []etcd.ActiveAlarm{{MemberID: 4, Alarm: etcd.AlarmNoSpace}, {MemberID: 1, Alarm: etcd.AlarmNoSpace}, {MemberID: 1, Alarm: "NONE"}}
	c := answered("c", 3, 7, 1, three)
	c.Alarms = []etcd.ActiveAlarm{{MemberID: 2, Alarm: etcd.AlarmCorrupt}, {MemberID: 1, Alarm: etcd.AlarmNoSpace}}
	stranger := answered("d", 99, 8, 99, members("d"))
	stranger.Alarms = []etcd.ActiveAlarm{{MemberID: 99, Alarm: etcd.AlarmCorrupt}}
	v, err := Decide([]Answer{a, c, stranger}, 7, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Alarms).To(Equal([]etcd.ActiveAlarm{{MemberID: 1, Alarm: etcd.AlarmNoSpace}, {MemberID: 2, Alarm: etcd.AlarmCorrupt}, {MemberID: 4, Alarm: etcd.AlarmNoSpace}}),
		"every active alarm of the cluster once, sorted; none of another cluster")
}

func TestMemory_Decide(t *testing.T) {
	g := NewWithT(t)
	three := members("a", "b", "c")
	var m Memory
	_, err := m.Decide([]Answer{answered("a", 1, 7, 1, three)})
	g.Expect(err).NotTo(HaveOccurred())
	v, err := m.Decide([]Answer{answered("a", 1, 8, 1, members("x")), answered("b", 2, 8, 1, members("x")), down("c")})
	g.Expect(err).NotTo(HaveOccurred(), "strangers only: the member list seen last")
	g.Expect(v.ClusterID).To(Equal(uint64(7)), "the cluster ID seen first is kept")
	g.Expect(v.Members).To(Equal(three))
	m.markGone(2)
	g.Expect(m.Gone(2)).To(BeTrue())
	_, last := m.Recall()
	g.Expect(last).To(Equal([]etcd.Member{three[0], three[2]}), "a member confirmed gone is no member seen last")
}

func TestSplitStatusErrors(t *testing.T) {
	g := NewWithT(t)
	errs, alarms := SplitStatusErrors([]string{"memberID:10276657743932975437 alarm:NOSPACE ", "etcdserver: no leader", "memberID:99999999999999999999999 alarm:CORRUPT"})
	g.Expect(errs).To(Equal([]string{"etcdserver: no leader", "memberID:99999999999999999999999 alarm:CORRUPT"}), "an ID past uint64 is no alarm")
	g.Expect(alarms).To(Equal([]etcd.ActiveAlarm{{MemberID: 10276657743932975437, Alarm: etcd.AlarmNoSpace}}))
}

func TestIsLastVoter(t *testing.T) {
	g := NewWithT(t)
	ms := members("a", "b")
	ms[1].IsLearner = true
	g.Expect(IsLastVoter(ms, ms[0])).To(BeTrue(), "a learner does not count")
	g.Expect(IsLastVoter(ms, ms[1])).To(BeFalse(), "a learner is never the last voter")
	g.Expect(IsLastVoter(members("a", "b"), members("a", "b")[0])).To(BeFalse())
}
