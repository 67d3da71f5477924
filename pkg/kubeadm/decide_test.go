package kubeadm

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/internal/membership"
	"github.com/etcd-adapter/etcd-adapter/pkg/internal/membership/membershiptest"
)

func members(names ...string) []etcd.Member {
	out := make([]etcd.Member, 0, len(names))
	for i, n := range names {
		out = append(out, etcd.Member{ID: uint64(i + 1), Name: n})
	}
	return out
}

// placed is members with NodeName set as assignNodes sets it when every Node runs an etcd Pod.
func placed(ms []etcd.Member) []etcd.Member {
	pods := map[string]bool{}
	for _, m := range ms {
		pods[m.Name] = true
	}
	return nodeFacts{pods: pods}.assignNodes(ms)
}

func answered(node string, memberID, cluster, leader uint64, ms []etcd.Member) membership.Answer {
	return membership.Answer{Where: node, At: time.Now(), SelfID: memberID, ClusterID: cluster, LeaderID: leader, Members: ms}
}

// answerMap is the answers by Node, as observe has them.
func answerMap(in ...membership.Answer) []membership.Answer {
	out := slices.Clone(in)
	slices.SortFunc(out, func(x, y membership.Answer) int { return strings.Compare(x.Where, y.Where) })
	return out
}

// newDecision is the decision the membership core decides, with the member list seen last.
func newDecision(g Gomega, answers []membership.Answer, known uint64, last []etcd.Member) membership.Decision {
	v, err := membership.Decide(answers, known, last)
	g.Expect(err).NotTo(HaveOccurred())
	return v
}

func Test_decision_snapshot(t *testing.T) {
	g := NewWithT(t)
	three := members("a", "b", "c")
	a := answered("a", 1, 7, 1, three)
	// Member 4 raised NOSPACE and was removed since; member 2 raised CORRUPT and is down.
	a.Alarms = []etcd.ActiveAlarm{{MemberID: 1, Alarm: etcd.AlarmNoSpace}, {MemberID: 4, Alarm: etcd.AlarmNoSpace}}
	c := answered("c", 3, 7, 1, three)
	c.Alarms = []etcd.ActiveAlarm{{MemberID: 2, Alarm: etcd.AlarmCorrupt}}
	in := answerMap(a, membership.Answer{Where: "b", At: time.Now(), Err: errors.New("connection refused")}, c)
	v := newDecision(g, in, 0, nil)
	s := snapshot(v, placed(v.Members), in, time.Now())
	g.Expect(s.Backend).To(Equal("kubeadm"))
	g.Expect(s.LeaderID).To(Equal(uint64(1)))
	g.Expect(s.Alarms).To(Equal([]etcd.ActiveAlarm{{MemberID: 1, Alarm: etcd.AlarmNoSpace}, {MemberID: 2, Alarm: etcd.AlarmCorrupt}, {MemberID: 4, Alarm: etcd.AlarmNoSpace}}),
		"every active alarm of the cluster, also of a removed member")
	ea, _ := s.EvidenceFor(1)
	g.Expect(ea.Contact).To(Equal(etcd.ContactAnswered))
	g.Expect(ea.Alarms).To(Equal([]etcd.Alarm{etcd.AlarmNoSpace}))
	eb, _ := s.EvidenceFor(2)
	g.Expect(eb.Contact).To(Equal(etcd.ContactUnreachable))
	g.Expect(eb.Error).To(ContainSubstring("connection refused"))
	g.Expect(eb.Alarms).To(Equal([]etcd.Alarm{etcd.AlarmCorrupt}), "the alarm another member reports is on the member it names")
	ec, _ := s.EvidenceFor(3)
	g.Expect(ec.Alarms).To(BeEmpty())
}

func Test_decision_snapshot_splitBrain(t *testing.T) {
	three := members("a", "b", "c")
	tests := []struct {
		name    string
		answers []membership.Answer
		known   uint64
		last    []etcd.Member
	}{
		{
			name:    "one Node of three answers from another cluster",
			answers: []membership.Answer{answered("a", 1, 7, 1, three), answered("b", 2, 7, 1, three), answered("c", 99, 8, 99, members("c"))},
		},
		{
			name:    "the stranger is the only one that answers",
			answers: []membership.Answer{{Where: "a", Err: errors.New("down")}, {Where: "b", Err: errors.New("down")}, answered("c", 99, 8, 99, members("c"))},
			known:   7, last: three,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			in := answerMap(tt.answers...)
			v := newDecision(g, in, tt.known, tt.last)
			s := snapshot(v, placed(v.Members), in, time.Now())
			ev, ok := s.EvidenceFor(3)
			g.Expect(ok).To(BeTrue(), "the answer on Node c is filed under the member on Node c")
			g.Expect(ev.ClusterID).To(Equal(uint64(8)))
			g.Expect(ev.Errors).To(ContainElement(ContainSubstring("split brain")))
			verdict := etcd.AssessMembers(s, time.Now())
			g.Expect(verdict[2].Health).To(Equal(etcd.Unhealthy))
			g.Expect(verdict[2].Message).To(ContainSubstring("split brain"))
		})
	}
}

func Test_decision_snapshot_duplicateNames(t *testing.T) {
	g := NewWithT(t)
	// Member 4 is the old member of Node b (a reused hostname): never removed, not running.
	ms := append(members("a", "b", "c"), etcd.Member{ID: 4, Name: "b", PeerURLs: []string{"https://10.0.0.2:2380"}})
	in := answerMap(answered("a", 1, 7, 1, ms), answered("b", 2, 7, 1, ms), answered("c", 3, 7, 1, ms))
	v := newDecision(g, in, 0, nil)
	s := snapshot(v, placed(v.Members), in, time.Now())
	g.Expect(s.MembersOnNode("b")).To(HaveLen(2), "both members are in the snapshot, on Node b")
	live, ok := s.EvidenceFor(2)
	g.Expect(ok).To(BeTrue())
	g.Expect(live.Contact).To(Equal(etcd.ContactAnswered), "the member the Pod reaches answered")
	old, ok := s.EvidenceFor(4)
	g.Expect(ok).To(BeTrue(), "the old member is not 'not asked'")
	g.Expect(old.Contact).To(Equal(etcd.ContactUnreachable))
	g.Expect(old.Error).To(ContainSubstring("does not run there"))
	verdict := etcd.AssessMembers(s, time.Now())
	g.Expect(verdict[1].Health).To(Equal(etcd.Healthy))
	g.Expect(verdict[3].Health).To(Equal(etcd.Unhealthy), "the dead one never looks healthy")
}

func Test_decision_snapshot_podGone(t *testing.T) {
	g := NewWithT(t)
	three := members("a", "b", "c")
	in := answerMap(answered("a", 1, 7, 1, three), answered("b", 2, 7, 1, three))
	v := newDecision(g, in, 0, nil)
	facts := nodeFacts{pods: map[string]bool{"a": true, "b": true}, nodes: map[string]bool{"a": true, "b": true, "c": true}}
	s := snapshot(v, facts.assignNodes(v.Members), in, time.Now())
	ev, ok := s.EvidenceFor(3)
	g.Expect(ok).To(BeTrue())
	g.Expect(ev.Contact).To(Equal(etcd.ContactUnknown))
	g.Expect(ev.Error).To(ContainSubstring("runs no etcd Pod"))
	g.Expect(etcd.AssessMembers(s, time.Now())[2].Health).To(Equal(etcd.Unknown))
}

func Test_nodeFacts_assignNodes(t *testing.T) {
	neverStarted := func(id uint64, peer string) etcd.Member {
		return etcd.Member{ID: id, PeerURLs: []string{peer}, IsLearner: true}
	}
	facts := nodeFacts{
		pods:  map[string]bool{"a": true},
		nodes: map[string]bool{"a": true, "b": true, "joining": true, "x": true, "y": true},
		byIP:  map[string][]string{"10.0.0.1": {"a"}, "10.0.0.2": {"b"}, "10.0.0.9": {"joining"}, "10.0.0.7": {"x", "y"}},
	}
	tests := []struct {
		name string
		in   etcd.Member
		want string
	}{
		{name: "a member on the Node of its name with an etcd Pod", in: etcd.Member{ID: 1, Name: "a"}, want: "a"},
		{name: "a member whose Pod is gone but whose Node exists", in: etcd.Member{ID: 2, Name: "b"}, want: "b"},
		{name: "a ghost: no Node has its name", in: etcd.Member{ID: 3, Name: "gone"}, want: ""},
		{name: "never started: the Node whose InternalIP is its peer host", in: neverStarted(4, "https://10.0.0.9:2380"), want: "joining"},
		{name: "never started on an address no Node has", in: neverStarted(5, "https://10.0.0.5:2380"), want: ""},
		{name: "never started on an address two Nodes have: not guessed", in: neverStarted(6, "https://10.0.0.7:2380"), want: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(facts.needNodes([]etcd.Member{tt.in})).To(Equal(tt.in.Name != "a"))
			g.Expect(facts.assignNodes([]etcd.Member{tt.in})[0].NodeName).To(Equal(tt.want))
		})
	}
}

// Test_divergences runs the membership core's shared cases (the rules this backend and
// pkg/external once decided differently) through this backend's own observation: each member
// answers on the Node of its name, the membership core decides, the members are placed on their
// Nodes and the snapshot is built.
func Test_divergences(t *testing.T) {
	node := func(id uint64) string { return fmt.Sprintf("node-%d", id) }
	member := func(id uint64) etcd.Member { return etcd.Member{ID: id, Name: node(id)} }
	for _, tc := range membershiptest.Divergences() {
		t.Run(tc.Name, func(t *testing.T) {
			g := NewWithT(t)
			answers := membershiptest.Answers(tc, node, member)
			v, err := decide(membershiptest.Memory(g, tc), answers)
			var s *etcd.Snapshot
			if err == nil {
				s = snapshot(v, placed(v.Members), answers, time.Now())
			}
			membershiptest.Check(g, tc, s, err)
		})
	}
}
