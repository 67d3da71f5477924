package etcdcluster

import (
	"context"
	"slices"
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// memberRemoveMethod is the full gRPC method name of Cluster.MemberRemove.
const memberRemoveMethod = "/etcdserverpb.Cluster/MemberRemove"

// RemoveCall is one MemberRemove call a member answered.
type RemoveCall struct {
	// ID is the member the call asked to remove.
	ID uint64
	// Removed is true when etcd removed the member; NotFound when the member was already gone.
	// A call refused for another reason (an unhealthy cluster, a timeout) has neither.
	Removed, NotFound bool
}

// removeLog records the MemberRemove calls the cluster's members answered, so that a test can
// count the removals of one member from etcd's side rather than from whoever asked.
type removeLog struct {
	mu    sync.Mutex
	calls []RemoveCall
}

// MemberRemoveCalls returns every MemberRemove call the cluster's members answered, in order.
func (c *Cluster) MemberRemoveCalls() []RemoveCall {
	l := c.settings.removes
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.calls)
}

// intercept records MemberRemove calls and their outcome.
func (l *removeLog) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	resp, err := handler(ctx, req)
	if r, ok := req.(*pb.MemberRemoveRequest); ok && info.FullMethod == memberRemoveMethod {
		l.mu.Lock()
		l.calls = append(l.calls, RemoveCall{ID: r.ID, Removed: err == nil, NotFound: status.Code(err) == codes.NotFound})
		l.mu.Unlock()
	}
	return resp, err
}
