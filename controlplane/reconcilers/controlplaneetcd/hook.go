package controlplaneetcd

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// ensureHooks puts the pre-terminate hook on every control-plane Machine that is not deleting,
// so any deletion (scale-down, remediation, kubectl delete) drains the Node before the member
// is removed. Adding a hook is no membership change, so all Machines are handled in one pass.
// Note: the Machine hook webhook (controlplane/webhooks/machinehook) adds the hook at creation;
// this is the backstop for Machines created before the Cluster was managed, while the webhook
// could not tell (the Cluster did not exist yet), or with webhooks off.
func (r *Reconciler) ensureHooks(ctx context.Context, s *scope) error {
	for _, m := range s.machines {
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

// reconcileDeletingMachines runs the removal flow for the deleting Machine held longest (oldest
// deletion timestamp, then name), so every pass picks the same one and makes at most one change.
func (r *Reconciler) reconcileDeletingMachines(ctx context.Context, s *scope) (ctrl.Result, error) {
	var held []*clusterv1.Machine
	for _, m := range s.machines {
		if !m.DeletionTimestamp.IsZero() && s.holdsMachine(m) {
			held = append(held, m)
		}
	}
	slices.SortFunc(held, func(a, b *clusterv1.Machine) int {
		return cmp.Or(a.DeletionTimestamp.Time.Compare(b.DeletionTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	for _, m := range held {
		log := ctrl.LoggerFrom(ctx).WithValues("Machine", klog.KObj(m))
		done, err := r.reconcileDeletingMachine(ctrl.LoggerInto(ctx, log), s, m)
		if err != nil || !done {
			return s.requeue(), err
		}
	}
	return ctrl.Result{}, nil
}

// reconcileDeletingMachine moves one Machine's removal flow one step. It reports done when the
// hook is released (the next Machine may be looked at in the same pass, since releasing a hook
// changes no membership).
func (r *Reconciler) reconcileDeletingMachine(ctx context.Context, s *scope, m *clusterv1.Machine) (bool, error) {
	if why := releaseWithoutRemoval(s, m); why != "" {
		return true, r.release(ctx, s, m, why, v1alpha1.EventHookReleased)
	}
	if reason := deletingReason(m); reason != clusterv1.MachineDeletingWaitingForPreTerminateHookReason {
		// Drain and volume detach are not over; the Machine watch wakes us when they are.
		s.setProgressing(v1alpha1.ProgressingMemberRemovalReason, fmt.Sprintf("Machine %s is deleting; waiting for drain and volume detach (Deleting reason %q)", m.Name, reason))
		return false, nil
	}
	if others := s.otherPreTerminateHooks(m); len(others) > 0 {
		s.setProgressing(v1alpha1.ProgressingMemberRemovalReason, fmt.Sprintf("Machine %s waits for pre-terminate hooks %s to be released first", m.Name, strings.Join(others, ", ")))
		return false, nil
	}
	return r.removeMembersOf(ctx, s, m)
}

// releaseWithoutRemoval says why the hook may go without removing a member, or "".
func releaseWithoutRemoval(s *scope, m *clusterv1.Machine) string {
	switch {
	case m.Annotations[v1alpha1.ReleaseHookAnnotation] != "":
		return fmt.Sprintf("released by annotation %s: %q", v1alpha1.ReleaseHookAnnotation, m.Annotations[v1alpha1.ReleaseHookAnnotation])
	case !s.cluster.DeletionTimestamp.IsZero():
		return "the Cluster is being deleted"
	case s.controlPlaneDeleting:
		return "the control plane is being deleted"
	case m.Status.NodeRef.Name == "" && (s.snapshot == nil || !hostsMemberByName(s.snapshot, m.Name)):
		return "the Machine never had a Node and hosts no etcd member"
	}
	return ""
}

// hostsMemberByName covers a Machine whose Node never registered but whose member started
// under the Machine's name.
func hostsMemberByName(snap *etcd.Snapshot, name string) bool {
	return slices.ContainsFunc(snap.Members, func(mb etcd.Member) bool { return mb.Name == name })
}

func deletingReason(m *clusterv1.Machine) string {
	if c := conditions.Get(m, clusterv1.MachineDeletingCondition); c != nil {
		return c.Reason
	}
	return ""
}

// removeMembersOf runs one step of: fresh observation → quorum projection → move leadership →
// remove the member → (next pass) confirm → release.
func (r *Reconciler) removeMembersOf(ctx context.Context, s *scope, m *clusterv1.Machine) (bool, error) {
	node := m.Status.NodeRef.Name
	if s.snapshot == nil {
		r.setBlocked(s, m, fmt.Sprintf("etcd could not be observed, so removing the member of Machine %s is not known to be safe: %v", m.Name, s.observeErr))
		return false, nil
	}
	targets := etcd.RemovalOrder(etcd.AssessMembers(s.snapshot, s.now), s.snapshot.MembersOnNode(node))
	inFlight := s.removalInFlight(m)
	switch {
	case len(targets) == 0 && inFlight != nil:
		return r.confirmRemoval(ctx, s, m, *inFlight)
	case len(targets) == 0:
		r.atStep(ctx, StepRemovedBeforeRelease)
		return true, r.releaseRemoved(ctx, s, m, fmt.Sprintf("no etcd member is hosted on Node %s any more", node))
	case len(targets) == len(s.snapshot.Members):
		return true, r.release(ctx, s, m, fmt.Sprintf("Node %s hosts the last etcd member, which is never removed", node), v1alpha1.EventHookReleased)
	}
	target := targets[0]
	rec := s.removalRecord(m, target)
	if rec.Result == v1alpha1.RemovalRejected || rec.Result == v1alpha1.RemovalTimedOut {
		// Stopped for a person to look; the member going away by other means still releases.
		s.setProgressing(progressReasonFor(rec.Result), fmt.Sprintf("Removal of etcd member %s of Machine %s stopped: %s. Set annotation %s on the Machine to release it", rec.Member, m.Name, rec.Message, v1alpha1.ReleaseHookAnnotation))
		return false, nil
	}
	if r.stopIfOverdue(s, m, rec) {
		return false, nil
	}
	return r.removeMember(ctx, s, m, target)
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
func (r *Reconciler) confirmRemoval(ctx context.Context, s *scope, m *clusterv1.Machine, rec v1alpha1.MemberRemovalStatus) (bool, error) {
	if r.stopIfOverdue(s, m, rec) {
		return false, nil
	}
	member, err := recordedMember(rec)
	if err != nil {
		return false, r.stopRemoval(s, m, rec, v1alpha1.RemovalRejected, v1alpha1.EventMemberRemovalRejected, err.Error())
	}
	callCtx, cancel := context.WithTimeout(ctx, r.callTimeout())
	defer cancel()
	removal, err := s.backend.RemoveMember(callCtx, member)
	switch {
	case err != nil:
		s.setProgressing(v1alpha1.ProgressingMemberRemovalReason, fmt.Sprintf("Confirming the removal of etcd member %s of Machine %s failed, retrying: %v", rec.Member, m.Name, err))
		s.wantRequeue(removalPollInterval)
		return false, nil
	case removal.State == etcd.RemovalRemoved:
		r.atStep(ctx, StepRemovedBeforeRelease)
		return true, r.releaseRemoved(ctx, s, m, removal.Reason)
	case removal.State == etcd.RemovalRejected:
		return false, r.stopRemoval(s, m, rec, v1alpha1.RemovalRejected, v1alpha1.EventMemberRemovalRejected, removal.Reason)
	}
	s.setProgressing(v1alpha1.ProgressingMemberRemovalReason, fmt.Sprintf("Removing etcd member %s of Machine %s: %s", rec.Member, m.Name, removal.Reason))
	s.wantRequeue(removalPollInterval)
	return false, nil
}

// recordedMember returns the member a removal record is about, as the backends take it: the
// record names it as etcd.Member.String does (its name, or its ID for a member that never
// started).
func recordedMember(rec v1alpha1.MemberRemovalStatus) (etcd.Member, error) {
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
	if rec := s.cpe.Status.Removal; rec != nil && rec.MachineName == m.Name && rec.Result == v1alpha1.RemovalInProgress && rec.MemberID != "" {
		return rec
	}
	return nil
}

// removeMember re-checks quorum on a fresh observation, moves leadership off the target if it
// leads, or else asks for the removal: one change per pass.
func (r *Reconciler) removeMember(ctx context.Context, s *scope, m *clusterv1.Machine, target etcd.Member) (bool, error) {
	log := ctrl.LoggerFrom(ctx).WithValues("memberName", target.Name, "memberID", strconv.FormatUint(target.ID, 16))
	// Important! This is the safety net right before the destructive call: the snapshot is this
	// pass's own, taken moments ago.
	verdict := etcd.CanRemoveMember(s.snapshot, s.now, target)
	log.V(2).Info("Quorum projection for member removal", "allowed", verdict.Allowed, "reason", verdict.Reason, "message", verdict.Message)
	if !verdict.Allowed {
		r.setBlocked(s, m, fmt.Sprintf("Removing etcd member %s of Machine %s is not safe now (%s): %s", target, m.Name, verdict.Reason, verdict.Message))
		return false, nil
	}
	r.atStep(ctx, StepQuorumChecked)
	if moved, err := r.moveLeadershipOff(ctx, s, m, target); err != nil || moved {
		s.wantRequeue(removalPollInterval)
		return false, err
	}
	s.recordRemoval(m, target, v1alpha1.RemovalInProgress, "removal requested")
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
		return false, nil
	}
	log.Info("Member removal", "state", removal.State, "reason", removal.Reason)
	switch removal.State {
	case etcd.RemovalRemoved:
		r.event(s, m, corev1.EventTypeNormal, v1alpha1.EventMemberRemoved, fmt.Sprintf("Removed etcd member %s (%x) of Node %s", target, target.ID, target.NodeName))
		// Next pass confirms on a fresh observation and releases the hook (or removes the next
		// member of the same Node).
		s.recordRemoval(m, target, v1alpha1.RemovalInProgress, "member removed; confirming")
		s.setProgressing(v1alpha1.ProgressingMemberRemovalReason, fmt.Sprintf("Removed etcd member %s of Machine %s; confirming", target, m.Name))
		s.wantRequeue(confirmRequeueAfter)
		return false, nil
	case etcd.RemovalRejected:
		rec := s.removalRecord(m, target)
		return false, r.stopRemoval(s, m, rec, v1alpha1.RemovalRejected, v1alpha1.EventMemberRemovalRejected, removal.Reason)
	}
	r.event(s, m, corev1.EventTypeNormal, v1alpha1.EventMemberRemoving, fmt.Sprintf("Removing etcd member %s (%x) of Node %s: %s", target, target.ID, target.NodeName, removal.Reason))
	s.setProgressing(v1alpha1.ProgressingMemberRemovalReason, fmt.Sprintf("Removing etcd member %s of Machine %s: %s", target, m.Name, removal.Reason))
	s.wantRequeue(removalPollInterval)
	return false, nil
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
	r.event(s, m, corev1.EventTypeWarning, event, fmt.Sprintf("Keeping the pre-terminate hook: removal of etcd member %s %s: %s. Set annotation %s on the Machine to release it", rec.Member, strings.ToLower(string(res)), why, v1alpha1.ReleaseHookAnnotation))
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
	id := strconv.FormatUint(target.ID, 16)
	if rec := s.cpe.Status.Removal; rec != nil && rec.MachineName == m.Name && rec.MemberID == id {
		return *rec
	}
	return v1alpha1.MemberRemovalStatus{Member: target.String(), MemberID: id, MachineName: m.Name, NodeName: target.NodeName,
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
	if rec == nil || rec.MachineName != m.Name {
		// The status this pass read may lag the one the previous pass wrote (a cached read), or
		// the member went by other means: the record still says what ended for this Machine.
		rec = &v1alpha1.MemberRemovalStatus{Member: "every member of Node " + m.Status.NodeRef.Name, MachineName: m.Name,
			NodeName: m.Status.NodeRef.Name, StartTime: metav1.Time{Time: s.now}}
		s.cpe.Status.Removal = rec
	}
	if rec.EndTime == nil {
		rec.Result, rec.Message, rec.EndTime = v1alpha1.RemovalRemoved, why, &metav1.Time{Time: s.now}
	}
	return r.release(ctx, s, m, why, v1alpha1.EventHookReleased)
}

// release removes the hooks this controller holds m with.
func (r *Reconciler) release(ctx context.Context, s *scope, m *clusterv1.Machine, why, event string) error {
	before := m.DeepCopy()
	delete(m.Annotations, v1alpha1.PreTerminateHookAnnotation)
	if s.adoptsLegacyHook(m) {
		delete(m.Annotations, v1alpha1.LegacyK3sHookAnnotation)
	}
	if err := r.Client.Patch(ctx, m, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("failed to release the pre-terminate hook of Machine %s: %w", klog.KObj(m), err)
	}
	if rec := s.cpe.Status.Removal; rec != nil && rec.MachineName == m.Name && (rec.EndTime == nil || stopped(rec.Result)) {
		// A stopped removal (Rejected, TimedOut) that a person releases ends as Released, with
		// their text.
		rec.Result, rec.Message, rec.EndTime = v1alpha1.RemovalReleased, why, &metav1.Time{Time: s.now}
	}
	ctrl.LoggerFrom(ctx).Info("Released the pre-terminate hook", "why", why)
	r.event(s, m, corev1.EventTypeNormal, event, "Released the etcd-adapter pre-terminate hook: "+why)
	return nil
}
