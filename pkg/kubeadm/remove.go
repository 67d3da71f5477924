package kubeadm

import (
	"context"
	"errors"
	"fmt"
	"slices"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/internal/etcdrpc"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// RemoveMember removes member m by its ID, as KCP does; the name plays no part, because a
// reused hostname can leave two members with one name and a member that never started has
// none. The observation right before the call re-checks that the ID is still a member. It is
// idempotent: a member confirmed gone reports Removed. It refuses the last voting member
// (Rejected, LastMember) and sends the removal through the leader, else another voter that
// answered, never through the member being removed unless it is the only one that answers.
//
// etcd's answers are mapped as follows:
//   - removed, or member not found: Removed once a linearizable MemberList of this cluster
//     confirms the member is gone; InProgress until then;
//   - a leader change, a timeout, no leader, a stopped server (the change may already be
//     committed: the leader changes or the target stops after applying its own removal), the
//     connection lost during the call, "unhealthy cluster" (the strict reconfiguration check),
//     "not enough started members", "learner not ready": InProgress with etcd's reason (call
//     again), unless the same confirmation shows the member gone;
//   - any other refusal: Rejected with etcd's reason.
//
// Failing to reach any member wraps etcd.ErrUnreachable. It is the caller's responsibility to
// check with etcd.CanRemoveMember that the removal keeps quorum, right before calling.
func (b *Backend) RemoveMember(ctx context.Context, m etcd.Member) (etcd.Removal, error) {
	o, err := b.observe(ctx)
	if err != nil {
		return etcd.Removal{}, err
	}
	target, ok := o.snap.MemberByID(m.ID)
	if !ok {
		return b.confirmRemoval(ctx, o, m, "it is not in the member list the members report"), nil
	}
	if isLastVoter(o.snap.Members, target) {
		return etcd.Removal{State: etcd.RemovalRejected, Member: target,
			Reason: fmt.Sprintf("%s: etcd member %s is the last voting member; removing it would destroy the cluster", v1alpha1.MemberRemovalLastMemberReason, target)}, nil
	}
	var errs []error
	for _, via := range removalPath(o, target.ID) {
		r, err := b.removeVia(ctx, o, via, target)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		b.logger(ctx).Info("Asked etcd to remove member", "member", target.String(), "memberID", fmt.Sprintf("%x", target.ID), "via", via, "state", r.State, "reason", r.Reason)
		if r.State == etcd.RemovalRemoved {
			b.forget(target)
		}
		return r, nil
	}
	return etcd.Removal{}, fmt.Errorf("%w: failed to remove etcd member %s: no member of the cluster took the request: %w", etcd.ErrUnreachable, target, errors.Join(errs...))
}

// removeVia sends the removal through the member on via. Failing to connect is an error (the
// caller tries the next member); once the request may have been sent, every outcome is a
// Removal.
func (b *Backend) removeVia(ctx context.Context, o *observation, via string, target etcd.Member) (etcd.Removal, error) {
	c, err := b.pool.get(ctx, via, o.creds)
	if err != nil {
		return etcd.Removal{}, err
	}
	b.markRemoving(target)
	if b.beforeRemove != nil {
		go b.beforeRemove(via)
	}
	_, err = call(ctx, b, "MemberRemove", func(ctx context.Context) (*clientv3.MemberRemoveResponse, error) {
		return c.cluster.MemberRemove(ctx, target.ID)
	})
	if err != nil && !etcdrpc.IsEtcdAnswer(err) {
		b.dropUnlessCallerEnded(ctx, via, c)
	}
	switch outcomeOf(err) {
	case removeRejected:
		return etcd.Removal{State: etcd.RemovalRejected, Member: target, Reason: fmt.Sprintf("etcd refused to remove member %s: %v", target, err)}, nil
	case removeDone:
		return b.confirmRemoval(ctx, o, target, "etcd removed it"), nil
	}
	return b.confirmRemoval(ctx, o, target, fmt.Sprintf("etcd on Node %s answered %v; the removal may or may not be committed", via, err)), nil
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

// confirmRemoval says Removed only when a linearizable MemberList of the observed cluster no
// longer has the member; otherwise InProgress, with why (what etcd said, and what is missing).
func (b *Backend) confirmRemoval(ctx context.Context, o *observation, target etcd.Member, said string) etcd.Removal {
	gone, err := b.isGone(ctx, o, target.ID)
	switch {
	case err != nil:
		return etcd.Removal{State: etcd.RemovalInProgress, Member: target,
			Reason: fmt.Sprintf("etcd member %s: %s; not confirmed yet, because no member of the cluster answered a linearizable member list: %v", target, said, err)}
	case gone:
		b.markGone(target.ID)
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
func (b *Backend) isGone(ctx context.Context, o *observation, id uint64) (bool, error) {
	var errs []error
	for _, via := range removalPath(o, id) {
		if a, ok := o.answerOf(id); ok && a.node == via {
			continue // a removed member answers from its stale view
		}
		c, err := b.pool.get(ctx, via, o.creds)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		resp, err := call(ctx, b, "MemberList", func(ctx context.Context) (*clientv3.MemberListResponse, error) {
			return c.cluster.MemberList(ctx)
		})
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("etcd on Node %s: %w", via, err))
		case resp.Header.GetClusterId() != o.view.clusterID:
			errs = append(errs, fmt.Errorf("etcd on Node %s answered from cluster %x, not %x", via, resp.Header.GetClusterId(), o.view.clusterID))
		default:
			return !slices.ContainsFunc(resp.Members, func(m *pb.Member) bool { return m.ID == id }), nil
		}
	}
	if len(errs) == 0 {
		return false, fmt.Errorf("%w: no other member of cluster %x answered", etcd.ErrUnreachable, o.view.clusterID)
	}
	return false, errors.Join(errs...)
}

// isLastVoter reports whether target is the only voting member.
func isLastVoter(members []etcd.Member, target etcd.Member) bool {
	if target.IsLearner {
		return false
	}
	for _, m := range members {
		if m.ID != target.ID && !m.IsLearner {
			return false
		}
	}
	return true
}

// removalPath orders the Nodes to send a request about member targetID through: the leader
// first (it commits the change without a hop), then the other voters of the cluster that
// answered, in Node order, and the target's own Node last, only as a last resort (a removed
// member stops, and its answer may be lost).
func removalPath(o *observation, targetID uint64) []string {
	var path []string
	targetNode := ""
	if a, ok := o.answerOf(targetID); ok {
		targetNode = a.node
	}
	if l, ok := o.answerOf(o.snap.LeaderID); ok && l.node != targetNode && answeredVoter(o, l) {
		path = append(path, l.node)
	}
	for _, node := range sortedNodes(o.answers) {
		if node != targetNode && !slices.Contains(path, node) && answeredVoter(o, o.answers[node]) {
			path = append(path, node)
		}
	}
	if targetNode != "" && answeredVoter(o, o.answers[targetNode]) {
		path = append(path, targetNode)
	}
	return path
}

// answeredVoter reports whether a is the answer of a voting member of the observed cluster,
// with a member list.
func answeredVoter(o *observation, a answer) bool {
	m, ok := o.snap.MemberByID(a.selfID)
	return o.view.ofCluster(a) && ok && !m.IsLearner && a.members != nil
}

// markRemoving records that the member's Node may soon run a removed member.
func (b *Backend) markRemoving(m etcd.Member) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.removedOn == nil {
		b.removedOn = map[string]bool{}
	}
	if m.NodeName != "" {
		b.removedOn[m.NodeName] = true
	}
}

// markGone records a member that a linearizable member list showed removed.
func (b *Backend) markGone(id uint64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.goneIDs == nil {
		b.goneIDs = map[uint64]bool{}
	}
	b.goneIDs[id] = true
}

// confirmedGone reports whether a linearizable member list showed the member removed.
func (b *Backend) confirmedGone(id uint64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.goneIDs[id]
}

// forget drops a removed member from the member list kept for the next observation.
func (b *Backend) forget(m etcd.Member) {
	b.mu.Lock()
	b.lastMembers = slices.DeleteFunc(b.lastMembers, func(x etcd.Member) bool { return x.ID == m.ID })
	b.mu.Unlock()
}
