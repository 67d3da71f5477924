package k3s

import (
	"context"
	"fmt"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// MoveLeader cannot move leadership itself (that needs etcd access) and does not know the
// leader. It answers ByBackend with a warning that says what happens instead: K3s 1.34.2 /
// 1.32.10 / 1.31.14 and later move leadership off a member before removing it (K3s PR 12908),
// so the move is done by K3s; older K3s removes a leading member as it is, and etcd elects a
// new leader. Both are warnings for the caller to surface, not errors.
//
// The move counts as done by K3s only when every etcd Node runs such a version, because the
// member controller that removes the member runs on whichever server holds K3s's Lease.
func (b *Backend) MoveLeader(ctx context.Context, from, to etcd.Member) (etcd.LeaderMove, error) {
	nodes, err := b.etcdNodes(ctx, b.cfg.Client)
	if err != nil {
		return etcd.LeaderMove{}, err
	}
	all := make([]etcdNode, 0, len(nodes))
	var source *etcdNode
	for _, n := range nodes {
		all = append(all, readNode(n))
		if n.Name == from.NodeName {
			source = &all[len(all)-1]
		}
	}
	if source == nil || !source.hostsMember() || source.memberName != from.Name {
		return etcd.LeaderMove{}, fmt.Errorf("%w: Node %s does not host etcd member %s (no etcd label, or its %s annotation names another member)",
			etcd.ErrInvalidInput, from.NodeName, from, KeysFor(programK3s).NodeName)
	}
	rules := rulesOf(all)
	if rules.known() && rules.movesLeader {
		return etcd.LeaderMove{Outcome: etcd.LeaderMoveByBackend, Warning: fmt.Sprintf(
			"done by K3s: K3s %s moves etcd leadership off member %s to another voter before removing it (member %s is not asked to take it)",
			rules, from.Name, to)}, nil
	}
	version := rules.String()
	if !rules.known() {
		version = fmt.Sprintf("of unknown version (%v)", rules.err)
	}
	return etcd.LeaderMove{Outcome: etcd.LeaderMoveByBackend, Warning: fmt.Sprintf(
		"K3s %s does not move etcd leadership before a removal and this backend has no etcd access: if member %s leads, removing it causes a leader election (etcd refuses writes until a new leader is elected); K3s 1.34.2 / 1.32.10 / 1.31.14 and later move it first",
		version, from.Name)}, nil
}
