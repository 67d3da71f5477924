package kubeadm

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// RemoveMember removes member m by its ID. It is idempotent: a member that is not in the
// cluster reports Removed. It refuses the last voting member (Rejected, LastMember) and sends
// the removal through another member whenever one answers, never through the member being
// removed unless it is the only one reachable.
//
// etcd's answers are mapped as follows: member not found → Removed; "unhealthy cluster" (the
// strict reconfiguration check), "not enough started members" and "learner not ready" are
// temporary → InProgress with etcd's reason (call again on the next reconcile); any other
// refusal → Rejected with etcd's reason. Failing to reach any member wraps etcd.ErrUnreachable.
//
// It is the caller's responsibility to check with etcd.CanRemoveMember that the removal keeps
// quorum, right before calling.
func (b *Backend) RemoveMember(ctx context.Context, m etcd.Member) (etcd.Removal, error) {
	log := b.logger(ctx).WithValues("member", m.String())
	o, err := b.observe(ctx)
	if err != nil {
		return etcd.Removal{}, err
	}
	target, ok := o.snap.MemberByID(m.ID)
	if !ok {
		return etcd.Removal{State: etcd.RemovalRemoved, Member: m, Reason: fmt.Sprintf("etcd member %s is not in the cluster", m)}, nil
	}
	nodeName := target.NodeName
	if isLastVoter(o.snap.Members, target) {
		return etcd.Removal{State: etcd.RemovalRejected, Member: target,
			Reason: fmt.Sprintf("%s: etcd member %s is the last voting member; removing it would destroy the cluster", v1alpha1.MemberRemovalLastMemberReason, target)}, nil
	}
	var errs []error
	for _, via := range removalPath(o, nodeName) {
		r, err := b.removeVia(ctx, o, via, target)
		if err == nil {
			log.Info("Removed etcd member", "member", target.String(), "via", via, "state", r.State)
			if r.State == etcd.RemovalRemoved {
				b.forget(nodeName)
			}
			return r, nil
		}
		errs = append(errs, err)
	}
	return etcd.Removal{}, fmt.Errorf("%w: failed to remove etcd member %s: no member took the request: %w", etcd.ErrUnreachable, target, errors.Join(errs...))
}

// removeVia sends the removal through the member on via. A connection failure is an error (the
// caller tries the next member); every answer of etcd is a Removal.
func (b *Backend) removeVia(ctx context.Context, o *observation, via string, target etcd.Member) (etcd.Removal, error) {
	c, err := b.pool.get(ctx, via, o.creds)
	if err != nil {
		return etcd.Removal{}, err
	}
	_, err = call(ctx, b, "MemberRemove", func(ctx context.Context) (*clientv3.MemberRemoveResponse, error) {
		return c.cluster.MemberRemove(ctx, target.ID)
	})
	if err != nil && !isEtcdAnswer(err) {
		b.pool.drop(via, c)
		return etcd.Removal{}, fmt.Errorf("%w: etcd on Node %s: %w", etcd.ErrUnreachable, via, err)
	}
	return removalFor(target, err), nil
}

// removalFor maps etcd's answer to MemberRemove.
func removalFor(target etcd.Member, err error) etcd.Removal {
	r := etcd.Removal{Member: target}
	switch etcdErr := rpctypes.Error(err); {
	case err == nil:
		r.State, r.Reason = etcd.RemovalRemoved, fmt.Sprintf("etcd member %s removed", target)
	case errors.Is(etcdErr, rpctypes.ErrMemberNotFound):
		r.State, r.Reason = etcd.RemovalRemoved, fmt.Sprintf("etcd member %s is not a member any more", target)
	case errors.Is(etcdErr, rpctypes.ErrUnhealthy), errors.Is(etcdErr, rpctypes.ErrMemberNotEnoughStarted),
		errors.Is(etcdErr, rpctypes.ErrMemberLearnerNotReady):
		r.State, r.Reason = etcd.RemovalInProgress, fmt.Sprintf("etcd refused to remove member %s for now (%v); retry later", target, err)
	default:
		r.State, r.Reason = etcd.RemovalRejected, fmt.Sprintf("etcd refused to remove member %s: %v", target, err)
	}
	return r
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

// removalPath orders the Nodes to send a removal through: the leader first (it commits the
// change without a hop), then other voters that answered, and the target's own Node last, only
// as a last resort.
func removalPath(o *observation, target string) []string {
	var path []string
	if l, ok := o.snap.MemberByID(o.snap.LeaderID); ok && l.NodeName != target && answeredVoter(o, l.NodeName) {
		path = append(path, l.NodeName)
	}
	for _, node := range sortedNodes(o.answers) {
		if node != target && !slices.Contains(path, node) && answeredVoter(o, node) {
			path = append(path, node)
		}
	}
	if answeredVoter(o, target) {
		path = append(path, target)
	}
	return path
}

// answeredVoter reports whether the member on node answered this observation as a voter of the
// majority's cluster.
func answeredVoter(o *observation, node string) bool {
	a, ok := o.answers[node]
	m, inView := o.snap.MemberByNode(node)
	return ok && a.answered() && a.clusterID == o.view.clusterID && inView && !m.IsLearner && a.members != nil
}

// forget closes the connection to a removed member's Node.
func (b *Backend) forget(node string) {
	b.mu.Lock()
	b.known = slices.DeleteFunc(b.known, func(n string) bool { return n == node })
	b.mu.Unlock()
	keep := map[string]bool{}
	for _, n := range b.knownNodes() {
		keep[n] = true
	}
	b.pool.retain(keep)
}
