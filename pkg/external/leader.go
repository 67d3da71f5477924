package external

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-adapter/etcd-adapter/internal/etcdrpc"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// MoveLeader moves leadership off member from to member to, through the leader's own
// connection (etcd accepts MoveLeader only from the leader). It is a no-op, LeaderNotOnNode,
// when from does not say it leads.
func (b *Backend) MoveLeader(ctx context.Context, from, to etcd.Member) (etcd.LeaderMove, error) {
	o, err := b.observe(ctx)
	if err != nil {
		return etcd.LeaderMove{}, err
	}
	l, ok := o.self(from.ID)
	switch {
	case !ok && o.snap.LeaderID == from.ID && from.ID != 0:
		return etcd.LeaderMove{}, fmt.Errorf("%w: etcd member %s leads but did not answer, so leadership cannot be moved through it", etcd.ErrUnreachable, from)
	case !ok || l.leaderID != l.selfID:
		return etcd.LeaderMove{Outcome: etcd.LeaderNotOnNode}, nil
	}
	target, ok := o.snap.MemberByID(to.ID)
	switch {
	case !ok:
		return etcd.LeaderMove{}, fmt.Errorf("%w: etcd member %x is not in the cluster", etcd.ErrInvalidInput, to.ID)
	case target.IsLearner:
		return etcd.LeaderMove{}, fmt.Errorf("%w: etcd member %s is a learner and cannot lead", etcd.ErrInvalidInput, target)
	}
	if _, ok := o.self(target.ID); !ok {
		return etcd.LeaderMove{}, fmt.Errorf("%w: etcd member %s is not answering; not moving leadership to it", etcd.ErrUnreachable, target)
	}
	cli, err := b.client(ctx, l.endpoint, o.creds)
	if err != nil {
		return etcd.LeaderMove{}, fmt.Errorf("%w: failed to reach the etcd leader at %s: %w", etcd.ErrUnreachable, l.endpoint, err)
	}
	_, err = call(ctx, b, "MoveLeader", func(ctx context.Context) (*clientv3.MoveLeaderResponse, error) { return cli.MoveLeader(ctx, target.ID) })
	switch {
	case err == nil:
	case etcdrpc.IsEtcdAnswer(err):
		return etcd.LeaderMove{}, fmt.Errorf("%w: etcd leader at %s refused to move leadership to %s: %w", etcd.ErrRefused, l.endpoint, target, b.rpcError(ctx, l.endpoint, "MoveLeader", err))
	default:
		return etcd.LeaderMove{}, fmt.Errorf("%w: failed to move etcd leadership from %s to %s: %w", etcd.ErrUnreachable, l.endpoint, target, b.rpcError(ctx, l.endpoint, "MoveLeader", err))
	}
	b.logger(ctx).Info("Moved etcd leadership", "member", from.String(), "toMember", target.String())
	return etcd.LeaderMove{Outcome: etcd.LeaderMoved}, nil
}
