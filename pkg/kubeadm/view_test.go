package kubeadm

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

func members(names ...string) []etcd.Member {
	out := make([]etcd.Member, 0, len(names))
	for i, n := range names {
		out = append(out, etcd.Member{ID: uint64(i + 1), Name: n, NodeName: n})
	}
	return out
}

func answered(node string, self, cluster, leader uint64, ms []etcd.Member) answer {
	return answer{node: node, at: time.Now(), selfID: self, clusterID: cluster, leaderID: leader, members: ms}
}

func Test_newView(t *testing.T) {
	three := members("a", "b", "c")
	tests := []struct {
		name        string
		answers     []answer
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
			name:        "unreachable members do not vote",
			answers:     []answer{answered("a", 1, 7, 1, three), {node: "b", err: errors.New("down")}},
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
			in := map[string]answer{}
			for _, a := range tt.answers {
				in[a.node] = a
			}
			v := newView(in)
			g.Expect(v.clusterID).To(Equal(tt.wantCluster))
			g.Expect(v.leaderID).To(Equal(tt.wantLeader))
			g.Expect(v.members).To(Equal(tt.wantMembers))
		})
	}
}

func Test_view_snapshot(t *testing.T) {
	g := NewWithT(t)
	three := members("a", "b", "c")
	in := map[string]answer{
		"a": answered("a", 1, 7, 1, three),
		"b": {node: "b", at: time.Now(), err: errors.New("connection refused")},
		"c": answered("c", 99, 8, 99, members("c")), // another cluster answers on Node c
	}
	in["a"] = func(a answer) answer {
		a.alarms = []memberAlarm{{1, etcd.AlarmNoSpace}, {2, etcd.AlarmCorrupt}}
		return a
	}(in["a"])
	s := newView(in).snapshot(in, time.Now())
	g.Expect(s.Backend).To(Equal("kubeadm"))
	g.Expect(s.Members).To(Equal(three))
	g.Expect(s.LeaderID).To(Equal(uint64(1)))
	a, _ := s.EvidenceFor(1)
	g.Expect(a.Contact).To(Equal(etcd.ContactAnswered))
	g.Expect(a.Alarms).To(Equal([]etcd.Alarm{etcd.AlarmNoSpace}), "only the alarms about the member itself")
	b, _ := s.EvidenceFor(2)
	g.Expect(b.Contact).To(Equal(etcd.ContactUnreachable))
	g.Expect(b.Error).To(ContainSubstring("connection refused"))
	c, _ := s.EvidenceFor(3)
	g.Expect(c.ClusterID).To(Equal(uint64(8)), "the answer on Node c is filed under the member on Node c")
	verdict := etcd.AssessMembers(s, time.Now())
	g.Expect(verdict[2].Health).To(Equal(etcd.Unhealthy))
	g.Expect(verdict[2].Message).To(ContainSubstring("split brain"))
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

func Test_removalFor(t *testing.T) {
	m := etcd.Member{ID: 5, Name: "n5", NodeName: "n5"}
	tests := []struct {
		name string
		err  error
		want etcd.RemovalState
	}{
		{name: "removed", want: etcd.RemovalRemoved},
		{name: "not found is removed", err: rpctypes.ErrGRPCMemberNotFound, want: etcd.RemovalRemoved},
		{name: "unhealthy cluster: retry", err: rpctypes.ErrGRPCUnhealthy, want: etcd.RemovalInProgress},
		{name: "not enough started members: retry", err: rpctypes.ErrGRPCMemberNotEnoughStarted, want: etcd.RemovalInProgress},
		{name: "learner not ready: retry", err: rpctypes.ErrGRPCLearnerNotReady, want: etcd.RemovalInProgress},
		{name: "anything else: rejected", err: rpctypes.ErrGRPCPermissionDenied, want: etcd.RemovalRejected},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r := removalFor(m, tt.err)
			g.Expect(r.State).To(Equal(tt.want))
			g.Expect(r.Member).To(Equal(m))
			g.Expect(r.Reason).To(ContainSubstring("n5"))
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
	obs := func(leader uint64, in ...answer) *observation {
		answers := map[string]answer{}
		for _, a := range in {
			answers[a.node] = a
		}
		v := newView(answers)
		s := v.snapshot(answers, time.Now())
		s.LeaderID = leader
		return &observation{snap: s, view: v, answers: answers}
	}
	down := func(node string) answer { return answer{node: node, err: errors.New("down")} }
	tests := []struct {
		name   string
		obs    *observation
		target string
		want   []string
	}{
		{
			name:   "leader first, then other voters, the target last",
			obs:    obs(2, answered("a", 1, 7, 2, three), answered("b", 2, 7, 2, three), answered("c", 3, 7, 2, three)),
			target: "a", want: []string{"b", "c", "a"},
		},
		{
			name:   "removing the leader goes through a follower",
			obs:    obs(1, answered("a", 1, 7, 1, three), answered("b", 2, 7, 1, three), answered("c", 3, 7, 1, three)),
			target: "a", want: []string{"b", "c", "a"},
		},
		{
			name:   "members that did not answer, or answer from another cluster, are not used",
			obs:    obs(1, answered("a", 1, 7, 1, three), down("b"), answered("c", 99, 8, 99, members("c"))),
			target: "b", want: []string{"a"},
		},
		{
			name:   "through the target only when nobody else answers",
			obs:    obs(1, answered("a", 1, 7, 1, three), down("b"), down("c")),
			target: "a", want: []string{"a"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(removalPath(tt.obs, tt.target)).To(Equal(tt.want))
		})
	}
}
