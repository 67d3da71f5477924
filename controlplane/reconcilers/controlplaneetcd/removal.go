package controlplaneetcd

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/capimachine"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// removeMembersOf runs one step of: fresh observation → quorum projection → move leadership →
// record the removal → remove the member → confirm → release. The backend's answer to the
// removal confirms it when it can (removeMember); a removal it could not confirm is confirmed in
// a later pass (confirmRemoval).
//
// Important! The hook is released only on proof: no member belongs to the Machine by any
// identity (etcd.MembersOfMachine) in this pass's fresh observation, but the one whose removal
// the backend confirmed in this pass, and a removal recorded for the Machine is confirmed by the
// backend (a linearizable member list for kubeadm, K3s's evidence rules for K3s). A removal
// that stopped (Rejected, TimedOut) keeps the hook until a person releases it or asks for a
// retry (retry.go), even once its member is not visible any more.
func (r *Reconciler) removeMembersOf(ctx context.Context, s *scope, m *clusterv1.Machine) (outcome, error) {
	if record := s.removal(); record.stoppedFor(m) {
		rec := record.status
		return waiting(progressReasonFor(rec.Result), fmt.Sprintf("Removal of etcd member %s of Machine %s stopped: %s. %s", rec.Member, m.Name, rec.Message, retryOrReleaseHint)), nil
	}
	if s.snapshot == nil {
		return r.blocked(s, m, fmt.Sprintf("etcd could not be observed, so removing the member of Machine %s is not known to be safe: %v", m.Name, s.observeErr)), nil
	}
	record := s.removal()
	targets := etcd.RemovalOrder(etcd.AssessMembers(s.snapshot, s.now), s.membersOf(m))
	inFlight := record.inFlightFor(m)
	switch {
	case inFlight != nil && !slices.ContainsFunc(targets, record.isOf):
		return r.confirmRemoval(ctx, s, m, *inFlight, len(targets))
	case len(targets) == 0:
		facts := capimachine.Facts(m)
		if possible := etcd.MembersPossiblyOf(s.snapshot.Members, s.machineFacts(), facts); len(possible) > 0 {
			return identityPending(facts, possible), nil
		}
		r.atStep(ctx, StepRemovedBeforeRelease)
		return released(), r.releaseRemoved(ctx, s, m, noMemberReason(s, m))
	case len(targets) == len(s.snapshot.Members):
		return r.lastMember(ctx, s, m)
	}
	target := targets[0]
	if o, overdue := r.stopIfOverdue(s, m, record.of(m, target, s.now)); overdue {
		return o, nil
	}
	return r.removeMember(ctx, s, m, target, len(targets)-1)
}

// lastMember decides for a deleting Machine that hosts every member left: the member is never
// removed, and the Machine goes only on a person's say-so (skip-quorum-guard=true, with which the
// quorum guard let the deletion through, or release-hook=true).
//
// Important! The quorum guard refuses the last member's Machine, but the world can make a
// Machine the last one after its deletion was admitted (K3s removes the member of a deleted
// Node; another member's etcd loses its data). Releasing it then would delete the only copy of
// the cluster's data with the infrastructure; it waits instead, and says why.
func (r *Reconciler) lastMember(ctx context.Context, s *scope, m *clusterv1.Machine) (outcome, error) {
	if m.Annotations[v1alpha1.SkipQuorumGuardAnnotation] == v1alpha1.AnnotationTrue {
		return released(), r.release(ctx, s, m, fmt.Sprintf("Machine %s hosts the last etcd member, which is never removed, and has annotation %s=%s",
			m.Name, v1alpha1.SkipQuorumGuardAnnotation, v1alpha1.AnnotationTrue), v1alpha1.SkipQuorumGuardAnnotation)
	}
	return r.blocked(s, m, fmt.Sprintf("Machine %s hosts the last etcd member of Cluster %s, which is never removed, and deleting it would end etcd and the control plane with it: "+
		"it is held until the Cluster or its control plane is deleted, or a person annotates it %s=%s (or %s=%s)",
		m.Name, s.cluster.Name, v1alpha1.ReleaseHookAnnotation, v1alpha1.ReleaseHookValue, v1alpha1.SkipQuorumGuardAnnotation, v1alpha1.AnnotationTrue)), nil
}

// identityPending waits for what would tell m from the members possible
// (etcd.MembersPossiblyOf): absence of a tie is no
// proof while the Machine does not report its Node or addresses, so the hook stays until Cluster
// API copies them, or the member is tied to another Machine, or it leaves etcd.
func identityPending(m etcd.Machine, possible []etcd.Member) outcome {
	names := make([]string, 0, len(possible))
	for _, mb := range possible {
		names = append(names, mb.String())
	}
	return waiting(v1alpha1.ProgressingRemovalBlockedReason, fmt.Sprintf(
		"No etcd member is tied to deleting Machine %s, but etcd member(s) %s belong to no other Machine and the Machine does not report yet what would tell them apart (Node %q, addresses %v): "+
			"one may be its member, so its hook stays until Cluster API copies the Machine's Node or addresses, or the member leaves etcd (if none of them is its member, annotate the Machine %s=%s)",
		m.Name, strings.Join(names, ", "), m.NodeName, m.Addresses, v1alpha1.ReleaseHookAnnotation, v1alpha1.ReleaseHookValue)).after(blockedRecheckInterval)
}

// noMemberReason says why no member belongs to the Machine, for the release.
func noMemberReason(s *scope, m *clusterv1.Machine) string {
	if s.etcdadm {
		// Note: the etcdadm controller removes the member by its peer URL before it deletes the
		// Machine (aws/etcdadm-controller controllers/scale.go removeEtcdMemberAndDeleteMachine),
		// so its own scale-down reaches this with the member gone.
		return fmt.Sprintf("no etcd member belongs to etcd Machine %s any more (by member name or peer URL address)", m.Name)
	}
	if m.Status.NodeRef.Name == "" {
		return fmt.Sprintf("Machine %s never had a Node and no etcd member belongs to it (by Node name, member name or address)", m.Name)
	}
	return fmt.Sprintf("no etcd member belongs to Machine %s any more (by Node %s, member name or address)", m.Name, m.Status.NodeRef.Name)
}

// removeMember re-checks quorum on a fresh observation, moves leadership off the target if it
// leads, or else asks for the removal: one change per pass. others is how many more members of
// the Machine this pass's observation shows.
func (r *Reconciler) removeMember(ctx context.Context, s *scope, m *clusterv1.Machine, target etcd.Member, others int) (outcome, error) {
	log := ctrl.LoggerFrom(ctx).WithValues(memberLogValues(s.snapshot, target)...)
	// Important! This is the safety net right before the destructive call: the snapshot is this
	// pass's own, taken moments ago.
	verdict := etcd.CanRemoveMember(s.snapshot, s.now, target)
	log.V(2).Info("Quorum projection for member removal", "allowed", verdict.Allowed, "reason", verdict.Reason, "message", verdict.Message)
	if !verdict.Allowed {
		return r.blocked(s, m, fmt.Sprintf("Removing etcd member %s of Machine %s is not safe now (%s): %s", target, m.Name, verdict.Reason, verdict.Message)), nil
	}
	if o, wait := r.besideOtherRemoval(ctx, s, m, target); wait {
		return o, nil
	}
	// Important! The snapshot gate comes after the quorum projection: a snapshot never makes an
	// unsafe removal allowed. A removal asked before was preceded by its snapshot already.
	inFlight := s.removal().inFlightFor(m) != nil && s.removal().isOf(target)
	var preceding *v1alpha1.SnapshotRecord
	if !inFlight {
		snap, o, goesOn := r.snapshotBefore(ctx, s, m, target.NodeName)
		if !goesOn {
			return o, nil
		}
		preceding = snap
	}
	r.atStep(ctx, StepQuorumChecked)
	moved, err := r.moveLeadershipOff(ctx, s, m, target)
	switch {
	case err != nil:
		return acted(v1alpha1.ProgressingMemberRemovalReason, fmt.Sprintf("Removal of etcd member %s of Machine %s waits for its leadership to move: %v", target, m.Name, err)).
			after(removalPollInterval), err
	case moved != "":
		r.atStep(ctx, StepLeaderMoved)
		// The removal can be asked at once, on the next pass's fresh observation.
		return acted(v1alpha1.ProgressingMemberRemovalReason, moved).after(confirmRequeueAfter), nil
	}
	// Important! Write-ahead: the record is persisted before the backend is asked, so a manager
	// that stops right after asking finds the removal in flight and confirms it through the
	// backend instead of taking the member's absence (or K3s's removed-node-name claim) for proof.
	// A removal asked before (the member is still visible, and RemoveMember is idempotent) keeps
	// its record as it is.
	if !inFlight {
		s.openRemoval(m, target, "removal requested")
		s.cpe.Status.Removal.Snapshot = preceding
	}
	if err := r.persistRemoval(ctx, s); err != nil {
		return failed(), err
	}
	r.atStep(ctx, StepRemovalRecorded)
	callCtx, cancel := context.WithTimeout(ctx, r.callTimeout())
	defer cancel()
	removal, err := s.askRemoval(callCtx, target)
	r.atStep(ctx, StepRemovalRequested)
	if err != nil {
		msg := fmt.Sprintf("Removing etcd member %s of Machine %s failed, retrying: %v", target, m.Name, err)
		r.event(s, m, corev1.EventTypeWarning, v1alpha1.EventMemberRemovalFailed, msg)
		log.Info("Member removal failed, retrying", "err", err.Error())
		return acted(v1alpha1.ProgressingMemberRemovalReason, msg).after(removalPollInterval), nil
	}
	log.Info("Member removal", "state", removal.State, "reason", removal.Reason)
	switch removal.State {
	case etcd.RemovalRemoved:
		r.event(s, m, corev1.EventTypeNormal, v1alpha1.EventMemberRemoved, fmt.Sprintf("Removed etcd member %s of Node %s", memberWithID(s.snapshot, target), target.NodeName))
		return r.removedNow(ctx, s, m, target, removal.Reason, others)
	case etcd.RemovalRejected:
		return r.stopRemoval(s, m, s.removal().of(m, target, s.now), v1alpha1.RemovalRejected, v1alpha1.EventMemberRemovalRejected, removal.Reason), nil
	}
	r.event(s, m, corev1.EventTypeNormal, v1alpha1.EventMemberRemoving, fmt.Sprintf("Removing etcd member %s of Node %s: %s", memberWithID(s.snapshot, target), target.NodeName, removal.Reason))
	return acted(v1alpha1.ProgressingMemberRemovalReason, fmt.Sprintf("Removing etcd member %s of Machine %s: %s", target, m.Name, removal.Reason)).after(removalPollInterval), nil
}

// removedNow settles a removal the backend answered Removed, in the pass that asked for it: the
// record is closed, and the hook released when the Machine has no other member.
//
// Important! Removed is the backend's proof that the member is gone (kubeadm and external: a
// linearizable member list, asked after the MemberRemove, without it; K3s: its evidence rules),
// the same proof confirmRemoval asks the backend for in a later pass, so waiting for that pass
// would prove nothing more. The pass still ends here, released or not: its observation shows
// the member it removed, so no other Machine's removal, and no ghost's, is decided on it.
func (r *Reconciler) removedNow(ctx context.Context, s *scope, m *clusterv1.Machine, target etcd.Member, why string, others int) (outcome, error) {
	o, err := r.removalConfirmed(ctx, s, m, s.removal().of(m, target, s.now), why, others)
	if err != nil || o.step != stepReleased {
		return o, err
	}
	return acted(v1alpha1.ProgressingMemberRemovalReason, fmt.Sprintf("Removed etcd member %s of Machine %s and released its hook", target, m.Name)).after(confirmRequeueAfter), nil
}

// memberWithID names a member for Events: etcd.Member.String, with etcd's member ID when the
// backend knows it (never an ID the backend made up, which etcd shows differently).
func memberWithID(snap *etcd.Snapshot, m etcd.Member) string {
	if id := snap.EtcdMemberID(m.ID); id != "" && m.Started() {
		return fmt.Sprintf("%s (%s)", m, id)
	}
	return m.String()
}

// memberLogValues are the log keys naming a member: memberName, and memberID when it is etcd's.
func memberLogValues(snap *etcd.Snapshot, m etcd.Member) []any {
	if id := snap.EtcdMemberID(m.ID); id != "" {
		return []any{"memberName", m.Name, "memberID", id}
	}
	return []any{"memberName", m.Name}
}
