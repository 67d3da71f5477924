package kubeadm

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

func members(names ...string) []etcd.Member {
	out := make([]etcd.Member, 0, len(names))
	for i, n := range names {
		out = append(out, etcd.Member{ID: uint64(i + 1), Name: n})
	}
	return out
}

// placed is members with NodeName set as place sets it when every Node runs an etcd Pod.
func placed(ms []etcd.Member) []etcd.Member {
	pods := map[string]bool{}
	for _, m := range ms {
		pods[m.Name] = true
	}
	return hosts{pods: pods}.place(ms)
}

func answered(node string, self, cluster, leader uint64, ms []etcd.Member) answer {
	return answer{node: node, at: time.Now(), selfID: self, clusterID: cluster, leaderID: leader, members: ms}
}

func answerMap(in ...answer) map[string]answer {
	out := map[string]answer{}
	for _, a := range in {
		out[a.node] = a
	}
	return out
}

func Test_newView(t *testing.T) {
	three := members("a", "b", "c")
	withTerm := func(a answer, term uint64) answer { a.raftTerm = term; return a }
	tests := []struct {
		name        string
		answers     []answer
		known       uint64
		wantCluster uint64
		wantLeader  uint64
		wantMembers []etcd.Member
	}{
		{
			name:        "all agree",
			answers:     []answer{answered("a", 1, 7, 1, three), answered("b", 2, 7, 1, three), answered("c", 3, 7, 1, three)},
			wantCluster: 7, wantLeader: 1, wantMembers: three,
		},
		{
			name: "split brain on one Node: the majority's cluster, list and leader win",
			answers: []answer{answered("a", 1, 7, 2, three), answered("b", 2, 7, 2, three),
				answered("c", 99, 8, 99, members("c"))},
			wantCluster: 7, wantLeader: 2, wantMembers: three,
		},
		{
			name:        "the cluster ID seen first wins even when a stranger answers alone",
			answers:     []answer{{node: "a", err: errors.New("down")}, answered("c", 99, 8, 99, members("c"))},
			known:       7,
			wantCluster: 7,
		},
		{
			name:        "the cluster ID seen first wins against a majority of strangers",
			answers:     []answer{answered("a", 1, 7, 1, three), answered("b", 98, 8, 98, members("b")), answered("c", 99, 8, 98, members("b"))},
			known:       7,
			wantCluster: 7, wantLeader: 1, wantMembers: three,
		},
		{
			name: "the leader is the member that says it leads, not the one most followers name",
			answers: []answer{answered("a", 1, 7, 1, three), answered("b", 2, 7, 1, three),
				withTerm(answered("c", 3, 7, 3, three), 5)},
			wantCluster: 7, wantLeader: 3, wantMembers: three,
		},
		{
			name:        "two members say they lead: the higher raft term wins",
			answers:     []answer{withTerm(answered("a", 1, 7, 1, three), 4), withTerm(answered("b", 2, 7, 2, three), 5)},
			wantCluster: 7, wantLeader: 2, wantMembers: three,
		},
		{
			name:        "the leader did not answer: the followers' word",
			answers:     []answer{{node: "a", err: errors.New("down")}, answered("b", 2, 7, 1, three), answered("c", 3, 7, 1, three)},
			wantCluster: 7, wantLeader: 1, wantMembers: three,
		},
		{
			name:        "a learner's answer has no member list",
			answers:     []answer{answered("a", 1, 7, 1, three), answered("d", 4, 7, 1, nil)},
			wantCluster: 7, wantLeader: 1, wantMembers: three,
		},
		{
			name:    "nobody answered",
			answers: []answer{{node: "a", err: errors.New("down")}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			v := newView(answerMap(tt.answers...), tt.known)
			g.Expect(v.clusterID).To(Equal(tt.wantCluster))
			g.Expect(v.leaderID).To(Equal(tt.wantLeader))
			g.Expect(v.members).To(Equal(tt.wantMembers))
		})
	}
}

func Test_view_snapshot(t *testing.T) {
	g := NewWithT(t)
	three := members("a", "b", "c")
	a := answered("a", 1, 7, 1, three)
	// Member 4 raised NOSPACE and was removed since; member 2 raised CORRUPT and is down.
	a.alarms = []memberAlarm{{1, etcd.AlarmNoSpace}, {4, etcd.AlarmNoSpace}}
	c := answered("c", 3, 7, 1, three)
	c.alarms = []memberAlarm{{2, etcd.AlarmCorrupt}}
	in := answerMap(a, answer{node: "b", at: time.Now(), err: errors.New("connection refused")}, c)
	v := newView(in, 0)
	s := v.snapshot(placed(v.members), in, time.Now())
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

func Test_view_snapshot_splitBrain(t *testing.T) {
	three := members("a", "b", "c")
	tests := []struct {
		name    string
		answers []answer
		known   uint64
		last    []etcd.Member
	}{
		{
			name:    "one Node of three answers from another cluster",
			answers: []answer{answered("a", 1, 7, 1, three), answered("b", 2, 7, 1, three), answered("c", 99, 8, 99, members("c"))},
		},
		{
			name:    "the stranger is the only one that answers",
			answers: []answer{{node: "a", err: errors.New("down")}, {node: "b", err: errors.New("down")}, answered("c", 99, 8, 99, members("c"))},
			known:   7, last: three,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			in := answerMap(tt.answers...)
			v := newView(in, tt.known)
			if v.members == nil {
				g.Expect(strangerAnswered(in, v)).To(BeTrue())
				v.members = tt.last
			}
			s := v.snapshot(placed(v.members), in, time.Now())
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

func Test_view_snapshot_duplicateNames(t *testing.T) {
	g := NewWithT(t)
	// Member 4 is the old member of Node b (a reused hostname): never removed, not running.
	ms := append(members("a", "b", "c"), etcd.Member{ID: 4, Name: "b", PeerURLs: []string{"https://10.0.0.2:2380"}})
	in := answerMap(answered("a", 1, 7, 1, ms), answered("b", 2, 7, 1, ms), answered("c", 3, 7, 1, ms))
	v := newView(in, 0)
	s := v.snapshot(placed(v.members), in, time.Now())
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

func Test_view_snapshot_podGone(t *testing.T) {
	g := NewWithT(t)
	three := members("a", "b", "c")
	in := answerMap(answered("a", 1, 7, 1, three), answered("b", 2, 7, 1, three))
	v := newView(in, 0)
	h := hosts{pods: map[string]bool{"a": true, "b": true}, nodes: map[string]bool{"a": true, "b": true, "c": true}}
	s := v.snapshot(h.place(v.members), in, time.Now())
	ev, ok := s.EvidenceFor(3)
	g.Expect(ok).To(BeTrue())
	g.Expect(ev.Contact).To(Equal(etcd.ContactUnknown))
	g.Expect(ev.Error).To(ContainSubstring("runs no etcd Pod"))
	g.Expect(etcd.AssessMembers(s, time.Now())[2].Health).To(Equal(etcd.Unknown))
}

func Test_hosts_place(t *testing.T) {
	neverStarted := func(id uint64, peer string) etcd.Member {
		return etcd.Member{ID: id, PeerURLs: []string{peer}, IsLearner: true}
	}
	h := hosts{
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
			g.Expect(h.needNodes([]etcd.Member{tt.in})).To(Equal(tt.in.Name != "a"))
			g.Expect(h.place([]etcd.Member{tt.in})[0].NodeName).To(Equal(tt.want))
		})
	}
}

func Test_splitStatusErrors(t *testing.T) {
	g := NewWithT(t)
	errs, alarms := splitStatusErrors([]string{"memberID:10276657743932975437 alarm:NOSPACE ", "etcdserver: no leader"})
	g.Expect(errs).To(Equal([]string{"etcdserver: no leader"}))
	g.Expect(alarms).To(Equal([]memberAlarm{{memberID: 10276657743932975437, alarm: etcd.AlarmNoSpace}}))
}

func Test_toAnswer(t *testing.T) {
	g := NewWithT(t)
	a := toAnswer("d", nil, nil, errors.New("rpc error: code = Unavailable desc = connection closed"), errors.New("closed"))
	g.Expect(a.answered()).To(BeFalse(), "no reply came from etcd: not answering")
	g.Expect(errors.Is(a.err, etcd.ErrUnreachable)).To(BeTrue())

	a = toAnswer("d", nil, nil, rpctypes.ErrGRPCNoLeader, rpctypes.ErrGRPCNoLeader)
	g.Expect(a.answered()).To(BeTrue(), "etcd answered with an error: listening but unhealthy")
	g.Expect(a.errors).To(HaveLen(2))
}

func Test_outcomeOf(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want removeOutcome
	}{
		{name: "removed", want: removeDone},
		{name: "not found", err: rpctypes.ErrGRPCMemberNotFound, want: removeDone},
		{name: "leader changed", err: rpctypes.ErrGRPCLeaderChanged, want: removeUnsettled},
		{name: "timeout", err: rpctypes.ErrGRPCTimeout, want: removeUnsettled},
		{name: "timeout due to leader fail", err: rpctypes.ErrGRPCTimeoutDueToLeaderFail, want: removeUnsettled},
		{name: "timeout due to connection lost", err: rpctypes.ErrGRPCTimeoutDueToConnectionLost, want: removeUnsettled},
		{name: "no leader", err: rpctypes.ErrGRPCNoLeader, want: removeUnsettled},
		{name: "stopped", err: rpctypes.ErrGRPCStopped, want: removeUnsettled},
		{name: "unhealthy cluster", err: rpctypes.ErrGRPCUnhealthy, want: removeUnsettled},
		{name: "not enough started members", err: rpctypes.ErrGRPCMemberNotEnoughStarted, want: removeUnsettled},
		{name: "learner not ready", err: rpctypes.ErrGRPCLearnerNotReady, want: removeUnsettled},
		{name: "connection lost during the call", err: status.Error(codes.Unavailable, "error reading from server: EOF"), want: removeUnsettled},
		{name: "call deadline", err: status.Error(codes.DeadlineExceeded, "context deadline exceeded"), want: removeUnsettled},
		{name: "the port-forward died mid-call", err: status.Error(codes.Unknown, "unexpected HTTP status code received from server: 200 (OK); malformed header: missing HTTP content-type"), want: removeUnsettled},
		{name: "anything else etcd says", err: rpctypes.ErrGRPCPermissionDenied, want: removeRejected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(outcomeOf(tt.err)).To(Equal(tt.want))
		})
	}
}

func Test_isLastVoter(t *testing.T) {
	g := NewWithT(t)
	ms := members("a", "b")
	ms[1].IsLearner = true
	g.Expect(isLastVoter(ms, ms[0])).To(BeTrue(), "a learner does not count")
	g.Expect(isLastVoter(ms, ms[1])).To(BeFalse(), "a learner is never the last voter")
	g.Expect(isLastVoter(members("a", "b"), members("a", "b")[0])).To(BeFalse())
}

func Test_removalPath(t *testing.T) {
	three := members("a", "b", "c")
	obs := func(in ...answer) *observation {
		answers := answerMap(in...)
		v := newView(answers, 0)
		return &observation{snap: v.snapshot(placed(v.members), answers, time.Now()), view: v, answers: answers}
	}
	down := func(node string) answer { return answer{node: node, err: errors.New("down")} }
	tests := []struct {
		name   string
		obs    *observation
		target uint64
		want   []string
	}{
		{
			name:   "the leader first, then other voters, the target last",
			obs:    obs(answered("a", 1, 7, 2, three), answered("b", 2, 7, 2, three), answered("c", 3, 7, 2, three)),
			target: 1, want: []string{"b", "c", "a"},
		},
		{
			name:   "the leader first although it sorts last and is not the target",
			obs:    obs(answered("a", 1, 7, 3, three), answered("b", 2, 7, 3, three), answered("c", 3, 7, 3, three)),
			target: 1, want: []string{"c", "b", "a"},
		},
		{
			name:   "removing the leader goes through a follower",
			obs:    obs(answered("a", 1, 7, 1, three), answered("b", 2, 7, 1, three), answered("c", 3, 7, 1, three)),
			target: 1, want: []string{"b", "c", "a"},
		},
		{
			name:   "members that did not answer, or answer from another cluster, are not used",
			obs:    obs(answered("a", 1, 7, 1, three), down("b"), answered("c", 99, 8, 99, members("c"))),
			target: 2, want: []string{"a"},
		},
		{
			name:   "through the target only when nobody else answers",
			obs:    obs(answered("a", 1, 7, 1, three), down("b"), down("c")),
			target: 1, want: []string{"a"},
		},
		{
			name:   "a never-started member goes through the leader and the other voters",
			obs:    obs(answered("a", 1, 7, 2, append(three, etcd.Member{ID: 9, IsLearner: true})), answered("b", 2, 7, 2, three), answered("c", 3, 7, 2, three)),
			target: 9, want: []string{"b", "a", "c"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(removalPath(tt.obs, tt.target)).To(Equal(tt.want))
		})
	}
}

// Test_newView_removedMember: a member the cluster removed that has not applied its removal
// answers with its stale member list; with one member left that list would tie with the
// remaining member's and win when its key sorts first, keeping the removed member in every
// snapshot.
func Test_newView_removedMember(t *testing.T) {
	g := NewWithT(t)
	remaining := etcd.Member{ID: 0x9, Name: "a"}
	removed := &pb.Member{ID: 0x1, Name: "b"}
	stale := &clientv3.MemberListResponse{
		Header:  &pb.ResponseHeader{ClusterId: 7, MemberId: removed.ID},
		Members: []*pb.Member{{ID: remaining.ID, Name: remaining.Name}, removed},
	}
	zombie := removedAnswer("b", stale, "member 1 was removed from the cluster and has not applied its removal yet")
	g.Expect(zombie.answered()).To(BeTrue(), "it did answer")
	v := newView(answerMap(answered("a", remaining.ID, 7, remaining.ID, []etcd.Member{remaining}), zombie), 7)
	g.Expect(v.members).To(Equal([]etcd.Member{remaining}))
}
