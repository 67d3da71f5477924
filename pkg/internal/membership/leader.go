package membership

import (
	"context"
	"fmt"

	"github.com/etcd-adapter/etcd-adapter/internal/etcdrpc"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// MoveLeader moves leadership off member from to member to, through from's own connection
// (etcd accepts MoveLeader only from the leader). It is a no-op, LeaderNotOnNode, when from
// does not say it leads. o must be an observation made right before the call.
func (r Changer) MoveLeader(ctx context.Context, o *Observation, from, to etcd.Member) (etcd.LeaderMove, error) {
	l, leads, err := leaderToMove(o, from.ID)
	switch {
	case err != nil:
		return etcd.LeaderMove{}, err
	case !leads:
		return etcd.LeaderMove{Outcome: etcd.LeaderNotOnNode}, nil
	}
	target, err := transferee(o, to.ID)
	if err != nil {
		return etcd.LeaderMove{}, err
	}
	c, err := o.Transport.Reach(ctx, l.Where)
	if err != nil {
		return etcd.LeaderMove{}, fmt.Errorf("failed to reach the etcd leader at %s: %w", l.Where, err)
	}
	_, err = Call(ctx, r.CallTimeout, "MoveLeader", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, c.MoveLeader(ctx, target.ID)
	})
	switch {
	case err == nil:
	case etcdrpc.IsEtcdAnswer(err):
		return etcd.LeaderMove{}, fmt.Errorf("%w: etcd leader at %s refused to move leadership to %s: %w", etcd.ErrRefused, l.Where, target, o.Transport.Describe(ctx, l.Where, "MoveLeader", err))
	default:
		o.Transport.Lost(ctx, l.Where, c)
		return etcd.LeaderMove{}, fmt.Errorf("%w: failed to move etcd leadership from %s to %s: %w", etcd.ErrUnreachable, l.Where, target, o.Transport.Describe(ctx, l.Where, "MoveLeader", err))
	}
	r.Log.Info("Moved etcd leadership", "member", from.String(), "toMember", target.String())
	return etcd.LeaderMove{Outcome: etcd.LeaderMoved}, nil
}

// leaderToMove decides from the member's own Status whether it leads (its Leader is its own
// ID): etcd accepts MoveLeader only from the leader, and a follower's belief about who leads may
// be stale. A member that did not answer is an error when the others name it leader (its
// leadership cannot be moved through it), and a no-op otherwise.
func leaderToMove(o *Observation, id uint64) (Answer, bool, error) {
	a, ok := o.AnswerOf(id)
	switch {
	case ok:
		return a, a.LeaderID == a.SelfID, nil
	case id != 0 && o.Snap.LeaderID == id:
		return a, false, fmt.Errorf("%w: etcd member %x leads but did not answer, so leadership cannot be moved through it", etcd.ErrLeaderNotReachable, id)
	}
	return a, false, nil
}

// transferee is the member with the given ID, if it can take leadership: a voter the backend
// placed (NodeName) that answered. etcd would wait for a transfer to a member that does not
// answer until the call timeout; it cannot take over anyway.
func transferee(o *Observation, id uint64) (etcd.Member, error) {
	to, ok := o.Snap.MemberByID(id)
	switch {
	case !ok:
		return to, fmt.Errorf("%w: etcd member %x is not in the cluster", etcd.ErrInvalidInput, id)
	case to.IsLearner:
		return to, fmt.Errorf("%w: etcd member %s is a learner and cannot lead", etcd.ErrInvalidInput, to)
	case to.NodeName == "":
		return to, fmt.Errorf("%w: etcd member %s is hosted on no Node or host, so it cannot be reached to take leadership", etcd.ErrInvalidInput, to)
	}
	if _, ok := o.AnswerOf(id); !ok {
		return to, fmt.Errorf("%w: etcd member %s on %s is not answering; not moving leadership to it", etcd.ErrUnreachable, to, to.NodeName)
	}
	return to, nil
}
