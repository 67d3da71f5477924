package controlplaneetcd

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/capimachine"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

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

// outcome is what a step of one deleting Machine's removal flow decided, handed back to the loop
// (reconcileDeletingMachines), which alone turns it into the pass's Progressing condition and
// requeue: the steps share nothing through the scope.
type outcome struct {
	step step
	// progressing is the Progressing condition to show; nil leaves the one shown as it is.
	progressing *metav1.Condition
	// requeueAfter is how soon the step wants the next pass; zero asks for nothing.
	requeueAfter time.Duration
}

// released is the outcome of a step that released the Machine's hook.
func released() outcome { return outcome{step: stepReleased} }

// waiting is the outcome of a step that changed nothing and waits, saying why.
func waiting(reason, msg string) outcome {
	return outcome{step: stepWaiting, progressing: progressingTrue(reason, msg)}
}

// acted is the outcome of a step that made a change (or has one under way), saying what.
func acted(reason, msg string) outcome {
	return outcome{step: stepActed, progressing: progressingTrue(reason, msg)}
}

// failed is the outcome of a step whose change failed with an error that the pass returns.
func failed() outcome { return outcome{step: stepActed} }

// after asks for the next pass within d.
func (o outcome) after(d time.Duration) outcome {
	o.requeueAfter = d
	return o
}

func progressingTrue(reason, msg string) *metav1.Condition {
	return &metav1.Condition{Type: v1alpha1.ProgressingCondition, Status: metav1.ConditionTrue, Reason: reason, Message: msg}
}

// apply makes o the pass's: its condition is the one shown, and the pass comes back no later
// than it asks.
func (s *scope) apply(o outcome) {
	if o.progressing != nil {
		s.progressing = o.progressing
	}
	if o.requeueAfter > 0 {
		s.wantRequeue(o.requeueAfter)
	}
}

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
		return cmp.Or(a.DeletionTimestamp.Compare(b.DeletionTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	if s.clusterID.Refuse {
		// Note: what this etcd lists says nothing about the members of the Machines held: no
		// record is closed and no hook released on its word.
		return r.holdForClusterID(ctx, s, held)
	}
	if err := r.closeOrphanedRemoval(ctx, s, held); err != nil {
		return s.requeue(), err
	}
	var firstWaiting *metav1.Condition
	for _, m := range held {
		log := ctrl.LoggerFrom(ctx).WithValues("Machine", klog.KObj(m))
		o, err := r.reconcileDeletingMachine(ctrl.LoggerInto(ctx, log), s, m)
		s.apply(o)
		switch {
		case err != nil:
			return s.requeue(), err
		case o.step == stepReleased:
			continue
		case o.step == stepWaiting:
			if firstWaiting == nil {
				firstWaiting = o.progressing
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
	record := s.removal()
	if !record.inFlight() || s.snapshot == nil ||
		slices.ContainsFunc(held, func(m *clusterv1.Machine) bool { return record.isFor(m) }) {
		return nil
	}
	rec := *record.status
	_, err := recordedMember(rec, s.snapshot.SyntheticMemberIDs)
	if present := slices.ContainsFunc(s.snapshot.Members, record.isOf); err == nil && !present {
		s.closeRemoval(rec, v1alpha1.RemovalRemoved, fmt.Sprintf("Machine %s is no longer held by etcd-adapter and etcd member %s is gone", rec.MachineName, rec.Member))
	} else {
		s.closeRemoval(rec, v1alpha1.RemovalReleased, fmt.Sprintf("Machine %s is no longer held by etcd-adapter (its hook was released by other means); etcd member %s was not confirmed removed", rec.MachineName, rec.Member))
	}
	ctrl.LoggerFrom(ctx).Info("Closed the removal record of a Machine no longer held", "MachineName", rec.MachineName, "memberName", rec.Member, "result", s.cpe.Status.Removal.Result)
	// Note: not a write-ahead (a pass that stops before writing it closes the record again);
	// it is written at once like every other change of the record in the removal flow, so
	// storedRemoval always says what is stored.
	if err := r.persistRemoval(ctx, s); err != nil {
		return err
	}
	r.hookRemovedByHand(s, rec)
	return nil
}

// hookRemovedByHand records, as a Warning Event, that the hook left the Machine of a removal
// still in flight by other means than etcd-adapter: release closes the record before it takes
// the hook off, so an open record of a Machine no longer held means someone else did. On the
// Machine too while it is there.
func (r *Reconciler) hookRemovedByHand(s *scope, rec v1alpha1.MemberRemovalStatus) {
	msg := fmt.Sprintf("The etcd-adapter pre-terminate hook was taken off while the removal of etcd member %s was under way, not by etcd-adapter; "+
		"who is not known (taking an annotation off leaves no field manager). The removal record is closed as %s",
		rec.Member, s.cpe.Status.Removal.Result)
	i := slices.IndexFunc(s.memberMachines(), func(m *clusterv1.Machine) bool { return m.Name == rec.MachineName })
	if i < 0 {
		r.Recorder.Event(s.cpe, corev1.EventTypeWarning, v1alpha1.EventHookRemovedByHand,
			fmt.Sprintf("Machine %s (gone): %s", rec.MachineName, msg))
		return
	}
	r.event(s, s.memberMachines()[i], corev1.EventTypeWarning, v1alpha1.EventHookRemovedByHand, msg)
}

// reconcileDeletingMachine moves one Machine's removal flow one step and says what it decided.
func (r *Reconciler) reconcileDeletingMachine(ctx context.Context, s *scope, m *clusterv1.Machine) (outcome, error) {
	if why := releaseWithoutRemoval(s, m); why != "" {
		return released(), r.releaseUnremoved(ctx, s, m, why)
	}
	if reason := deletingReason(m); reason != clusterv1.MachineDeletingWaitingForPreTerminateHookReason {
		// Drain and volume detach are not over; the Machine watch wakes us when they are.
		return r.moveLeadershipEarly(ctx, s, m, waiting(v1alpha1.ProgressingMemberRemovalReason,
			fmt.Sprintf("Machine %s is deleting; waiting for drain and volume detach (Deleting reason %q)", m.Name, reason))), nil
	}
	if others := s.otherPreTerminateHooks(m); len(others) > 0 {
		return r.moveLeadershipEarly(ctx, s, m, waiting(v1alpha1.ProgressingMemberRemovalReason,
			fmt.Sprintf("Machine %s waits for pre-terminate hooks %s to be released first", m.Name, strings.Join(others, ", ")))), nil
	}
	return r.removeMembersOf(ctx, s, m)
}

// releaseUnremoved releases m's hook for the reason releaseWithoutRemoval gave; a person's
// release annotation is a bypass (release).
func (r *Reconciler) releaseUnremoved(ctx context.Context, s *scope, m *clusterv1.Machine, why string) error {
	byAnnotation := ""
	if releaseRequested(m) {
		byAnnotation = v1alpha1.ReleaseHookAnnotation
	}
	return r.release(ctx, s, m, why, byAnnotation)
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

// membersOf returns the members of this pass's observation that belong to m.
func (s *scope) membersOf(m *clusterv1.Machine) []etcd.Member {
	return etcd.MembersOfMachine(s.snapshot.Members, s.machineFacts(), capimachine.Facts(m))
}
