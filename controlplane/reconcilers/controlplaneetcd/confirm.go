package controlplaneetcd

import (
	"context"
	"fmt"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// confirmRemoval asks the backend how the removal this Machine's record is about went, when the
// snapshot no longer shows the member on the Machine's Node. Absence alone is not a removal: K3s
// drops a Node's node-name and writes removed-node-name also when it found no member at the
// Node's address and removed nothing (k3s pkg/etcd member controller), and pkg/k3s answers
// Removed only with evidence that agrees. kubeadm confirms with a linearizable member list.
//
// remaining is how many other members of the Machine are still there: the hook is released only
// when none is, else the record is closed and the next pass removes the next member.
func (r *Reconciler) confirmRemoval(ctx context.Context, s *scope, m *clusterv1.Machine, rec v1alpha1.MemberRemovalStatus, remaining int) (outcome, error) {
	if o, overdue := r.stopIfOverdue(s, m, rec); overdue {
		return o, nil
	}
	member, err := recordedMember(rec, s.snapshot.SyntheticMemberIDs)
	if err != nil {
		return r.stopRemoval(s, m, rec, v1alpha1.RemovalRejected, v1alpha1.EventMemberRemovalRejected, err.Error()), nil
	}
	callCtx, cancel := context.WithTimeout(ctx, r.callTimeout())
	defer cancel()
	removal, err := s.askRemoval(callCtx, member)
	switch {
	case err != nil:
		return acted(v1alpha1.ProgressingMemberRemovalReason, fmt.Sprintf("Confirming the removal of etcd member %s of Machine %s failed, retrying: %v", rec.Member, m.Name, err)).
			after(removalPollInterval), nil
	case removal.State == etcd.RemovalRemoved:
		return r.removalConfirmed(ctx, s, m, rec, removal.Reason, remaining)
	case removal.State == etcd.RemovalRejected:
		return r.stopRemoval(s, m, rec, v1alpha1.RemovalRejected, v1alpha1.EventMemberRemovalRejected, removal.Reason), nil
	}
	return acted(v1alpha1.ProgressingMemberRemovalReason, fmt.Sprintf("Removing etcd member %s of Machine %s: %s", rec.Member, m.Name, removal.Reason)).
		after(removalPollInterval), nil
}

// removalConfirmed ends the removal rec is about, which the backend confirmed (etcd.RemovalRemoved,
// for why): the hook is released when none of the Machine's other members is left (remaining),
// else the record is closed and the next pass removes the next one.
func (r *Reconciler) removalConfirmed(ctx context.Context, s *scope, m *clusterv1.Machine, rec v1alpha1.MemberRemovalStatus, why string, remaining int) (outcome, error) {
	if remaining > 0 {
		s.closeRemoval(rec, v1alpha1.RemovalRemoved, why)
		return acted(v1alpha1.ProgressingMemberRemovalReason, fmt.Sprintf("Removed etcd member %s of Machine %s; %d more to remove", rec.Member, m.Name, remaining)).
			after(confirmRequeueAfter), nil
	}
	r.atStep(ctx, StepRemovedBeforeRelease)
	return released(), r.releaseRemoved(ctx, s, m, why)
}
