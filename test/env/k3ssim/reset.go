package k3ssim

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// ChangeAddress gives the server on node a new advertise IP, as a Node whose address changed
// after its member joined: the metadata controller writes the new node-address on its next
// pass, while the etcd member keeps its old peer URL (K3s does not update peer URLs). K3s's
// member controller then finds no member with that name at that address, counts it as already
// removed and writes removed-node-name, although the member is still there (k3s
// pkg/etcd/member_controller.go: a member that is not found counts as removed).
func (s *Simulator) ChangeAddress(ctx context.Context, node, ip string) error {
	s.mu.Lock()
	srv, ok := s.servers[node]
	if ok {
		srv.ip = ip
	}
	s.mu.Unlock()
	if !ok {
		return fmt.Errorf("no simulated server for Node %s", node)
	}
	return s.registerNode(ctx, node, ip)
}

// resetRemoveTimeout bounds how long ClusterReset retries removing the other members: etcd's
// strict reconfiguration check refuses a removal for a few seconds after the previous one.
const resetRemoveTimeout = 30 * time.Second

// ClusterReset is `k3s server --cluster-reset` on the server on node: its member becomes the
// only member of the cluster under a new member name `<node>-<8 hex>` (K3s picks a new name for
// the reset member), the other servers' members are gone (their K3s tombstones), and K3s
// deletes `remove` and `removed-node-name` on every etcd Node (k3s pkg/etcd/etcd.go, the reset
// path). It returns the new member name.
//
// Note: the etcd cluster under test cannot rename a member, so the simulator shows the new name
// in its own view of the member list, which is what every simulated K3s reads; etcd's member
// list keeps the old name under the same member ID.
func (s *Simulator) ClusterReset(ctx context.Context, node string) (string, error) {
	s.opMu.Lock()
	defer s.opMu.Unlock()
	s.mu.Lock()
	srv, ok := s.servers[node]
	s.mu.Unlock()
	if !ok || !srv.running {
		return "", fmt.Errorf("no running simulated server on Node %s", node)
	}
	members, err := s.etcd.members(ctx)
	if err != nil {
		return "", err
	}
	for _, m := range members {
		if m.Name == srv.member {
			continue
		}
		if err := s.removeForReset(ctx, m); err != nil {
			return "", err
		}
		s.tombstoneLocked(ctx, m.Name)
	}
	name, err := newMemberName(node)
	if err != nil {
		return "", err
	}
	s.etcd.rename(srv.member, name)
	s.mu.Lock()
	srv.member = name
	s.mu.Unlock()
	s.log.Info("Cluster reset", "node", node, "memberName", name)
	return name, s.wipeRemovalAnnotations(ctx)
}

// removeForReset removes one member, retrying while etcd's strict reconfiguration check
// refuses it.
func (s *Simulator) removeForReset(ctx context.Context, m member) error {
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, resetRemoveTimeout, true, func(ctx context.Context) (bool, error) {
		lastErr = s.etcd.removeMember(ctx, m.ID)
		return lastErr == nil, nil
	})
	if err != nil {
		return fmt.Errorf("failed to remove etcd member %s for the cluster reset: %w (last: %w)", m.Name, err, lastErr)
	}
	return nil
}

// wipeRemovalAnnotations deletes remove and removed-node-name on every etcd Node.
func (s *Simulator) wipeRemovalAnnotations(ctx context.Context) error {
	nodes := &corev1.NodeList{}
	if err := s.client.List(ctx, nodes, s.etcdNodeSelector()); err != nil {
		return fmt.Errorf("failed to list etcd Nodes: %w", err)
	}
	keys := s.profile.Keys
	for i := range nodes.Items {
		n := &nodes.Items[i]
		patch := sameVersion(n)
		for _, k := range []string{keys.Remove, keys.RemovedNodeName} {
			if _, ok := n.Annotations[k]; ok {
				patch = patch.remove(k)
			}
		}
		if len(patch) == 1 {
			continue
		}
		if err := patch.apply(ctx, s.client, n); err != nil {
			return err
		}
	}
	return nil
}
