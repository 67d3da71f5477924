package membership

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

func Test_toAnswer(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tr := &fakeTransport{}
	a := toAnswer(ctx, tr, "d", nil, nil, errors.New("rpc error: code = Unavailable desc = connection closed"), errors.New("closed"))
	g.Expect(a.Answered()).To(BeFalse(), "no reply came from etcd: not answering")
	g.Expect(errors.Is(a.Err, etcd.ErrUnreachable)).To(BeTrue())

	a = toAnswer(ctx, tr, "d", nil, nil, rpctypes.ErrGRPCNoLeader, rpctypes.ErrGRPCNoLeader)
	g.Expect(a.Answered()).To(BeTrue(), "etcd answered with an error: listening but unhealthy")
	g.Expect(a.Errors).To(HaveLen(2))

	a = toAnswer(ctx, tr, "d", nil, nil, rpctypes.ErrGRPCNoLeader, rpctypes.ErrGRPCNotSupportedForLearner)
	g.Expect(a.Errors).To(HaveLen(1), "a learner's rejection of MemberList is a fact, not an error")
}

// TestAsk_mayBeRemoved: a member that may have been removed is asked for Status only once a
// linearizable member list through it shows it is a member; etcd v3.6 panics when a member
// that applied its own removal is asked for Status.
func TestAsk_mayBeRemoved(t *testing.T) {
	gone := func(id uint64) bool { return id == 5 }
	tests := []struct {
		name        string
		member      *fakeMember
		wantRemoved string
		wantStatus  bool
		wantMembers bool
	}{
		{name: "not in its own member list: removed",
			member: &fakeMember{memberID: 1, cluster: 7, own: []uint64{2, 3}}, wantRemoved: "not in its own member list"},
		{name: "removed by this process before: removed without another call",
			member: &fakeMember{memberID: 5, cluster: 7, own: []uint64{5, 2}, committed: []uint64{5, 2}}, wantRemoved: "has not applied its removal"},
		{name: "not in the linearizable member list: removed",
			member: &fakeMember{memberID: 1, cluster: 7, own: []uint64{1, 2}, committed: []uint64{2}}, wantRemoved: "linearizable member list"},
		{name: "the linearizable member list cannot be read: its own list counts, Status is not asked",
			member: &fakeMember{memberID: 1, cluster: 7, own: []uint64{1, 2}, linErr: rpctypes.ErrGRPCNoLeader}, wantMembers: true},
		{name: "still a member: Status is asked",
			member: &fakeMember{memberID: 1, cluster: 7, own: []uint64{1, 2}, committed: []uint64{1, 2}}, wantStatus: true, wantMembers: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			a := AskMember(context.Background(), &fakeTransport{}, tt.member, "a", Asking{Timeout: time.Minute, MayBeRemoved: true, Gone: gone})
			g.Expect(a.Answered()).To(BeTrue())
			g.Expect(a.ClusterID).To(Equal(uint64(7)))
			g.Expect(a.Removed).To(ContainSubstring(tt.wantRemoved))
			if tt.wantRemoved == "" {
				g.Expect(a.Removed).To(BeEmpty())
			}
			g.Expect(tt.member.statusAsked).To(Equal(tt.wantStatus))
			g.Expect(a.Members != nil).To(Equal(tt.wantMembers))
		})
	}
}

func TestAsk_tooLarge(t *testing.T) {
	g := NewWithT(t)
	own := make([]uint64, etcd.MaxMembers+1)
	for i := range own {
		own[i] = uint64(i + 1)
	}
	for _, mayBeRemoved := range []bool{false, true} {
		m := &fakeMember{memberID: 1, cluster: 7, own: own, committed: own}
		a := AskMember(context.Background(), &fakeTransport{}, m, "a", Asking{Timeout: time.Minute, MayBeRemoved: mayBeRemoved})
		g.Expect(a.Err).To(MatchError(etcd.ErrTooLarge), "nothing this member says is read")
		g.Expect(a.Members).To(BeNil())
	}
}
