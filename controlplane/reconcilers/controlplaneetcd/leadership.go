package controlplaneetcd

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// moveLeadershipOff moves leadership to the best candidate when target leads. It returns what it
// did when leadership changed (a change: the pass ends there), and "" when target does not lead
// or the backend moves leadership itself as part of the removal, or leadership cannot be moved
// because the leader does not answer (it is then removed while it leads, with a Warning Event).
func (r *Reconciler) moveLeadershipOff(ctx context.Context, s *scope, m *clusterv1.Machine, target etcd.Member) (string, error) {
	if s.snapshot.LeaderID != target.ID {
		return "", nil
	}
	candidates := etcd.LeaderCandidates(etcd.AssessMembers(s.snapshot, s.now), s.machineFacts(), target)
	var errs []string
	leaderNotReachable := true
	for _, c := range candidates {
		callCtx, cancel := context.WithTimeout(ctx, r.callTimeout())
		move, err := s.backend.MoveLeader(callCtx, target, c)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", c, err))
			leaderNotReachable = leaderNotReachable && errors.Is(err, etcd.ErrLeaderNotReachable)
			continue
		}
		switch move.Outcome {
		case etcd.LeaderMoved:
			r.event(s, m, corev1.EventTypeNormal, v1alpha1.EventLeaderMoved, fmt.Sprintf("Moved etcd leadership from %s to %s before removing it", target, c))
			return fmt.Sprintf("Moved etcd leadership from %s to %s", target, c), nil
		case etcd.LeaderMoveByBackend:
			if move.Warning != "" {
				r.event(s, m, corev1.EventTypeNormal, v1alpha1.EventLeaderMoved, move.Warning)
			}
		}
		return "", nil
	}
	if len(errs) > 0 && leaderNotReachable {
		// Important! etcd takes MoveLeader from the leader only, and this one does not answer the
		// backend (a kubeadm member whose Node object was deleted has no Pod to port-forward to),
		// while its peers may still follow it. Waiting would hold the removal for as long as that
		// lasts; removing it while it leads is safe for quorum (the projection allowed it) and
		// costs one election: the leader steps down once it applies its own removal (etcd raft).
		r.event(s, m, corev1.EventTypeWarning, v1alpha1.EventLeaderMoveFailed, fmt.Sprintf(
			"Could not move etcd leadership off %s, which does not answer (%s); removing it while it leads, and etcd elects a new leader", target, strings.Join(errs, "; ")))
		return "", nil
	}
	if len(errs) > 0 {
		err := fmt.Errorf("failed to move etcd leadership off %s: %s", target, strings.Join(errs, "; "))
		r.event(s, m, corev1.EventTypeWarning, v1alpha1.EventLeaderMoveFailed, err.Error()+"; retrying")
		return "", err
	}
	return "", nil
}
