package controlplaneetcd

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// ensureHooks puts the pre-terminate hook on every Machine hosting members (memberMachines: the
// control-plane Machines, or an EtcdadmCluster's etcd Machines) that is not deleting, so any
// deletion (scale-down, remediation, kubectl delete) drains the Node before the member is
// removed. Adding a hook is no membership change, so all Machines are handled in one pass.
// Note: the Machine hook webhook (controlplane/webhooks/machinehook) adds the hook at creation;
// this is the backstop for Machines created before the Cluster was managed, while the webhook
// could not tell (the Cluster did not exist yet), or with webhooks off.
func (r *Reconciler) ensureHooks(ctx context.Context, s *scope) error {
	for _, m := range s.memberMachines() {
		if !m.DeletionTimestamp.IsZero() || m.Annotations[v1alpha1.PreTerminateHookAnnotation] != "" {
			continue
		}
		before := m.DeepCopy()
		if m.Annotations == nil {
			m.Annotations = map[string]string{}
		}
		m.Annotations[v1alpha1.PreTerminateHookAnnotation] = v1alpha1.PreTerminateHookValue
		if err := r.Client.Patch(ctx, m, client.MergeFrom(before)); err != nil {
			return fmt.Errorf("failed to add the pre-terminate hook to Machine %s: %w", klog.KObj(m), err)
		}
	}
	return nil
}

// holdsMachine reports whether a hook this controller releases holds the Machine: its own, or
// the legacy cluster-api-k3s hook when no KThreesControlPlane is left to release it.
func (s *scope) holdsMachine(m *clusterv1.Machine) bool {
	if m.Annotations[v1alpha1.PreTerminateHookAnnotation] != "" {
		return true
	}
	return s.adoptsLegacyHook(m)
}

func (s *scope) adoptsLegacyHook(m *clusterv1.Machine) bool {
	return s.legacyHookAdoptable && m.Annotations[v1alpha1.LegacyK3sHookAnnotation] == v1alpha1.LegacyK3sHookValue
}

// otherPreTerminateHooks lists the pre-terminate hooks on m that this controller waits for:
// every hook it does not release, except a provider's own etcd hook that itself waits for all
// other hooks (KCP's kcp-cleanup for Kubernetes >= 1.31, CAPRKE2's rke2-cleanup). Ours runs
// just before such a hook, since each waiting for the other would hang the deletion for ever
// (see orderBefore).
func (s *scope) otherPreTerminateHooks(m *clusterv1.Machine) []string {
	var out []string
	for k := range m.Annotations {
		if !strings.HasPrefix(k, clusterv1.PreTerminateDeleteHookAnnotationPrefix) || k == v1alpha1.PreTerminateHookAnnotation {
			continue
		}
		if k == v1alpha1.LegacyK3sHookAnnotation && s.adoptsLegacyHook(m) {
			continue
		}
		if !orderBefore(k, s.controlPlaneFacts).Wait {
			continue
		}
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// step is what one pass decided for one deleting Machine.
type step int

const (
	// stepReleased: the hook was released. Releasing changes no membership, so the next Machine
	// is looked at in the same pass.
	stepReleased step = iota
	// stepWaiting: the Machine waits and this pass changed nothing for it: drain and volume
	// detach are not over, other pre-terminate hooks go first, its removal stopped and waits for
	// a person, or removing its member is not safe now. The next Machine is looked at.
	stepWaiting
	// stepActed: the Machine's removal made a change in this pass (leadership moved, a removal
	// asked, confirmed or stopped) or has one under way: the pass ends there, one change per pass.
	stepActed
)

// reconcileDeletingMachines runs the removal flow for the deleting Machines held, longest held
// first (oldest deletion timestamp, then name), so every pass picks the same order and makes at
// most one change.
//
// Important! A Machine that waits (stepWaiting) does not hold up the ones behind it, whatever it
// waits for: a drain held by a PodDisruptionBudget, another provider's hook, a stopped removal
// that waits for a person, or a removal the quorum projection refuses. Machine A of a healthy
// member is refused while member C is down, and the Machine a person deleted to replace C must
// still get C's member removed, or A waits for ever. The quorum projection still decides every
// removal, right before it is asked (removeMember).
func (r *Reconciler) reconcileDeletingMachines(ctx context.Context, s *scope) (ctrl.Result, error) {
	var held []*clusterv1.Machine
	for _, m := range s.memberMachines() {
		if !m.DeletionTimestamp.IsZero() && s.holdsMachine(m) {
			held = append(held, m)
		}
	}
	slices.SortFunc(held, func(a, b *clusterv1.Machine) int {
		return cmp.Or(a.DeletionTimestamp.Time.Compare(b.DeletionTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	if err := r.closeOrphanedRemoval(ctx, s, held); err != nil {
		return s.requeue(), err
	}
	var firstWaiting *metav1.Condition
	for _, m := range held {
		log := ctrl.LoggerFrom(ctx).WithValues("Machine", klog.KObj(m))
		st, err := r.reconcileDeletingMachine(ctrl.LoggerInto(ctx, log), s, m)
		switch {
		case err != nil:
			return s.requeue(), err
		case st == stepReleased:
			continue
		case st == stepWaiting:
			if firstWaiting == nil {
				firstWaiting = s.progressing
			}
			log.V(4).Info("Looking at the next deleting Machine: this one waits")
			continue
		}
		return s.requeue(), nil
	}
	if firstWaiting != nil {
		// Every held Machine left waits; the condition tells about the one held longest.
		s.progressing = firstWaiting
		return s.requeue(), nil
	}
	return ctrl.Result{}, nil
}

// closeOrphanedRemoval closes a removal record left InProgress for a Machine no hook of ours holds
// any more (gone, or its hook taken off by other means), so it neither stays InProgress for ever
// nor keeps other removals from starting. The record says whether the member is still there.
func (r *Reconciler) closeOrphanedRemoval(ctx context.Context, s *scope, held []*clusterv1.Machine) error {
	rec := s.cpe.Status.Removal
	if rec == nil || rec.Result != v1alpha1.RemovalInProgress || rec.EndTime != nil || s.snapshot == nil ||
		slices.ContainsFunc(held, func(m *clusterv1.Machine) bool { return m.Name == rec.MachineName }) {
		return nil
	}
	closed := rec.DeepCopy()
	closed.EndTime = &metav1.Time{Time: s.now}
	_, err := recordedMember(*rec, s.snapshot.SyntheticMemberIDs)
	if present := slices.ContainsFunc(s.snapshot.Members, func(mb etcd.Member) bool { return s.recordIsOf(rec, mb) }); err == nil && !present {
		closed.Result, closed.Message = v1alpha1.RemovalRemoved, fmt.Sprintf("Machine %s is no longer held by etcd-adapter and etcd member %s is gone", rec.MachineName, rec.Member)
	} else {
		closed.Result, closed.Message = v1alpha1.RemovalReleased, fmt.Sprintf("Machine %s is no longer held by etcd-adapter (its hook was released by other means); etcd member %s was not confirmed removed", rec.MachineName, rec.Member)
	}
	s.cpe.Status.Removal = closed
	ctrl.LoggerFrom(ctx).Info("Closed the removal record of a Machine no longer held", "MachineName", rec.MachineName, "memberName", rec.Member, "result", closed.Result)
	return r.persistRemoval(ctx, s)
}

// reconcileDeletingMachine moves one Machine's removal flow one step and says what it decided.
func (r *Reconciler) reconcileDeletingMachine(ctx context.Context, s *scope, m *clusterv1.Machine) (step, error) {
	if why := releaseWithoutRemoval(s, m); why != "" {
		return stepReleased, r.release(ctx, s, m, why, v1alpha1.EventHookReleased)
	}
	if reason := deletingReason(m); reason != clusterv1.MachineDeletingWaitingForPreTerminateHookReason {
		// Drain and volume detach are not over; the Machine watch wakes us when they are.
		s.setProgressing(v1alpha1.ProgressingMemberRemovalReason, fmt.Sprintf("Machine %s is deleting; waiting for drain and volume detach (Deleting reason %q)", m.Name, reason))
		return stepWaiting, nil
	}
	if others := s.otherPreTerminateHooks(m); len(others) > 0 {
		s.setProgressing(v1alpha1.ProgressingMemberRemovalReason, fmt.Sprintf("Machine %s waits for pre-terminate hooks %s to be released first", m.Name, strings.Join(others, ", ")))
		return stepWaiting, nil
	}
	return r.removeMembersOf(ctx, s, m)
}

// releaseWithoutRemoval says why the hook may go without removing a member, or "".
func releaseWithoutRemoval(s *scope, m *clusterv1.Machine) string {
	switch {
	case releaseRequested(m):
		return fmt.Sprintf("released by annotation %s=%s", v1alpha1.ReleaseHookAnnotation, v1alpha1.ReleaseHookValue)
	case !s.cluster.DeletionTimestamp.IsZero():
		return "the Cluster is being deleted"
	case s.controlPlaneDeleting:
		return "the control plane is being deleted"
	}
	return ""
}

// releaseRequested reports whether a person asked to release the hook: only the explicit value
// counts, so "false" or an empty value releases nothing.
func releaseRequested(m *clusterv1.Machine) bool {
	return m.Annotations[v1alpha1.ReleaseHookAnnotation] == v1alpha1.ReleaseHookValue
}

func deletingReason(m *clusterv1.Machine) string {
	if c := conditions.Get(m, clusterv1.MachineDeletingCondition); c != nil {
		return c.Reason
	}
	return ""
}

// removeMembersOf runs one step of: fresh observation → quorum projection → move leadership →
// record the removal → remove the member → (next pass) confirm → release.
//
// Important! The hook is released only on proof: no member belongs to the Machine by any
// identity (etcd.MembersOfMachine) in this pass's fresh observation, and a removal recorded for
// the Machine is confirmed by the backend (a linearizable member list for kubeadm, K3s's evidence
// rules for K3s). A removal that stopped (Rejected, TimedOut) keeps the hook until a person
// releases it or asks for a retry (retry.go), even once its member is not visible any more.
func (r *Reconciler) removeMembersOf(ctx context.Context, s *scope, m *clusterv1.Machine) (step, error) {
	if rec := s.cpe.Status.Removal; rec != nil && rec.MachineName == m.Name && stopped(rec.Result) {
		s.setProgressing(progressReasonFor(rec.Result), fmt.Sprintf("Removal of etcd member %s of Machine %s stopped: %s. %s", rec.Member, m.Name, rec.Message, whatNow))
		return stepWaiting, nil
	}
	if s.snapshot == nil {
		r.setBlocked(s, m, fmt.Sprintf("etcd could not be observed, so removing the member of Machine %s is not known to be safe: %v", m.Name, s.observeErr))
		return stepWaiting, nil
	}
	targets := etcd.RemovalOrder(etcd.AssessMembers(s.snapshot, s.now), s.membersOf(m))
	inFlight := s.removalInFlight(m)
	switch {
	case inFlight != nil && !slices.ContainsFunc(targets, func(mb etcd.Member) bool { return s.recordIsOf(inFlight, mb) }):
		return r.confirmRemoval(ctx, s, m, *inFlight, len(targets))
	case len(targets) == 0 && s.identityPending(m):
		return stepWaiting, nil
	case len(targets) == 0:
		r.atStep(ctx, StepRemovedBeforeRelease)
		return stepReleased, r.releaseRemoved(ctx, s, m, noMemberReason(s, m))
	case len(targets) == len(s.snapshot.Members):
		return r.lastMember(ctx, s, m)
	}
	target := targets[0]
	if r.stopIfOverdue(s, m, s.removalRecord(m, target)) {
		return stepActed, nil
	}
	return r.removeMember(ctx, s, m, target)
}

// lastMember decides for a deleting Machine that hosts every member left: the member is never
// removed, and the Machine goes only on a person's say-so (skip-quorum-guard=true, with which the
// quorum guard let the deletion through, or release-hook=true).
//
// Important! The quorum guard refuses the last member's Machine, but the world can make a
// Machine the last one after its deletion was admitted (K3s removes the member of a deleted
// Node; another member's etcd loses its data). Releasing it then would delete the only copy of
// the cluster's data with the infrastructure; it waits instead, and says why.
func (r *Reconciler) lastMember(ctx context.Context, s *scope, m *clusterv1.Machine) (step, error) {
	if m.Annotations[v1alpha1.SkipQuorumGuardAnnotation] == v1alpha1.AnnotationTrue {
		return stepReleased, r.release(ctx, s, m, fmt.Sprintf("Machine %s hosts the last etcd member, which is never removed, and has annotation %s=%s",
			m.Name, v1alpha1.SkipQuorumGuardAnnotation, v1alpha1.AnnotationTrue), v1alpha1.EventHookReleased)
	}
	r.setBlocked(s, m, fmt.Sprintf("Machine %s hosts the last etcd member of Cluster %s, which is never removed, and deleting it would end etcd and the control plane with it: "+
		"it is held until the Cluster or its control plane is deleted, or a person annotates it %s=%s (or %s=%s)",
		m.Name, s.cluster.Name, v1alpha1.ReleaseHookAnnotation, v1alpha1.ReleaseHookValue, v1alpha1.SkipQuorumGuardAnnotation, v1alpha1.AnnotationTrue))
	return stepWaiting, nil
}

// identityPending reports, and says in Progressing, that no member is tied to the Machine only
// because the Machine does not report yet what would tell (etcd.MembersPossiblyOf): absence is no
// proof then, so the hook stays until Cluster API copies the Machine's Node or addresses, or the
// member is tied to another Machine, or it leaves etcd.
func (s *scope) identityPending(m *clusterv1.Machine) bool {
	possible := etcd.MembersPossiblyOf(s.snapshot.Members, s.machineFacts(), etcd.MachineFacts(m))
	if len(possible) == 0 {
		return false
	}
	names := make([]string, 0, len(possible))
	for _, mb := range possible {
		names = append(names, mb.String())
	}
	s.setProgressing(v1alpha1.ProgressingRemovalBlockedReason, fmt.Sprintf(
		"No etcd member is tied to deleting Machine %s, but etcd member(s) %s belong to no other Machine and the Machine does not report yet what would tell them apart (Node %q, addresses %v): "+
			"one may be its member, so its hook stays until Cluster API copies the Machine's Node or addresses, or the member leaves etcd (if none of them is its member, annotate the Machine %s=%s)",
		m.Name, strings.Join(names, ", "), m.Status.NodeRef.Name, addresses(m), v1alpha1.ReleaseHookAnnotation, v1alpha1.ReleaseHookValue))
	s.wantRequeue(blockedRecheckInterval)
	return true
}

func addresses(m *clusterv1.Machine) []string {
	out := make([]string, 0, len(m.Status.Addresses))
	for _, a := range m.Status.Addresses {
		out = append(out, a.Address)
	}
	return out
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

// membersOf returns the members of this pass's observation that belong to m.
func (s *scope) membersOf(m *clusterv1.Machine) []etcd.Member {
	return etcd.MembersOfMachine(s.snapshot.Members, s.machineFacts(), etcd.MachineFacts(m))
}

// stopIfOverdue stops a removal that has waited longer than spec.memberRemovalTimeout, and
// reports whether it did.
func (r *Reconciler) stopIfOverdue(s *scope, m *clusterv1.Machine, rec v1alpha1.MemberRemovalStatus) bool {
	limit := s.cpe.Spec.MemberRemovalTimeoutOrDefault()
	if s.now.Sub(rec.StartTime.Time) <= limit {
		return false
	}
	_ = r.stopRemoval(s, m, rec, v1alpha1.RemovalTimedOut, v1alpha1.EventMemberRemovalTimedOut, fmt.Sprintf("the removal waited longer than %s", limit))
	return true
}

// confirmRemoval asks the backend how the removal this Machine's record is about went, when the
// snapshot no longer shows the member on the Machine's Node. Absence alone is not a removal: K3s
// drops a Node's node-name and writes removed-node-name also when it found no member at the
// Node's address and removed nothing (k3s pkg/etcd member controller), and pkg/k3s answers
// Removed only with evidence that agrees. kubeadm confirms with a linearizable member list.
//
// remaining is how many other members of the Machine are still there: the hook is released only
// when none is, else the record is closed and the next pass removes the next member.
func (r *Reconciler) confirmRemoval(ctx context.Context, s *scope, m *clusterv1.Machine, rec v1alpha1.MemberRemovalStatus, remaining int) (step, error) {
	if r.stopIfOverdue(s, m, rec) {
		return stepActed, nil
	}
	member, err := recordedMember(rec, s.snapshot.SyntheticMemberIDs)
	if err != nil {
		return stepActed, r.stopRemoval(s, m, rec, v1alpha1.RemovalRejected, v1alpha1.EventMemberRemovalRejected, err.Error())
	}
	callCtx, cancel := context.WithTimeout(ctx, r.callTimeout())
	defer cancel()
	removal, err := s.backend.RemoveMember(callCtx, member)
	switch {
	case err != nil:
		s.setProgressing(v1alpha1.ProgressingMemberRemovalReason, fmt.Sprintf("Confirming the removal of etcd member %s of Machine %s failed, retrying: %v", rec.Member, m.Name, err))
		s.wantRequeue(removalPollInterval)
		return stepActed, nil
	case removal.State == etcd.RemovalRemoved && remaining > 0:
		rec.Result, rec.Message, rec.EndTime = v1alpha1.RemovalRemoved, removal.Reason, &metav1.Time{Time: s.now}
		s.cpe.Status.Removal = &rec
		s.setProgressing(v1alpha1.ProgressingMemberRemovalReason, fmt.Sprintf("Removed etcd member %s of Machine %s; %d more to remove", rec.Member, m.Name, remaining))
		s.wantRequeue(confirmRequeueAfter)
		return stepActed, nil
	case removal.State == etcd.RemovalRemoved:
		r.atStep(ctx, StepRemovedBeforeRelease)
		return stepReleased, r.releaseRemoved(ctx, s, m, removal.Reason)
	case removal.State == etcd.RemovalRejected:
		return stepActed, r.stopRemoval(s, m, rec, v1alpha1.RemovalRejected, v1alpha1.EventMemberRemovalRejected, removal.Reason)
	}
	s.setProgressing(v1alpha1.ProgressingMemberRemovalReason, fmt.Sprintf("Removing etcd member %s of Machine %s: %s", rec.Member, m.Name, removal.Reason))
	s.wantRequeue(removalPollInterval)
	return stepActed, nil
}

// recordedMember returns the member a removal record is about, as the backends take it: the
// record names it as etcd.Member.String does (its name, or its ID for a member that never
// started). A backend whose IDs are not etcd's (synthetic, K3s) identifies the member by its name
// and Node, which the record holds, and gets it with a zero ID.
func recordedMember(rec v1alpha1.MemberRemovalStatus, synthetic bool) (etcd.Member, error) {
	if synthetic {
		if rec.Member == "" || rec.NodeName == "" {
			return etcd.Member{}, fmt.Errorf("the removal record names member %q on Node %q; this backend identifies a member by its name and Node", rec.Member, rec.NodeName)
		}
		return etcd.Member{Name: rec.Member, NodeName: rec.NodeName}, nil
	}
	id, err := strconv.ParseUint(rec.MemberID, 16, 64)
	if err != nil || id == 0 {
		return etcd.Member{}, fmt.Errorf("the removal record names member %q with ID %q, which is not an etcd member ID", rec.Member, rec.MemberID)
	}
	m := etcd.Member{ID: id, Name: rec.Member, NodeName: rec.NodeName}
	if m.Name == (etcd.Member{ID: id}).String() {
		m.Name = ""
	}
	return m, nil
}

// removalInFlight returns the record of a removal asked for m that has not ended, or nil.
func (s *scope) removalInFlight(m *clusterv1.Machine) *v1alpha1.MemberRemovalStatus {
	if rec := s.cpe.Status.Removal; rec != nil && rec.MachineName == m.Name && rec.Result == v1alpha1.RemovalInProgress && s.namesMember(rec) {
		return rec
	}
	return nil
}

// namesMember reports whether rec identifies a member: by etcd's member ID, or, for a backend
// whose IDs are not etcd's (K3s records none), by name and Node. Without an observation (the
// hand-back runs then too) the backend's way is not known, so either counts.
func (s *scope) namesMember(rec *v1alpha1.MemberRemovalStatus) bool {
	if rec.MemberID != "" {
		return true
	}
	return (s.snapshot == nil || s.snapshot.SyntheticMemberIDs) && rec.Member != "" && rec.NodeName != ""
}

// recordIsOf reports whether rec records the removal of member mb of this pass's observation: by
// etcd's member ID, or, when the backend's IDs are not etcd's (K3s), by member name and Node, as
// K3s itself identifies the member it removes (a rejoin gives the member a new name).
func (s *scope) recordIsOf(rec *v1alpha1.MemberRemovalStatus, mb etcd.Member) bool {
	if s.snapshot.SyntheticMemberIDs {
		return rec.Member != "" && rec.Member == mb.Name && rec.NodeName == mb.NodeName
	}
	return rec.MemberID != "" && rec.MemberID == strconv.FormatUint(mb.ID, 16)
}

// dropSyntheticMemberID takes a member ID etcd did not assign off status.removal. Earlier versions
// recorded K3s removals with the backend's synthetic ID (a hash of the member name); the record
// also holds that name and the Node, which identify the member as well (recordIsOf), so a removal
// in flight across an upgrade continues against the same member and the ID is no longer shown.
func dropSyntheticMemberID(s *scope) {
	if rec := s.cpe.Status.Removal; rec != nil && rec.MemberID != "" && s.snapshot != nil && s.snapshot.SyntheticMemberIDs {
		rec.MemberID = ""
	}
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

// removeMember re-checks quorum on a fresh observation, moves leadership off the target if it
// leads, or else asks for the removal: one change per pass.
func (r *Reconciler) removeMember(ctx context.Context, s *scope, m *clusterv1.Machine, target etcd.Member) (step, error) {
	log := ctrl.LoggerFrom(ctx).WithValues(memberLogValues(s.snapshot, target)...)
	// Important! This is the safety net right before the destructive call: the snapshot is this
	// pass's own, taken moments ago.
	verdict := etcd.CanRemoveMember(s.snapshot, s.now, target)
	log.V(2).Info("Quorum projection for member removal", "allowed", verdict.Allowed, "reason", verdict.Reason, "message", verdict.Message)
	if !verdict.Allowed {
		r.setBlocked(s, m, fmt.Sprintf("Removing etcd member %s of Machine %s is not safe now (%s): %s", target, m.Name, verdict.Reason, verdict.Message))
		return stepWaiting, nil
	}
	if st, wait := r.besideOtherRemoval(ctx, s, m, target); wait {
		return st, nil
	}
	r.atStep(ctx, StepQuorumChecked)
	if moved, err := r.moveLeadershipOff(ctx, s, m, target); err != nil || moved {
		if moved {
			r.atStep(ctx, StepLeaderMoved)
		}
		s.wantRequeue(removalPollInterval)
		return stepActed, err
	}
	// Important! Write-ahead: the record is persisted before the backend is asked, so a manager
	// that stops right after asking finds the removal in flight and confirms it through the
	// backend instead of taking the member's absence (or K3s's removed-node-name claim) for proof.
	// A removal asked before (the member is still visible, and RemoveMember is idempotent) keeps
	// its record as it is.
	if rec := s.removalInFlight(m); rec == nil || !s.recordIsOf(rec, target) {
		s.recordRemoval(m, target, v1alpha1.RemovalInProgress, "removal requested")
	}
	if err := r.persistRemoval(ctx, s); err != nil {
		return stepActed, err
	}
	r.atStep(ctx, StepRemovalRecorded)
	callCtx, cancel := context.WithTimeout(ctx, r.callTimeout())
	defer cancel()
	removal, err := s.backend.RemoveMember(callCtx, target)
	r.atStep(ctx, StepRemovalRequested)
	if err != nil {
		msg := fmt.Sprintf("Removing etcd member %s of Machine %s failed, retrying: %v", target, m.Name, err)
		s.setProgressing(v1alpha1.ProgressingMemberRemovalReason, msg)
		r.event(s, m, corev1.EventTypeWarning, v1alpha1.EventMemberRemovalFailed, msg)
		s.wantRequeue(removalPollInterval)
		log.Info("Member removal failed, retrying", "err", err.Error())
		return stepActed, nil
	}
	log.Info("Member removal", "state", removal.State, "reason", removal.Reason)
	switch removal.State {
	case etcd.RemovalRemoved:
		r.event(s, m, corev1.EventTypeNormal, v1alpha1.EventMemberRemoved, fmt.Sprintf("Removed etcd member %s of Node %s", memberWithID(s.snapshot, target), target.NodeName))
		// Next pass confirms on a fresh observation and releases the hook (or removes the next
		// member of the same Node).
		s.recordRemoval(m, target, v1alpha1.RemovalInProgress, "member removed; confirming")
		s.setProgressing(v1alpha1.ProgressingMemberRemovalReason, fmt.Sprintf("Removed etcd member %s of Machine %s; confirming", target, m.Name))
		s.wantRequeue(confirmRequeueAfter)
		return stepActed, nil
	case etcd.RemovalRejected:
		rec := s.removalRecord(m, target)
		return stepActed, r.stopRemoval(s, m, rec, v1alpha1.RemovalRejected, v1alpha1.EventMemberRemovalRejected, removal.Reason)
	}
	r.event(s, m, corev1.EventTypeNormal, v1alpha1.EventMemberRemoving, fmt.Sprintf("Removing etcd member %s of Node %s: %s", memberWithID(s.snapshot, target), target.NodeName, removal.Reason))
	s.setProgressing(v1alpha1.ProgressingMemberRemovalReason, fmt.Sprintf("Removing etcd member %s of Machine %s: %s", target, m.Name, removal.Reason))
	s.wantRequeue(removalPollInterval)
	return stepActed, nil
}

// moveLeadershipOff moves leadership to the best candidate when target leads. It reports moved
// when leadership changed (a change: the pass ends there).
func (r *Reconciler) moveLeadershipOff(ctx context.Context, s *scope, m *clusterv1.Machine, target etcd.Member) (bool, error) {
	if s.snapshot.LeaderID != target.ID {
		return false, nil
	}
	candidates := etcd.LeaderCandidates(etcd.AssessMembers(s.snapshot, s.now), s.machineFacts(), target)
	var errs []string
	for _, c := range candidates {
		callCtx, cancel := context.WithTimeout(ctx, r.callTimeout())
		move, err := s.backend.MoveLeader(callCtx, target, c)
		cancel()
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", c, err))
			continue
		}
		switch move.Outcome {
		case etcd.LeaderMoved:
			r.event(s, m, corev1.EventTypeNormal, v1alpha1.EventLeaderMoved, fmt.Sprintf("Moved etcd leadership from %s to %s before removing it", target, c))
			s.setProgressing(v1alpha1.ProgressingMemberRemovalReason, fmt.Sprintf("Moved etcd leadership from %s to %s", target, c))
			return true, nil
		case etcd.LeaderMoveByBackend:
			if move.Warning != "" {
				r.event(s, m, corev1.EventTypeNormal, v1alpha1.EventLeaderMoved, move.Warning)
			}
		}
		return false, nil
	}
	if len(errs) > 0 {
		err := fmt.Errorf("failed to move etcd leadership off %s: %s", target, strings.Join(errs, "; "))
		r.event(s, m, corev1.EventTypeWarning, v1alpha1.EventLeaderMoveFailed, err.Error()+"; retrying")
		return false, err
	}
	return false, nil
}

// whatNow tells a person what ends a stopped removal: a retry once the cause is fixed, or a
// release.
var whatNow = fmt.Sprintf("Fix the cause and set annotation %s=%s on the Machine to retry the removal, or set %s=%s to release the hook without it",
	v1alpha1.RetryRemovalAnnotation, v1alpha1.AnnotationTrue, v1alpha1.ReleaseHookAnnotation, v1alpha1.ReleaseHookValue)

func stopped(res v1alpha1.RemovalResult) bool {
	return res == v1alpha1.RemovalRejected || res == v1alpha1.RemovalTimedOut
}

func progressReasonFor(res v1alpha1.RemovalResult) string {
	if res == v1alpha1.RemovalRejected {
		return v1alpha1.ProgressingRemovalRejectedReason
	}
	return v1alpha1.ProgressingRemovalTimedOutReason
}

// stopRemoval keeps the hook, records why and tells the Machine's watchers.
func (r *Reconciler) stopRemoval(s *scope, m *clusterv1.Machine, rec v1alpha1.MemberRemovalStatus, res v1alpha1.RemovalResult, event, why string) error {
	rec.Result, rec.Message, rec.EndTime = res, why, &metav1.Time{Time: s.now}
	s.cpe.Status.Removal = &rec
	r.event(s, m, corev1.EventTypeWarning, event, fmt.Sprintf("Keeping the pre-terminate hook: removal of etcd member %s %s: %s. %s", rec.Member, strings.ToLower(string(res)), why, whatNow))
	s.setProgressing(progressReasonFor(res), fmt.Sprintf("Removal of etcd member %s of Machine %s %s: %s", rec.Member, m.Name, strings.ToLower(string(res)), why))
	return nil
}

// setBlocked says a deleting Machine waits on an unsafe removal, on the status and the Machine.
func (r *Reconciler) setBlocked(s *scope, m *clusterv1.Machine, msg string) {
	s.setProgressing(v1alpha1.ProgressingRemovalBlockedReason, msg)
	r.event(s, m, corev1.EventTypeWarning, v1alpha1.EventMemberRemovalBlocked, msg)
	s.wantRequeue(blockedRecheckInterval)
}

func (s *scope) setProgressing(reason, msg string) {
	s.progressing = &metav1.Condition{Type: v1alpha1.ProgressingCondition, Status: metav1.ConditionTrue, Reason: reason, Message: msg}
}

// removalRecord returns the recorded removal of target for m, or a new one starting now.
func (s *scope) removalRecord(m *clusterv1.Machine, target etcd.Member) v1alpha1.MemberRemovalStatus {
	if rec := s.cpe.Status.Removal; rec != nil && rec.MachineName == m.Name && s.recordIsOf(rec, target) {
		return *rec
	}
	// Note: no member ID for a backend that cannot see etcd's (K3s); the name and Node identify
	// the member.
	return v1alpha1.MemberRemovalStatus{Member: target.String(), MemberID: s.snapshot.EtcdMemberID(target.ID), MachineName: m.Name, NodeName: target.NodeName,
		StartTime: metav1.Time{Time: s.now}, Result: v1alpha1.RemovalInProgress}
}

func (s *scope) recordRemoval(m *clusterv1.Machine, target etcd.Member, res v1alpha1.RemovalResult, msg string) {
	rec := s.removalRecord(m, target)
	rec.Result, rec.Message = res, msg
	s.cpe.Status.Removal = &rec
}

// releaseRemoved releases the hook of a Machine whose members are gone, closing its record.
func (r *Reconciler) releaseRemoved(ctx context.Context, s *scope, m *clusterv1.Machine, why string) error {
	rec := s.cpe.Status.Removal
	if rec != nil && rec.MachineName != m.Name && s.recordStillNeeded(rec) {
		// Another Machine's removal is in progress or waits for a person: its record stays.
		return r.release(ctx, s, m, why, v1alpha1.EventHookReleased)
	}
	if rec == nil || rec.MachineName != m.Name {
		// No member belonged to the Machine in this pass's observation and none was recorded:
		// the record still says what ended for this Machine.
		rec = &v1alpha1.MemberRemovalStatus{Member: "every member of Machine " + m.Name, MachineName: m.Name,
			NodeName: m.Status.NodeRef.Name, StartTime: metav1.Time{Time: s.now}}
		s.cpe.Status.Removal = rec
	}
	if rec.EndTime == nil {
		rec.Result, rec.Message, rec.EndTime = v1alpha1.RemovalRemoved, why, &metav1.Time{Time: s.now}
	}
	return r.release(ctx, s, m, why, v1alpha1.EventHookReleased)
}

// release removes the hooks this controller holds m with.
//
// Important! The closed record is persisted before the hook goes: once the Machine is gone, no
// later pass holds it to close a record left InProgress.
func (r *Reconciler) release(ctx context.Context, s *scope, m *clusterv1.Machine, why, event string) error {
	if rec := s.cpe.Status.Removal; rec != nil && rec.MachineName == m.Name && (rec.EndTime == nil || stopped(rec.Result)) {
		// A stopped removal (Rejected, TimedOut) that a person releases ends as Released.
		rec.Result, rec.Message, rec.EndTime = v1alpha1.RemovalReleased, why, &metav1.Time{Time: s.now}
	}
	if err := r.persistRemoval(ctx, s); err != nil {
		return err
	}
	before := m.DeepCopy()
	delete(m.Annotations, v1alpha1.PreTerminateHookAnnotation)
	if s.adoptsLegacyHook(m) {
		delete(m.Annotations, v1alpha1.LegacyK3sHookAnnotation)
	}
	if err := r.Client.Patch(ctx, m, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("failed to release the pre-terminate hook of Machine %s: %w", klog.KObj(m), err)
	}
	r.atStep(ctx, StepHookReleased)
	ctrl.LoggerFrom(ctx).Info("Released the pre-terminate hook", "why", why)
	r.event(s, m, corev1.EventTypeNormal, event, "Released the etcd-adapter pre-terminate hook: "+why)
	return nil
}

// removalUnderWay returns the removal record that has not ended, of any Machine, or nil.
func (s *scope) removalUnderWay() *v1alpha1.MemberRemovalStatus {
	if rec := s.cpe.Status.Removal; rec != nil && rec.Result == v1alpha1.RemovalInProgress && rec.EndTime == nil {
		return rec
	}
	return nil
}

// persistRemoval writes status.removal now when it differs from what is stored, instead of at
// the end of the pass: the removal flow writes its record ahead of the step it records.
func (r *Reconciler) persistRemoval(ctx context.Context, s *scope) error {
	if equality.Semantic.DeepEqual(s.cpe.Status.Removal, s.storedRemoval) {
		return nil
	}
	// Note: a copy is patched, so the pass's object keeps the resourceVersion it was read with
	// and the patch at the end of the pass does not carry a newer one as a precondition.
	latest := s.cpe.DeepCopy()
	before := latest.DeepCopy()
	before.Status.Removal = s.storedRemoval.DeepCopy()
	if err := r.Client.Status().Patch(ctx, latest, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("failed to write status.removal of ControlPlaneEtcd %s: %w", klog.KObj(s.cpe), err)
	}
	r.wrote(latest)
	s.storedRemoval = s.cpe.Status.Removal.DeepCopy()
	return nil
}
