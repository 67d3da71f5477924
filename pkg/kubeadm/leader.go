package kubeadm

import (
	"context"
	"errors"
	"fmt"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

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
