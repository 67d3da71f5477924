package external

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

// RemoveMember removes member m by its ID, with the rules of pkg/kubeadm: the observation right
// before the call re-checks that the ID is a member; the last voting member is refused
// (Rejected, LastMember); the request goes through the leader, else another voter that
// answered, the target last; Removed only once a linearizable member list of this cluster
// confirms it, InProgress on any answer that does not prove the outcome.
//
// A removal is refused (etcd.ErrInvalidInput) while any endpoint answers for another etcd
// cluster: the endpoints then name members of two clusters, and which member list is
// authoritative is not known.
func (b *Backend) RemoveMember(ctx context.Context, m etcd.Member) (etcd.Removal, error) {
	o, err := b.observe(ctx)
	if err != nil {
		return etcd.Removal{}, err
	}
	if s := o.strangers(); len(s) > 0 {
		return etcd.Removal{}, fmt.Errorf("%w: not removing etcd member %s: endpoint %s answers for etcd cluster %x, not %x; the endpoints name members of two clusters",
			etcd.ErrInvalidInput, m, s[0].endpoint, s[0].clusterID, o.clusterID)
	}
	target, ok := o.snap.MemberByID(m.ID)
	if !ok {
		return b.confirm(ctx, o, m, "it is not in the member list the members report"), nil
	}
	if isLastVoter(o.snap.Members, target) {
		return etcd.Removal{State: etcd.RemovalRejected, Member: target,
			Reason: fmt.Sprintf("%s: etcd member %s is the last voting member; removing it would destroy the cluster", v1alpha1.MemberRemovalLastMemberReason, target)}, nil
	}
	var errs []error
	for _, ep := range path(o, target.ID) {
		cli, err := b.client(ctx, ep, o.creds)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		// From now on the target may apply its removal: it is never asked for Status unless a
		// linearizable member list shows it is still a member.
		b.mu.Lock()
		b.removing[target.ID] = true
		b.mu.Unlock()
		_, err = call(ctx, b, "MemberRemove", func(ctx context.Context) (*clientv3.MemberRemoveResponse, error) {
			return cli.MemberRemove(ctx, target.ID)
		})
		var r etcd.Removal
		etcdErr := rpctypes.Error(err)
		switch {
		case err == nil, errors.Is(etcdErr, rpctypes.ErrMemberNotFound):
			r = b.confirm(ctx, o, target, "etcd removed it")
		case etcdrpc.IsEtcdAnswer(err) && !etcdrpc.IsTransientRemoval(etcdErr):
			r = etcd.Removal{State: etcd.RemovalRejected, Member: target, Reason: fmt.Sprintf("etcd refused to remove member %s: %v", target, b.rpcError(ctx, ep, "MemberRemove", err))}
		default:
			r = b.confirm(ctx, o, target, fmt.Sprintf("%v; the removal may or may not be committed", b.rpcError(ctx, ep, "MemberRemove", err)))
		}
		b.logger(ctx).Info("Asked external etcd to remove member", "member", target.String(), "memberID", fmt.Sprintf("%x", target.ID), "via", ep, "state", r.State, "reason", r.Reason)
		return r, nil
	}
	return etcd.Removal{}, fmt.Errorf("%w: failed to remove etcd member %s: no member of the cluster took the request: %w", etcd.ErrUnreachable, target, errors.Join(errs...))
}

// confirm says Removed only when a linearizable member list of the observed cluster no longer
// has the member; otherwise InProgress, with why.
func (b *Backend) confirm(ctx context.Context, o *observation, target etcd.Member, said string) etcd.Removal {
	var errs []error
	for _, ep := range path(o, target.ID) {
		if a, ok := o.self(target.ID); ok && a.endpoint == ep {
			continue // a removed member answers from its stale view
		}
		cli, err := b.client(ctx, ep, o.creds)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		resp, err := call(ctx, b, "MemberList", func(ctx context.Context) (*clientv3.MemberListResponse, error) { return cli.MemberList(ctx) })
		switch {
		case err != nil:
			errs = append(errs, b.rpcError(ctx, ep, "MemberList", err))
		case resp.Header.GetClusterId() != o.clusterID:
			errs = append(errs, fmt.Errorf("etcd at %s answered from cluster %x, not %x", ep, resp.Header.GetClusterId(), o.clusterID))
		case slices.ContainsFunc(resp.Members, func(m *pb.Member) bool { return m.ID == target.ID }):
			return etcd.Removal{State: etcd.RemovalInProgress, Member: target,
				Reason: fmt.Sprintf("etcd member %s: %s; it is still in the member list; call again", target, said)}
		default:
			b.mu.Lock()
			b.last = slices.DeleteFunc(b.last, func(m etcd.Member) bool { return m.ID == target.ID })
			b.gone[target.ID] = true
			b.mu.Unlock()
			return etcd.Removal{State: etcd.RemovalRemoved, Member: target,
				Reason: fmt.Sprintf("etcd member %s is not a member: %s, and a linearizable member list confirms it", target, said)}
		}
	}
	return etcd.Removal{State: etcd.RemovalInProgress, Member: target,
		Reason: fmt.Sprintf("etcd member %s: %s; not confirmed yet, because no other member of the cluster answered a linearizable member list: %v", target, said, errors.Join(errs...))}
}

// isLastVoter reports whether target is the only voting member.
func isLastVoter(members []etcd.Member, target etcd.Member) bool {
	if target.IsLearner {
		return false
	}
	return !slices.ContainsFunc(members, func(m etcd.Member) bool { return m.ID != target.ID && !m.IsLearner })
}

// path orders the endpoints to send a request about member targetID through: the leader first,
// then the other voters of the cluster that answered, the target's own endpoint last.
func path(o *observation, targetID uint64) []string {
	var out []string
	targetEP := ""
	if a, ok := o.self(targetID); ok {
		targetEP = a.endpoint
	}
	voter := func(a answer) bool {
		m, ok := o.snap.MemberByID(a.selfID)
		return a.answered() && a.clusterID == o.clusterID && ok && !m.IsLearner && a.members != nil
	}
	if l, ok := o.self(o.snap.LeaderID); ok && l.endpoint != targetEP && voter(l) {
		out = append(out, l.endpoint)
	}
	for _, a := range o.answers {
		if a.endpoint != targetEP && !slices.Contains(out, a.endpoint) && voter(a) {
			out = append(out, a.endpoint)
		}
	}
	if a, ok := o.self(targetID); ok && voter(a) {
		out = append(out, targetEP)
	}
	return out
}
