package hook

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// maxRejectionBytes bounds the rejection reason kept in RemovalRejectedAnnotation: it quotes the
// workload cluster, and a Machine's annotations together may hold 256 KiB only.
const maxRejectionBytes = 1024

// Flow is the removal-after-drain flow of one Cluster's control plane, as the provider that
// embeds it wires it: its own hook, the etcd backend, and how it patches Machines.
//
// Important! Step one deleting Machine of a Cluster at a time (the first by name, until its
// Step is Done): each step re-checks quorum on a fresh observation, which shows a removal that
// happened but not one a backend has yet to carry out (a K3s removal request waits for K3s), so
// two Machines stepped side by side could each be allowed a removal that together lose quorum.
type Flow struct {
	// Hook is the provider's own pre-terminate hook; not ManagerHookKey.
	Hook Hook
	// Cluster is the Cluster's etcd backend; it may implement etcd.RemovalWithdrawer (K3s).
	Cluster etcd.Cluster
	// Patch patches a Machine's annotations.
	Patch PatchFunc
	// ControlPlane decides the order of the hooks (OrderBefore).
	ControlPlane ControlPlane
	// Machines are all control-plane Machines, deleting ones included: they tell members apart
	// (etcd.MembersOfMachine) and choose where leadership goes.
	Machines []etcd.Machine
	// Now is the time verdicts are for; zero means time.Now().
	Now time.Time
	// ControlPlaneDeleting is true when the Cluster or its control-plane object is being
	// deleted: every Machine goes, there is no quorum left to keep, and the last member is never
	// removed, so hooks are released without a removal.
	ControlPlaneDeleting bool
}

// Outcome is what one Step did or waits for.
type Outcome struct {
	// Phase is where the Machine's flow stands.
	Phase Phase
	// Message says why, for the provider's condition, Events and logs.
	Message string
	// Member is the member the step acted on or waits for; zero when none.
	Member etcd.Member
	// Waiting lists the hooks it waits for (PhaseWaitingForHooks).
	Waiting []string
}

// Done reports whether the flow is over for the Machine: its hook is off, or was never on.
func (o Outcome) Done() bool { return o.Phase == PhaseReleased || o.Phase == PhaseNotHeld }

// Step moves the flow of Machine m one step and says what it did: at most one change per call
// (one patch, one leader move or one removal request). Call it on every reconcile of a deleting
// control-plane Machine until Done; the backend's answers are re-read on each call, so a step
// never relies on what an earlier one saw. An error means the step failed and is retried.
func (f Flow) Step(ctx context.Context, m MachineState) (Outcome, error) {
	if _, held := m.Annotations[f.Hook.Key]; !held {
		return Outcome{Phase: PhaseNotHeld, Message: fmt.Sprintf("Machine %s does not carry hook %s", m.Name, f.Hook.Key)}, nil
	}
	if !m.Deleting {
		return Outcome{Phase: PhaseNotDeleting, Message: fmt.Sprintf("Machine %s is not deleting", m.Name)}, nil
	}
	if m.Annotations[ReleaseHookAnnotation] == AnnotationTrue {
		return f.release(ctx, m, fmt.Sprintf("released by annotation %s=%s", ReleaseHookAnnotation, AnnotationTrue))
	}
	if f.ControlPlaneDeleting {
		return f.release(ctx, m, "the Cluster or its control plane is being deleted")
	}
	if m.Annotations[RetryRemovalAnnotation] == AnnotationTrue {
		return f.retry(ctx, m)
	}
	if reason, stopped := m.Annotations[RemovalRejectedAnnotation]; stopped {
		return Outcome{Phase: PhaseRejected, Message: rejectedMessage(m.Name, reason)}, nil
	}
	if r := MayAct(m, f.Hook, f.ControlPlane); !r.Act {
		return Outcome{Phase: r.Phase, Message: r.Message, Waiting: r.Waiting}, nil
	}
	return f.remove(ctx, m)
}

func rejectedMessage(machine, reason string) string {
	return fmt.Sprintf("Removal of the etcd member of Machine %s was rejected: %s. Fix the cause and annotate the Machine %s=%s, or release the hook with %s=%s",
		machine, reason, RetryRemovalAnnotation, AnnotationTrue, ReleaseHookAnnotation, AnnotationTrue)
}

// remove runs one step of: fresh observation → quorum projection → move leadership → remove the
// member → (next step) confirm on a fresh observation → release.
func (f Flow) remove(ctx context.Context, m MachineState) (Outcome, error) {
	s, err := f.Cluster.Observe(ctx)
	if err != nil {
		return Outcome{Phase: PhaseBlocked, Message: fmt.Sprintf("etcd could not be observed, so removing the member of Machine %s is not known to be safe: %v", m.Name, err)}, nil
	}
	now := f.now()
	assessed := etcd.AssessMembers(s, now)
	targets := etcd.RemovalOrder(assessed, etcd.MembersOfMachine(s.Members, f.Machines, m.Machine))
	switch {
	case len(targets) == 0:
		if possible := etcd.MembersPossiblyOf(s.Members, f.Machines, m.Machine); len(possible) > 0 {
			return Outcome{Phase: PhaseBlocked, Member: possible[0], Message: fmt.Sprintf(
				"No etcd member is tied to Machine %s, but etcd member(s) %s belong to no other Machine and the Machine does not report yet what tells them apart (Node %q, addresses %v); if none is its member, annotate it %s=%s",
				m.Name, memberNames(possible), m.NodeName, m.Addresses, ReleaseHookAnnotation, AnnotationTrue)}, nil
		}
		return f.release(ctx, m, fmt.Sprintf("no etcd member belongs to Machine %s any more", m.Name))
	case len(targets) == len(s.Members):
		return Outcome{Phase: PhaseBlocked, Member: targets[0], Message: fmt.Sprintf(
			"Machine %s hosts the last etcd member, which is never removed: it is held until a person annotates it %s=%s", m.Name, ReleaseHookAnnotation, AnnotationTrue)}, nil
	}
	target := targets[0]
	// Important! The safety net right before the destructive call, on this step's own snapshot.
	if v := etcd.CanRemoveMember(s, now, target); !v.Allowed {
		return Outcome{Phase: PhaseBlocked, Member: target, Message: fmt.Sprintf("Removing etcd member %s of Machine %s is not safe now (%s): %s", target, m.Name, v.Reason, v.Message)}, nil
	}
	if s.LeaderID == target.ID {
		if o, moved, err := f.moveLeadershipOff(ctx, s, assessed, m, target); moved || err != nil {
			return o, err
		}
	}
	return f.requestRemoval(ctx, m, target)
}

// moveLeadershipOff moves leadership off the leaving member to the best candidate that takes it.
// It reports moved=false, with no error, when the removal may go ahead while the member leads:
// no candidate, the backend moves it itself (K3s), or the leader does not answer the backend
// (etcd.ErrLeaderNotReachable: etcd takes MoveLeader from the leader only, and a leader steps
// down once it applies its own removal).
func (f Flow) moveLeadershipOff(ctx context.Context, s *etcd.Snapshot, assessed []etcd.MemberHealth, m MachineState, target etcd.Member) (Outcome, bool, error) {
	var errs []error
	for _, to := range etcd.LeaderCandidates(assessed, f.Machines, target) {
		mv, err := f.Cluster.MoveLeader(ctx, target, to)
		switch {
		case errors.Is(err, etcd.ErrLeaderNotReachable):
			return Outcome{}, false, nil
		case err != nil:
			errs = append(errs, err)
			continue
		case mv.Outcome == etcd.LeaderMoved:
			return Outcome{Phase: PhaseLeaderMoved, Member: target, Message: fmt.Sprintf("Moved etcd leadership from %s to %s before removing the member of Machine %s", target, to, m.Name)}, true, nil
		}
		// Note: NotLeader (it moved already) or ByBackend: the removal goes ahead.
		return Outcome{}, false, nil
	}
	if len(errs) == 0 {
		return Outcome{}, false, nil
	}
	err := fmt.Errorf("failed to move etcd leadership off member %s of Machine %s: %w", target, m.Name, errors.Join(errs...))
	return Outcome{Phase: PhaseBlocked, Member: target, Message: err.Error()}, false, err
}

func (f Flow) requestRemoval(ctx context.Context, m MachineState, target etcd.Member) (Outcome, error) {
	r, err := f.Cluster.RemoveMember(ctx, target)
	if err != nil {
		return Outcome{Phase: PhaseRemoving, Member: target, Message: fmt.Sprintf("Removing etcd member %s of Machine %s failed, retrying: %v", target, m.Name, err)},
			fmt.Errorf("failed to remove etcd member %s of Machine %s: %w", target, m.Name, err)
	}
	switch r.State {
	case etcd.RemovalRemoved:
		return Outcome{Phase: PhaseRemoving, Member: target, Message: fmt.Sprintf("Removed etcd member %s of Machine %s; confirming on the next step", target, m.Name)}, nil
	case etcd.RemovalRejected:
		reason := etcd.SanitizeText(r.Reason, maxRejectionBytes)
		if err := f.Patch(ctx, m.Name, map[string]string{RemovalRejectedAnnotation: reason}, nil); err != nil {
			return Outcome{Phase: PhaseRemoving, Member: target}, fmt.Errorf("failed to record the rejected removal of etcd member %s on Machine %s: %w", target, m.Name, err)
		}
		return Outcome{Phase: PhaseRejected, Member: target, Message: rejectedMessage(m.Name, reason)}, nil
	}
	return Outcome{Phase: PhaseRemoving, Member: target, Message: fmt.Sprintf("Removing etcd member %s of Machine %s: %s", target, m.Name, r.Reason)}, nil
}

// retry clears a rejected removal for a new attempt, after withdrawing the request the backend
// may keep (K3s keeps etcd.k3s.cattle.io/remove=true as a standing order), and takes the retry
// annotation off; on a Machine whose removal was not rejected it only takes the annotation off.
func (f Flow) retry(ctx context.Context, m MachineState) (Outcome, error) {
	remove := []string{RetryRemovalAnnotation}
	msg := fmt.Sprintf("No rejected removal is recorded for Machine %s: its removal flow runs by itself", m.Name)
	if _, stopped := m.Annotations[RemovalRejectedAnnotation]; stopped {
		if err := f.withdraw(ctx, m); err != nil {
			return Outcome{Phase: PhaseRejected, Message: err.Error()}, err
		}
		remove = append(remove, RemovalRejectedAnnotation)
		msg = fmt.Sprintf("Retrying the rejected removal of Machine %s, as annotation %s=%s asks: the next step starts it from a fresh observation", m.Name, RetryRemovalAnnotation, AnnotationTrue)
	}
	if err := f.Patch(ctx, m.Name, nil, remove); err != nil {
		return Outcome{Phase: PhaseRejected, Message: msg}, fmt.Errorf("failed to take annotation %s off Machine %s: %w", RetryRemovalAnnotation, m.Name, err)
	}
	return Outcome{Phase: PhaseRetried, Message: msg}, nil
}

// withdraw withdraws the removal of every member of m, when the backend keeps requests.
func (f Flow) withdraw(ctx context.Context, m MachineState) error {
	w, ok := f.Cluster.(etcd.RemovalWithdrawer)
	if !ok {
		return nil
	}
	s, err := f.Cluster.Observe(ctx)
	if err != nil {
		return fmt.Errorf("failed to observe etcd to withdraw the rejected removal of Machine %s: %w", m.Name, err)
	}
	for _, mb := range etcd.MembersOfMachine(s.Members, f.Machines, m.Machine) {
		if err := w.WithdrawRemoval(ctx, mb); err != nil {
			return fmt.Errorf("failed to withdraw the rejected removal of etcd member %s of Machine %s: %w", mb, m.Name, err)
		}
	}
	return nil
}

// release takes the hook (and a rejection record) off the Machine.
func (f Flow) release(ctx context.Context, m MachineState, why string) (Outcome, error) {
	remove := []string{f.Hook.Key}
	if _, ok := m.Annotations[RemovalRejectedAnnotation]; ok {
		remove = append(remove, RemovalRejectedAnnotation)
	}
	if err := f.Patch(ctx, m.Name, nil, remove); err != nil {
		return Outcome{Phase: PhaseBlocked, Message: why}, fmt.Errorf("failed to release hook %s of Machine %s: %w", f.Hook.Key, m.Name, err)
	}
	return Outcome{Phase: PhaseReleased, Message: fmt.Sprintf("Released hook %s of Machine %s: %s", f.Hook.Key, m.Name, why)}, nil
}

func (f Flow) now() time.Time {
	if f.Now.IsZero() {
		return time.Now()
	}
	return f.Now
}

func memberNames(ms []etcd.Member) string {
	names := make([]string, 0, len(ms))
	for _, m := range ms {
		names = append(names, m.String())
	}
	return strings.Join(names, ", ")
}
