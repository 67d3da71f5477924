package membership

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Client is one member's connection, however the backend reached it.
type Client interface {
	// MemberList lists the members: the member's own view, or, when linearizable, the
	// membership the leader has committed, read through the member.
	MemberList(ctx context.Context, linearizable bool) (*clientv3.MemberListResponse, error)
	// MemberRemove asks etcd to remove the member with the given ID.
	MemberRemove(ctx context.Context, id uint64) error
	// Status is the member's own status.
	Status(ctx context.Context) (*clientv3.StatusResponse, error)
	// MoveLeader asks the member, which must lead, to hand leadership to the member with the
	// given ID.
	MoveLeader(ctx context.Context, id uint64) error
}

// Transport is what a backend does its own way: how it reaches the member at a place, how it
// reports a failed call, and how it records a member it is about to remove.
type Transport interface {
	// Reach returns a connection to the member at where.
	Reach(ctx context.Context, where string) (Client, error)
	// Describe returns the error to report for the call what, through where, that failed
	// with err: a bounded text the workload cluster's admins may read, wrapping the etcd
	// error class (etcd.ErrUnreachable, etcd.ErrTooLarge) when etcd did not answer.
	Describe(ctx context.Context, where, what string, err error) error
	// Lost tells the transport that a call through c failed without an answer from etcd, so a
	// kept connection may be broken.
	Lost(ctx context.Context, where string, c Client)
	// Removing records that target may apply its removal from now on: the member at its place
	// must not be asked for Status until a linearizable member list shows it is still a member
	// (see AskMember). via is where the request goes.
	Removing(target etcd.Member, via string)
}

// NewClient is the Client of a clientv3 cluster and maintenance API. endpoint is what
// Maintenance.Status is asked about; empty when maint is bound to one connection already.
func NewClient(cluster clientv3.Cluster, maint clientv3.Maintenance, endpoint string) Client {
	return &etcdClient{cluster: cluster, maint: maint, endpoint: endpoint}
}

type etcdClient struct {
	cluster  clientv3.Cluster
	maint    clientv3.Maintenance
	endpoint string
}

func (c *etcdClient) MemberList(ctx context.Context, linearizable bool) (*clientv3.MemberListResponse, error) {
	if linearizable {
		return c.cluster.MemberList(ctx)
	}
	return c.cluster.MemberList(ctx, clientv3.WithSerializable())
}

func (c *etcdClient) MemberRemove(ctx context.Context, id uint64) error {
	_, err := c.cluster.MemberRemove(ctx, id)
	return err
}

func (c *etcdClient) Status(ctx context.Context) (*clientv3.StatusResponse, error) {
	return c.maint.Status(ctx, c.endpoint)
}

func (c *etcdClient) MoveLeader(ctx context.Context, id uint64) error {
	_, err := c.maint.MoveLeader(ctx, id)
	return err
}

// Call runs one etcd call with its own deadline, so one slow member cannot use up the caller's.
func Call[T any](ctx context.Context, timeout time.Duration, what string, fn func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, timeout, fmt.Errorf("%s: call timeout %s expired", what, timeout))
	defer cancel()
	return fn(ctx)
}
