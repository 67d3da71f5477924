package kubeadm

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// MoveLeader moves leadership off the member on fromNode to the member on toNode, through the
// leader's own connection (etcd accepts MoveLeader only from the leader). It is a no-op,
// LeaderNotOnNode, when the member on fromNode does not lead or there is none. Callers try the
// Nodes etcd.LeaderCandidates gives, in order, until one succeeds.
func (b *Backend) MoveLeader(ctx context.Context, fromNode, toNode string) (etcd.LeaderMove, error) {
	log := b.logger(ctx).WithValues("node", fromNode, "toNode", toNode)
	o, err := b.observe(ctx)
	if err != nil {
		return etcd.LeaderMove{}, err
	}
	from, ok := o.snap.MemberByNode(fromNode)
	if !ok || from.ID != o.snap.LeaderID {
		return etcd.LeaderMove{Outcome: etcd.LeaderNotOnNode}, nil
	}
	to, err := transferee(o.snap, toNode)
	if err != nil {
		return etcd.LeaderMove{}, err
	}
	c, err := b.pool.get(ctx, fromNode, o.creds)
	if err != nil {
		return etcd.LeaderMove{}, fmt.Errorf("failed to reach the etcd leader on Node %s: %w", fromNode, err)
	}
	_, err = call(ctx, b, "MoveLeader", func(ctx context.Context) (*clientv3.MoveLeaderResponse, error) {
		return c.maint.MoveLeader(ctx, to.ID)
	})
	if err != nil {
		if isEtcdAnswer(err) {
			return etcd.LeaderMove{}, fmt.Errorf("%w: etcd leader on Node %s refused to move leadership to %s: %w", etcd.ErrRefused, fromNode, to, err)
		}
		b.pool.drop(fromNode, c)
		return etcd.LeaderMove{}, fmt.Errorf("%w: failed to move etcd leadership from Node %s to %s: %w", etcd.ErrUnreachable, fromNode, to, err)
	}
	log.Info("Moved etcd leadership", "member", from.Name, "toMember", to.Name)
	return etcd.LeaderMove{Outcome: etcd.LeaderMoved}, nil
}

// transferee is the member on toNode, if it can take leadership.
func transferee(s *etcd.Snapshot, toNode string) (etcd.Member, error) {
	to, ok := s.MemberByNode(toNode)
	switch {
	case !ok:
		return to, fmt.Errorf("%w: no etcd member is hosted on Node %s", etcd.ErrInvalidInput, toNode)
	case to.IsLearner:
		return to, fmt.Errorf("%w: etcd member %s on Node %s is a learner and cannot lead", etcd.ErrInvalidInput, to, toNode)
	}
	return to, nil
}
