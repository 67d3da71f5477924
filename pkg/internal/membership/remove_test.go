package membership

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

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

// observed builds the observation of the answers, as a backend that knows cluster 7 does.
func observed(g Gomega, tr Transport, in ...Answer) *Observation {
	v, err := Decide(in, 7, nil)
	g.Expect(err).NotTo(HaveOccurred())
	ms := slices.Clone(v.Members)
	for i := range ms {
		ms[i].NodeName = fmt.Sprint(ms[i].ID)
	}
	return &Observation{Snap: &etcd.Snapshot{Members: ms, LeaderID: v.LeaderID}, Decision: v, Answers: in, Transport: tr}
}

func TestObservation_RequestOrder(t *testing.T) {
	three := members("a", "b", "c")
	tests := []struct {
		name    string
		answers []Answer
		target  uint64
		want    []string
	}{
		{name: "the leader first, then other voters, the target last",
			answers: []Answer{answered("a", 1, 7, 2, three), answered("b", 2, 7, 2, three), answered("c", 3, 7, 2, three)},
			target:  1, want: []string{"b", "c", "a"}},
		{name: "the leader first although it sorts last and is not the target",
			answers: []Answer{answered("a", 1, 7, 3, three), answered("b", 2, 7, 3, three), answered("c", 3, 7, 3, three)},
			target:  1, want: []string{"c", "b", "a"}},
		{name: "removing the leader goes through a follower",
			answers: []Answer{answered("a", 1, 7, 1, three), answered("b", 2, 7, 1, three), answered("c", 3, 7, 1, three)},
			target:  1, want: []string{"b", "c", "a"}},
		{name: "members that did not answer, or answer from another cluster, are not used",
			answers: []Answer{answered("a", 1, 7, 1, three), down("b"), answered("c", 99, 8, 99, members("c"))},
			target:  2, want: []string{"a"}},
		{name: "through the target only when nobody else answers",
			answers: []Answer{answered("a", 1, 7, 1, three), down("b"), down("c")},
			target:  1, want: []string{"a"}},
		{name: "a never-started member goes through the leader and the other voters",
			answers: []Answer{answered("a", 1, 7, 2, three), answered("b", 2, 7, 2, append(three, etcd.Member{ID: 9, IsLearner: true})), answered("c", 3, 7, 2, three)},
			target:  9, want: []string{"b", "a", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(observed(g, nil, tt.answers...).RequestOrder(tt.target)).To(Equal(tt.want))
		})
	}
}

// TestChanger_Remove plays etcd's answers to MemberRemove and the linearizable member list
// that follows, and checks the Removal: Removed only on a linearizable list without the member.
func TestChanger_Remove(t *testing.T) {
	tests := []struct {
		name       string
		removeErr  error
		committed  []uint64
		wantState  etcd.RemovalState
		wantReason string
		wantLost   bool
	}{
		{name: "removed and confirmed", committed: []uint64{1, 2}, wantState: etcd.RemovalRemoved, wantReason: "linearizable member list confirms"},
		{name: "removed, not committed yet", committed: []uint64{1, 2, 3}, wantState: etcd.RemovalInProgress, wantReason: "still in the member list"},
		{name: "a transient answer confirmed by the list", removeErr: rpctypes.ErrGRPCLeaderChanged, committed: []uint64{1, 2},
			wantState: etcd.RemovalRemoved, wantReason: "may or may not be committed"},
		{name: "the connection lost during the call", removeErr: status.Error(codes.Unavailable, "error reading from server: EOF"), committed: []uint64{1, 2, 3},
			wantState: etcd.RemovalInProgress, wantReason: "may or may not be committed", wantLost: true},
		{name: "a refusal", removeErr: rpctypes.ErrGRPCPermissionDenied, committed: []uint64{1, 2, 3},
			wantState: etcd.RemovalRejected, wantReason: "etcd refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			ids := []uint64{1, 2, 3}
			tr := &fakeTransport{members: map[string]*fakeMember{}}
			var answers []Answer
			for i, id := range ids {
				where := string(rune('a' + i))
				tr.members[where] = &fakeMember{memberID: id, cluster: 7, own: ids, committed: tt.committed, removeErr: tt.removeErr}
				answers = append(answers, answered(where, id, 7, 1, []etcd.Member{{ID: 1}, {ID: 2}, {ID: 3}}))
			}
			var mem Memory
			_, err := mem.Decide(answers)
			g.Expect(err).NotTo(HaveOccurred())
			r := Changer{Memory: &mem, CallTimeout: time.Minute, Log: logr.Discard()}
			got, err := r.Remove(context.Background(), observed(g, tr, answers...), etcd.Member{ID: 3})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.State).To(Equal(tt.wantState), got.Reason)
			g.Expect(got.Reason).To(ContainSubstring(tt.wantReason))
			g.Expect(tr.removing).To(Equal([]string{"3 via a"}), "through the leader, recorded before the call")
			g.Expect(tr.members["a"].removed).To(Equal([]uint64{3}))
			g.Expect(tr.lost != nil).To(Equal(tt.wantLost))
			g.Expect(mem.Gone(3)).To(Equal(tt.wantState == etcd.RemovalRemoved))
		})
	}
}

func TestChanger_Remove_lastVoter(t *testing.T) {
	g := NewWithT(t)
	tr := &fakeTransport{members: map[string]*fakeMember{"a": {memberID: 1, cluster: 7, own: []uint64{1}}}}
	r := Changer{Memory: &Memory{}, CallTimeout: time.Minute, Log: logr.Discard()}
	got, err := r.Remove(context.Background(), observed(g, tr, answered("a", 1, 7, 1, []etcd.Member{{ID: 1}})), etcd.Member{ID: 1})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.State).To(Equal(etcd.RemovalRejected))
	g.Expect(got.Reason).To(ContainSubstring("last voting member"))
	g.Expect(tr.members["a"].removed).To(BeEmpty())
}

// TestChanger_MoveLeader: leadership moves through the member that says it leads, to a voter
// that answers; anything else is a no-op or an error of the class the caller acts on.
func TestChanger_MoveLeader(t *testing.T) {
	three := []etcd.Member{{ID: 1}, {ID: 2}, {ID: 3}, {ID: 4, IsLearner: true}}
	tests := []struct {
		name     string
		from, to uint64
		want     etcd.LeaderMoveOutcome
		wantErr  error
	}{
		{name: "the leader to a follower", from: 1, to: 2, want: etcd.LeaderMoved},
		{name: "a follower does not lead: no-op", from: 2, to: 3, want: etcd.LeaderNotOnNode},
		{name: "to a member not in the cluster", from: 1, to: 9, wantErr: etcd.ErrInvalidInput},
		{name: "to a learner", from: 1, to: 4, wantErr: etcd.ErrInvalidInput},
		{name: "to a member that does not answer", from: 1, to: 3, wantErr: etcd.ErrUnreachable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			tr := &fakeTransport{members: map[string]*fakeMember{"a": {memberID: 1, cluster: 7}, "b": {memberID: 2, cluster: 7}}}
			o := observed(g, tr, answered("a", 1, 7, 1, three), answered("b", 2, 7, 1, three), down("c"))
			mv, err := Changer{Memory: &Memory{}, CallTimeout: time.Minute, Log: logr.Discard()}.MoveLeader(context.Background(), o, etcd.Member{ID: tt.from}, etcd.Member{ID: tt.to})
			if tt.wantErr != nil {
				g.Expect(err).To(MatchError(tt.wantErr))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(mv.Outcome).To(Equal(tt.want))
		})
	}
}
