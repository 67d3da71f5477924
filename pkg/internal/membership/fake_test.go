package membership

import (
	"context"
	"errors"
	"fmt"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-adapter/etcd-adapter/internal/etcdrpc"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// fakeMember is a member as a Client sees it: its own (serializable) member list, the
// cluster's committed one (linearizable), and errors to answer with. Unit tests of pure logic
// only; the backends' suites run the core against real etcd.
type fakeMember struct {
	memberID, cluster uint64
	own, committed    []uint64
	ownErr, linErr    error
	removeErr         error
	statusAsked       bool
	removed           []uint64
}

func (f *fakeMember) list(ids []uint64) *clientv3.MemberListResponse {
	resp := &clientv3.MemberListResponse{Header: &pb.ResponseHeader{ClusterId: f.cluster, MemberId: f.memberID}}
	for _, id := range ids {
		resp.Members = append(resp.Members, &pb.Member{ID: id, Name: fmt.Sprint(id)})
	}
	return resp
}

func (f *fakeMember) MemberList(_ context.Context, linearizable bool) (*clientv3.MemberListResponse, error) {
	if linearizable {
		if f.linErr != nil {
			return nil, f.linErr
		}
		return f.list(f.committed), nil
	}
	if f.ownErr != nil {
		return nil, f.ownErr
	}
	return f.list(f.own), nil
}

func (f *fakeMember) MemberRemove(_ context.Context, id uint64) error {
	f.removed = append(f.removed, id)
	return f.removeErr
}

func (f *fakeMember) Status(context.Context) (*clientv3.StatusResponse, error) {
	f.statusAsked = true
	return &clientv3.StatusResponse{Header: &pb.ResponseHeader{ClusterId: f.cluster, MemberId: f.memberID}, Leader: f.memberID, RaftTerm: 2}, nil
}

func (f *fakeMember) MoveLeader(context.Context, uint64) error { return nil }

// fakeTransport reaches fake members by place and records what the core told it.
type fakeTransport struct {
	members  map[string]*fakeMember
	lost     []string
	removing []string
}

func (f *fakeTransport) Reach(_ context.Context, where string) (Client, error) {
	if m, ok := f.members[where]; ok {
		return m, nil
	}
	return nil, fmt.Errorf("%w: nothing at %s", etcd.ErrUnreachable, where)
}

func (f *fakeTransport) Describe(_ context.Context, where, what string, err error) error {
	if etcdrpc.IsEtcdAnswer(err) || errors.Is(err, etcd.ErrTooLarge) {
		return fmt.Errorf("%s at %s: %w", what, where, err)
	}
	return fmt.Errorf("%w: %s at %s: %w", etcd.ErrUnreachable, what, where, err)
}

func (f *fakeTransport) Lost(_ context.Context, where string, _ Client) {
	f.lost = append(f.lost, where)
}

func (f *fakeTransport) Removing(target etcd.Member, via string) {
	f.removing = append(f.removing, fmt.Sprintf("%x via %s", target.ID, via))
}
