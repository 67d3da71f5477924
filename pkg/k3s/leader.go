package k3s

import (
	"context"
	"fmt"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// MoveLeader cannot move leadership itself (that needs etcd access) and does not know the
// leader. It answers ByBackend with a warning that says what happens instead: K3s 1.34.2 /
// 1.32.10 and later move leadership off a member before removing it, so the move is done by
// K3s; older K3s removes a leading member as it is, and etcd elects a new leader. Both are
// warnings for the caller to surface, not errors.
//
// The move counts as done by K3s only when every etcd Node runs such a version, because the
// member controller that removes the member runs on whichever server holds K3s's lease.
func (b *Backend) MoveLeader(ctx context.Context, fromMember, toMember etcd.Member) (etcd.LeaderMove, error) {
	fromNode, toNode := fromMember.NodeName, toMember.NodeName
	nodes, err := b.etcdNodes(ctx, b.cfg.Client)
	if err != nil {
		return etcd.LeaderMove{}, err
	}
	var from *etcdNode
	oldest := ""
	movesLeader := true
	for _, n := range nodes {
		e := readNode(n)
		if n.Name == fromNode {
			from = &e
		}
		if !e.hostsMember() {
			continue
		}
		if e.versionErr != nil || !e.version.MovesLeader() {
			movesLeader = false
			oldest = versionName(e)
		}
	}
	if from == nil || !from.hostsMember() {
		return etcd.LeaderMove{}, fmt.Errorf("%w: Node %s hosts no etcd member (no etcd label or no %s annotation)", etcd.ErrInvalidInput, fromNode, KeysFor(programK3s).NodeName)
	}
	if movesLeader {
		return etcd.LeaderMove{Outcome: etcd.LeaderMoveByBackend, Warning: fmt.Sprintf(
			"done by K3s: K3s %s moves etcd leadership off member %s to another voter before removing it (Node %s is not asked to take it)",
			from.version, from.memberName, toNode)}, nil
	}
	return etcd.LeaderMove{Outcome: etcd.LeaderMoveByBackend, Warning: fmt.Sprintf(
		"K3s %s does not move etcd leadership before a removal and this backend has no etcd access: if member %s leads, removing it causes a leader election (etcd refuses writes until a new leader is elected); K3s 1.34.2 / 1.32.10 and later move it first",
		oldest, from.memberName)}, nil
}

func versionName(e etcdNode) string {
	if e.versionErr != nil {
		return fmt.Sprintf("%q (unknown version)", e.node.Status.NodeInfo.KubeletVersion)
	}
	return e.version.String()
}
