package kubeadm

import (
	"context"
	"errors"
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
	if a, ok := o.answers[toNode]; !ok || !a.answered() {
		// etcd would wait for the transfer until the call timeout; a member that does not
		// answer cannot take over anyway.
		return etcd.LeaderMove{}, fmt.Errorf("%w: etcd member %s on Node %s is not answering; not moving leadership to it", etcd.ErrUnreachable, to, toNode)
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

// MoveLeaderToCandidates moves leadership off the member on fromNode to the first of
// candidates that takes it, in order (pass etcd.LeaderCandidates). It returns the Node that
// leads now; it is a no-op, LeaderNotOnNode with no Node, when the member on fromNode does not
// lead. When no candidate takes it, the error joins every candidate's error.
func (b *Backend) MoveLeaderToCandidates(ctx context.Context, fromNode string, candidates []string) (string, etcd.LeaderMove, error) {
	if len(candidates) == 0 {
		return "", etcd.LeaderMove{}, fmt.Errorf("%w: no candidate to move etcd leadership off Node %s to", etcd.ErrInvalidInput, fromNode)
	}
	var errs []error
	for _, to := range candidates {
		mv, err := b.MoveLeader(ctx, fromNode, to)
		switch {
		case err != nil:
			b.logger(ctx).V(2).Info("Candidate did not take etcd leadership, trying the next", "node", fromNode, "toNode", to, "err", err.Error())
			errs = append(errs, err)
		case mv.Outcome == etcd.LeaderNotOnNode:
			return "", mv, nil
		default:
			return to, mv, nil
		}
	}
	return "", etcd.LeaderMove{}, fmt.Errorf("failed to move etcd leadership off Node %s to any of %v: %w", fromNode, candidates, errors.Join(errs...))
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
