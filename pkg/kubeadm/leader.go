package kubeadm

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-adapter/etcd-adapter/internal/etcdrpc"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// MoveLeader moves leadership off member from to member to, through the leader's own
// connection (etcd accepts MoveLeader only from the leader). It is a no-op, LeaderNotOnNode,
// when from does not lead or there is no leader. Callers try the members
// etcd.LeaderCandidates gives, in order, until one succeeds.
func (b *Backend) MoveLeader(ctx context.Context, fromMember, toMember etcd.Member) (etcd.LeaderMove, error) {
	log := b.logger(ctx).WithValues("member", fromMember.String(), "toMember", toMember.String())
	o, err := b.observe(ctx)
	if err != nil {
		return etcd.LeaderMove{}, err
	}
	from, leads, err := leaderToMove(o, fromMember.ID)
	if err != nil {
		return etcd.LeaderMove{}, err
	}
	if !leads {
		return etcd.LeaderMove{Outcome: etcd.LeaderNotOnNode}, nil
	}
	fromNode := from.node
	to, err := transferee(o.snap, toMember.ID)
	if err != nil {
		return etcd.LeaderMove{}, err
	}
	if _, ok := o.answerOf(to.ID); !ok {
		// etcd would wait for the transfer until the call timeout; a member that does not
		// answer cannot take over anyway.
		return etcd.LeaderMove{}, fmt.Errorf("%w: etcd member %s on Node %s is not answering; not moving leadership to it", etcd.ErrUnreachable, to, to.NodeName)
	}
	c, err := b.pool.get(ctx, fromNode, o.creds)
	if err != nil {
		return etcd.LeaderMove{}, fmt.Errorf("failed to reach the etcd leader on Node %s: %w", fromNode, err)
	}
	_, err = call(ctx, b, "MoveLeader", func(ctx context.Context) (*clientv3.MoveLeaderResponse, error) {
		return c.maint.MoveLeader(ctx, to.ID)
	})
	if err != nil {
		if etcdrpc.IsEtcdAnswer(err) {
			return etcd.LeaderMove{}, fmt.Errorf("%w: etcd leader on Node %s refused to move leadership to %s: %w", etcd.ErrRefused, fromNode, to, err)
		}
		b.dropUnlessCallerEnded(ctx, fromNode, c)
		return etcd.LeaderMove{}, fmt.Errorf("%w: failed to move etcd leadership from Node %s to %s: %w", etcd.ErrUnreachable, fromNode, to, err)
	}
	log.Info("Moved etcd leadership", "member", fromMember.String(), "toMember", to.String())
	return etcd.LeaderMove{Outcome: etcd.LeaderMoved}, nil
}

// leaderToMove decides from the member's own Status whether it leads (its Leader is its own
// ID): etcd accepts MoveLeader only from the leader, and a follower's belief about who leads may
// be stale. A member that did not answer is an error when the others name it leader (its
// leadership cannot be moved through it), and a no-op otherwise.
func leaderToMove(o *observation, id uint64) (answer, bool, error) {
	a, ok := o.answerOf(id)
	switch {
	case ok:
		return a, a.leaderID == a.selfID, nil
	case id != 0 && o.snap.LeaderID == id:
		return a, false, fmt.Errorf("%w: etcd member %x leads but did not answer, so leadership cannot be moved through it", etcd.ErrUnreachable, id)
	}
	return a, false, nil
}

// MoveLeaderToCandidates moves leadership off member from to the first of candidates that
// takes it, in order (pass etcd.LeaderCandidates). It returns the member that leads now; it is
// a no-op, LeaderNotOnNode with no member, when from does not lead. When no candidate takes it,
// the error joins every candidate's error.
func (b *Backend) MoveLeaderToCandidates(ctx context.Context, from etcd.Member, candidates []etcd.Member) (etcd.Member, etcd.LeaderMove, error) {
	if len(candidates) == 0 {
		return etcd.Member{}, etcd.LeaderMove{}, fmt.Errorf("%w: no candidate to move etcd leadership off member %s to", etcd.ErrInvalidInput, from)
	}
	var errs []error
	for _, to := range candidates {
		mv, err := b.MoveLeader(ctx, from, to)
		switch {
		case err != nil:
			b.logger(ctx).V(2).Info("Candidate did not take etcd leadership, trying the next", "member", from.String(), "toMember", to.String(), "err", err.Error())
			errs = append(errs, err)
		case mv.Outcome == etcd.LeaderNotOnNode:
			return etcd.Member{}, mv, nil
		default:
			return to, mv, nil
		}
	}
	return etcd.Member{}, etcd.LeaderMove{}, fmt.Errorf("failed to move etcd leadership off member %s to any of %v: %w", from, candidates, errors.Join(errs...))
}

// transferee is the member with the given ID, if it can take leadership.
func transferee(s *etcd.Snapshot, id uint64) (etcd.Member, error) {
	to, ok := s.MemberByID(id)
	switch {
	case !ok:
		return to, fmt.Errorf("%w: etcd member %x is not in the cluster", etcd.ErrInvalidInput, id)
	case to.IsLearner:
		return to, fmt.Errorf("%w: etcd member %s is a learner and cannot lead", etcd.ErrInvalidInput, to)
	case to.NodeName == "":
		return to, fmt.Errorf("%w: etcd member %s is hosted on no Node, so it cannot be reached to take leadership", etcd.ErrInvalidInput, to)
	}
	return to, nil
}
