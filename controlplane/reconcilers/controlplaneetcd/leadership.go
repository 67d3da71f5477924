package controlplaneetcd

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"

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
		move, err := s.askLeaderMove(callCtx, target, c)
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

// moveLeadershipEarly moves leadership off the member of a deleting Machine that is not at its
// pre-terminate hooks yet (drain, volume detach or other providers' hooks go first), so that the
// removal needs no pass of its own for it once the hook phase comes: KCP, too, moves leadership
// before it deletes a Machine, and again in its pre-terminate hook only in case that did not
// happen (sigs.k8s.io/cluster-api v1.14.2 controlplane/kubeadm/reconcilers/kubeadmcontrolplane
// scale.go and remediation.go, forwardEtcdLeadership). Moving leadership removes nothing, so
// neither the quorum projection nor the snapshot gate is asked; the hook phase asks them before
// the removal, and moves leadership then if it is back on the Machine or did not move.
//
// Only a leader that is healthy in this pass's observation is moved: a leader that does not
// answer is the hook phase's (moveLeadershipOff removes it while it leads), not something to
// retry and warn about while the Machine drains. wait is the Machine's outcome otherwise.
func (r *Reconciler) moveLeadershipEarly(ctx context.Context, s *scope, m *clusterv1.Machine, wait outcome) outcome {
	if s.snapshot == nil {
		return wait
	}
	members := s.membersOf(m)
	i := slices.IndexFunc(members, func(mb etcd.Member) bool { return mb.ID == s.snapshot.LeaderID })
	if i < 0 || len(members) == len(s.snapshot.Members) || !healthy(s, members[i]) {
		return wait
	}
	moved, err := r.moveLeadershipOff(ctx, s, m, members[i])
	switch {
	case err != nil:
		ctrl.LoggerFrom(ctx).Info("Could not move etcd leadership off a deleting Machine yet; its pre-terminate hook phase moves it", "err", err.Error())
		return wait
	case moved == "":
		return wait
	}
	r.atStep(ctx, StepLeaderMoved)
	return acted(v1alpha1.ProgressingMemberRemovalReason, fmt.Sprintf("%s while Machine %s is deleting", moved, m.Name)).after(confirmRequeueAfter)
}

// healthy reports whether member mb is healthy in this pass's observation.
func healthy(s *scope, mb etcd.Member) bool {
	return slices.ContainsFunc(etcd.AssessMembers(s.snapshot, s.now), func(h etcd.MemberHealth) bool {
		return h.Member.ID == mb.ID && h.Health == etcd.Healthy
	})
}
