package membership

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/go-logr/logr"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/internal/etcdrpc"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Changer changes the cluster a backend observes: it removes members and moves leadership,
// through the Transport of the observation it is given.
type Changer struct {
	// Memory learns the members a linearizable member list showed removed.
	Memory *Memory
	// CallTimeout bounds each call.
	CallTimeout time.Duration
	// Log logs each change.
	Log logr.Logger
}

// Remove removes member m of the observed cluster by its ID, as KCP does; the name plays no
// part, because a reused hostname can leave two members with one name and a member that never
// started has none. o must be an observation made right before the call: it re-checks that the
// ID is still a member. It is idempotent: a member confirmed gone reports Removed. It refuses
// the last voting member (Rejected, LastMember) and sends the removal along o.RequestOrder: the leader,
// else another voter that answered, never through the member being removed unless it is the
// only one that answers.
//
// etcd's answers are mapped as follows:
//   - removed, or member not found: Removed once a linearizable member list of this cluster
//     confirms the member is gone; InProgress until then;
//   - a leader change, a timeout, no leader, a stopped server (the change may already be
//     committed: the leader changes or the target stops after applying its own removal), the
//     connection lost during the call, "unhealthy cluster" (the strict reconfiguration check),
//     "not enough started members", "learner not ready": InProgress with etcd's reason (call
//     again), unless the same confirmation shows the member gone;
//   - any other refusal: Rejected with etcd's reason.
//
// Failing to reach any member wraps etcd.ErrUnreachable.
func (r Changer) Remove(ctx context.Context, o *Observation, m etcd.Member) (etcd.Removal, error) {
	target, ok := o.Snap.MemberByID(m.ID)
	if !ok {
		return r.confirm(ctx, o, m, "it is not in the member list the members report"), nil
	}
	if IsLastVoter(o.Snap.Members, target) {
		return etcd.Removal{State: etcd.RemovalRejected, Member: target,
			Reason: fmt.Sprintf("%s: etcd member %s is the last voting member; removing it would destroy the cluster", v1alpha1.MemberRemovalLastMemberReason, target)}, nil
	}
	var errs []error
	for _, via := range o.RequestOrder(target.ID) {
		c, err := o.Transport.Reach(ctx, via)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		res := r.removeVia(ctx, o, c, via, target)
		r.Log.Info("Asked etcd to remove member", "member", target.String(), "memberID", fmt.Sprintf("%x", target.ID), "via", via, "state", res.State, "reason", res.Reason)
		return res, nil
	}
	return etcd.Removal{}, fmt.Errorf("%w: failed to remove etcd member %s: no member of the cluster took the request: %w", etcd.ErrUnreachable, target, errors.Join(errs...))
}

// removeVia sends the removal through c, the member at via; once the request may have been
// sent, every outcome is a Removal.
func (r Changer) removeVia(ctx context.Context, o *Observation, c Client, via string, target etcd.Member) etcd.Removal {
	o.Transport.Removing(target, via)
	_, err := Call(ctx, r.CallTimeout, "MemberRemove", func(ctx context.Context) (struct{}, error) {
		return struct{}{}, c.MemberRemove(ctx, target.ID)
	})
	if err != nil && !etcdrpc.IsEtcdAnswer(err) {
		o.Transport.Lost(ctx, via, c)
	}
	switch outcomeOf(err) {
	case removeRejected:
		return etcd.Removal{State: etcd.RemovalRejected, Member: target,
			Reason: fmt.Sprintf("etcd refused to remove member %s: %v", target, o.Transport.Describe(ctx, via, "MemberRemove", err))}
	case removeDone:
		return r.confirm(ctx, o, target, "etcd removed it")
	}
	return r.confirm(ctx, o, target, fmt.Sprintf("%v; the removal may or may not be committed", o.Transport.Describe(ctx, via, "MemberRemove", err)))
}

// removeOutcome is what etcd's answer to MemberRemove says.
type removeOutcome int

const (
	// removeDone: etcd says the member is not a member (any more).
	removeDone removeOutcome = iota
	// removeUnsettled: the outcome is not known yet; the change may be committed or not.
	removeUnsettled
	// removeRejected: etcd refused for good.
	removeRejected
)

// outcomeOf classifies etcd's answer to MemberRemove.
func outcomeOf(err error) removeOutcome {
	etcdErr := rpctypes.Error(err)
	switch {
	case err == nil, errors.Is(etcdErr, rpctypes.ErrMemberNotFound):
		return removeDone
	case !etcdrpc.IsEtcdAnswer(err), etcdrpc.IsTransientRemoval(etcdErr):
		return removeUnsettled
	}
	return removeRejected
}

// confirm says Removed only when a linearizable member list of the observed cluster no longer
// has the member; otherwise InProgress, with why (what etcd said, and what is missing).
func (r Changer) confirm(ctx context.Context, o *Observation, target etcd.Member, said string) etcd.Removal {
	gone, err := r.isGone(ctx, o, target.ID)
	switch {
	case err != nil:
		return etcd.Removal{State: etcd.RemovalInProgress, Member: target,
			Reason: fmt.Sprintf("etcd member %s: %s; not confirmed yet, because no member of the cluster answered a linearizable member list: %v", target, said, err)}
	case gone:
		r.Memory.markGone(target.ID)
		return etcd.Removal{State: etcd.RemovalRemoved, Member: target,
			Reason: fmt.Sprintf("etcd member %s is not a member: %s, and a linearizable member list confirms it", target, said)}
	}
	return etcd.Removal{State: etcd.RemovalInProgress, Member: target,
		Reason: fmt.Sprintf("etcd member %s: %s; it is still in the member list; call again", target, said)}
}

// isGone asks the cluster's voters, leader first, for a linearizable member list (it goes
// through the leader, so it reflects every committed change) and reports whether the member
// with the given ID is absent. Only members of the observed cluster are asked, and an answer
// from another cluster is never taken: a stranger's member list proves nothing.
func (r Changer) isGone(ctx context.Context, o *Observation, id uint64) (bool, error) {
	var errs []error
	targetAnswer, answered := o.AnswerOf(id)
	for _, via := range o.RequestOrder(id) {
		if answered && targetAnswer.Where == via {
			continue // a removed member answers from its stale view
		}
		c, err := o.Transport.Reach(ctx, via)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		resp, err := memberList(ctx, c, r.CallTimeout, true)
		switch {
		case err != nil:
			errs = append(errs, o.Transport.Describe(ctx, via, "MemberList", err))
		case resp.Header.GetClusterId() != o.Decision.ClusterID:
			errs = append(errs, fmt.Errorf("the etcd member at %s answered from cluster %x, not %x", via, resp.Header.GetClusterId(), o.Decision.ClusterID))
		default:
			return !hasMember(resp, id), nil
		}
	}
	if len(errs) == 0 {
		return false, fmt.Errorf("%w: no other member of cluster %x answered", etcd.ErrUnreachable, o.Decision.ClusterID)
	}
	return false, errors.Join(errs...)
}

func hasMember(resp *clientv3.MemberListResponse, id uint64) bool {
	return slices.ContainsFunc(resp.Members, func(m *pb.Member) bool { return m.ID == id })
}
