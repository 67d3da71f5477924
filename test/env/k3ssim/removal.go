package k3ssim

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// syncRemoval is the member controller's reaction to a change of an etcd Node (k3s
// pkg/etcd/member_controller.go, in the order each K3s generation checks them).
func (s *Simulator) syncRemoval(ctx context.Context, node *corev1.Node) error {
	if _, ok := node.Labels[EtcdRoleLabel]; !ok {
		return nil
	}
	switch s.memberControllerProfile().Removal {
	case RemovalLegacy:
		return s.syncRemovalLegacy(ctx, node)
	case RemovalRequeueBug:
		return s.syncRemovalRequeueBug(ctx, node)
	default:
		return s.syncRemovalLeaderAware(ctx, node)
	}
}

// syncRemovalLegacy is K3s 1.22 – 1.28.2: only Nodes with `remove` are looked at, and
// removed-node-name before node-name, so a removed Node (no node-name any more) is a quiet
// no-op. A rejoin sets remove="false"; a rejection is an ordinary error (requeued).
func (s *Simulator) syncRemovalLegacy(ctx context.Context, node *corev1.Node) error {
	keys := s.profile.Keys
	remove, ok := node.Annotations[keys.Remove]
	if !ok {
		return nil
	}
	if removed, ok := node.Annotations[keys.RemovedNodeName]; ok {
		if name, ok := node.Annotations[keys.NodeName]; ok && name != removed {
			s.log.Info("Node rejoined under a new member name, resetting removal", "node", node.Name, "memberName", name)
			return sameVersion(node).remove(keys.RemovedNodeName).add(keys.Remove, "false").apply(ctx, s.client, node)
		}
		return nil
	}
	if !strings.EqualFold(remove, "true") {
		return nil
	}
	name, address, err := s.nameAndAddress(node)
	if err != nil {
		return err
	}
	return s.removeAndAnnotate(ctx, node, name, address, false)
}

// syncRemovalRequeueBug is K3s 1.28.3 – 1.34.1: only Nodes with `remove` are looked at, and
// node-name/node-address are required first (step 1). A removed Node keeps remove="true"
// without node-name, so it is requeued forever until the server rejoins and writes node-name
// again; then both annotations are deleted (step 2). A rejection clears `remove` (step 5).
func (s *Simulator) syncRemovalRequeueBug(ctx context.Context, node *corev1.Node) error {
	keys := s.profile.Keys
	remove, ok := node.Annotations[keys.Remove]
	if !ok {
		return nil
	}
	name, address, err := s.nameAndAddress(node)
	if err != nil {
		return err
	}
	if removed, ok := node.Annotations[keys.RemovedNodeName]; ok {
		if removed == name {
			return nil
		}
		s.log.Info("Node rejoined under a new member name, resetting removal", "node", node.Name, "memberName", name)
		return sameVersion(node).remove(keys.RemovedNodeName).remove(keys.Remove).apply(ctx, s.client, node)
	}
	if !strings.EqualFold(remove, "true") {
		return nil
	}
	return s.removeAndAnnotate(ctx, node, name, address, true)
}

// syncRemovalLeaderAware is K3s 1.34.2+ / 1.32.10+: `remove` is deleted on success, so the
// rejoin check (step 2) cannot depend on it; it runs whenever removed-node-name is present,
// deletes both annotations once node-name differs, and is a quiet no-op while the dead
// server has no node-name (the requeue-forever bug is fixed).
func (s *Simulator) syncRemovalLeaderAware(ctx context.Context, node *corev1.Node) error {
	keys := s.profile.Keys
	if removed, ok := node.Annotations[keys.RemovedNodeName]; ok {
		if name, ok := node.Annotations[keys.NodeName]; ok && name != removed {
			s.log.Info("Node rejoined under a new member name, resetting removal", "node", node.Name, "memberName", name)
			patch := sameVersion(node).remove(keys.RemovedNodeName)
			if _, ok := node.Annotations[keys.Remove]; ok {
				patch = patch.remove(keys.Remove)
			}
			return patch.apply(ctx, s.client, node)
		}
		return nil
	}
	remove, ok := node.Annotations[keys.Remove]
	if !ok {
		return nil
	}
	name, address, err := s.nameAndAddress(node)
	if err != nil {
		return err
	}
	if !strings.EqualFold(remove, "true") {
		return nil
	}
	return s.removeAndAnnotate(ctx, node, name, address, true)
}

// removeAndAnnotate removes the member (step 3) and writes the outcome: step 4 on success;
// on a rejection (step 5) `remove` is deleted when clearOnReject, else requeued like any
// other error (step 6: requeued with backoff, only logged).
func (s *Simulator) removeAndAnnotate(ctx context.Context, node *corev1.Node, name, address string, clearOnReject bool) error {
	err := s.removePeer(ctx, name, address)
	if err == nil {
		return s.patchRemoved(ctx, node, name)
	}
	if !clearOnReject || !isRejection(err) {
		return err
	}
	// Only the log says why; no removed-node-name is written.
	s.log.Error(err, "Etcd member removal rejected, clearing remove annotation", "node", node.Name, "memberName", name)
	return sameVersion(node).remove(s.profile.Keys.Remove).apply(ctx, s.client, node)
}

// nameAndAddress returns node-name and node-address, or the step-1 error (requeue with
// backoff, nothing written).
func (s *Simulator) nameAndAddress(node *corev1.Node) (name, address string, err error) {
	name, ok := node.Annotations[s.profile.Keys.NodeName]
	if !ok {
		return "", "", fmt.Errorf("node name annotation for node %s not found", node.Name)
	}
	address, ok = node.Annotations[s.profile.Keys.NodeAddress]
	if !ok {
		return "", "", fmt.Errorf("node address annotation for node %s not found", node.Name)
	}
	return name, address, nil
}

// patchRemoved writes step 4 in one JSON patch: removed-node-name added, node-name and
// node-address removed, and `remove` removed only from 1.34.2 / 1.32.10 on.
func (s *Simulator) patchRemoved(ctx context.Context, node *corev1.Node, name string) error {
	keys := s.profile.Keys
	patch := sameVersion(node).add(keys.RemovedNodeName, name).remove(keys.NodeName).remove(keys.NodeAddress)
	if s.memberControllerProfile().DeletesRemoveOnSuccess {
		patch = patch.remove(keys.Remove)
	}
	return patch.apply(ctx, s.client, node)
}

// removePeer removes the member whose name is name AND whose peer URL host is address; a
// member that is not found counts as removed (step 3). On the leader-aware profile leadership
// is moved off the member first. The removed server then tombstones at once, under opMu, so
// its metadata controller cannot write node-name back.
func (s *Simulator) removePeer(ctx context.Context, name, address string) error {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	members, err := s.etcd.members(ctx)
	if err != nil {
		return err
	}
	for _, m := range members {
		if m.Name != name || !m.hasPeerHost(address) {
			continue
		}
		if s.memberControllerProfile().MovesLeaderFirst {
			if err := s.moveLeadershipOff(ctx, m, members); err != nil {
				return err
			}
		}
		if err := s.etcd.removeMember(ctx, m.ID); err != nil {
			s.removalUnanswered(ctx, m)
			return err
		}
		s.removed(ctx, m)
		return nil
	}
	if m, ok := s.unanswered[name]; ok {
		// The earlier call's removal was applied after all: K3s counts the member as removed now.
		s.removed(ctx, m)
	}
	return nil
}

// removalUnanswered handles a MemberRemove that failed: etcd can apply a removal and still
// fail the call, when the request reached the member being removed (it stops once it applies
// its own removal and answers "etcdserver: server stopped"). K3s only sees the error and
// requeues; its next pass finds the member gone and counts it as removed (step 3). The member
// is gone now, though, so the removed server stops now; the removal is counted once, when the
// member is first seen gone (here or on a later pass). The caller holds opMu.
func (s *Simulator) removalUnanswered(ctx context.Context, m member) {
	s.unanswered[m.Name] = m
	members, err := s.etcd.members(ctx)
	if err != nil {
		return // the next pass finds out
	}
	for _, still := range members {
		if still.ID == m.ID {
			return // not applied yet, or refused: the next pass removes it or finds it gone
		}
	}
	s.removed(ctx, m)
}

// removed records a member's removal and tombstones its server. The caller holds opMu.
func (s *Simulator) removed(ctx context.Context, m member) {
	delete(s.unanswered, m.Name)
	s.log.Info("Removed etcd member", "memberName", m.Name)
	s.countRemoval(m.Name)
	s.tombstoneLocked(ctx, m.Name)
}

// moveLeadershipOff moves leadership from m to another started voter when m is the leader
// (K3s 1.34.2 / 1.32.10 and later). Without another voter the removal is rejected.
func (s *Simulator) moveLeadershipOff(ctx context.Context, m member, members []member) error {
	leaderID, err := s.etcd.leaderID(ctx, members)
	if err != nil {
		return err
	}
	if leaderID != m.ID {
		return nil
	}
	var candidates []member
	for _, c := range members {
		if c.ID != m.ID && !c.IsLearner && len(c.ClientURLs) > 0 {
			candidates = append(candidates, c)
		}
	}
	if len(candidates) == 0 {
		return errNoOtherVoter
	}
	for _, c := range candidates {
		if _, err := s.etcd.status(ctx, c.ClientURLs[0]); err != nil {
			continue
		}
		if err := s.etcd.moveLeader(ctx, m, c.ID); err != nil {
			return err
		}
		s.countLeaderMove()
		s.log.Info("Moved etcd leadership before removal", "from", m.Name, "to", c.Name)
		return nil
	}
	return fmt.Errorf("failed to move etcd leadership off %s: no other voter answers", m.Name)
}

// LeaderMoves returns how often the member controller moved leadership off a member it was
// about to remove (only the 1.34.2+ / 1.32.10+ profile does).
func (s *Simulator) LeaderMoves() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.leaderMoves
}

func (s *Simulator) countLeaderMove() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.leaderMoves++
}
