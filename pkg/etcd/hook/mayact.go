package hook

import (
	"fmt"
	"strings"
)

// Phase is where a Machine's removal flow stands; it reads as a condition reason.
type Phase string

// Phases of the flow.
const (
	// PhaseNotHeld: the hook is not on the Machine; the flow does nothing.
	PhaseNotHeld Phase = "NotHeld"
	// PhaseNotDeleting: the Machine is not deleting; nothing to remove.
	PhaseNotDeleting Phase = "NotDeleting"
	// PhaseWaitingForDrain: Cluster API has not finished the drain and volume detach.
	PhaseWaitingForDrain Phase = "WaitingForDrain"
	// PhaseWaitingForHooks: other pre-terminate hooks go first.
	PhaseWaitingForHooks Phase = "WaitingForOtherHooks"
	// PhaseReady: the hook may act (MayAct only).
	PhaseReady Phase = "Ready"
	// PhaseBlocked: removing now is not safe or not possible (quorum, the last member, etcd not
	// observed, a member not yet told apart); the hook stays and the message says why. The
	// next step checks again.
	PhaseBlocked Phase = "Blocked"
	// PhaseLeaderMoved: leadership moved off the leaving member; the removal is next.
	PhaseLeaderMoved Phase = "LeaderMoved"
	// PhaseRemoving: the removal was asked and is not confirmed yet.
	PhaseRemoving Phase = "Removing"
	// PhaseRejected: etcd (or K3s) rejected the removal for good; the hook stays until a person
	// releases it (ReleaseHookAnnotation) or asks for a retry (RetryRemovalAnnotation).
	PhaseRejected Phase = "Rejected"
	// PhaseRetried: a rejected removal was cleared for a retry; the next step starts it afresh.
	PhaseRetried Phase = "Retried"
	// PhaseReleased: the hook was taken off; Cluster API goes on with the deletion.
	PhaseReleased Phase = "Released"
)

// Readiness is MayAct's answer.
type Readiness struct {
	// Act is true when the hook may remove the Machine's member now.
	Act bool
	// Phase says where the Machine stands when it may not.
	Phase Phase
	// Waiting lists the hooks it waits for (PhaseWaitingForHooks).
	Waiting []string
	// Message says why, for conditions and logs.
	Message string
}

// MayAct decides whether hook h may remove the Machine's member now: h is on the Machine, the
// Machine is deleting, Cluster API drained it (its Deleting condition's reason is
// WaitingForPreTerminateHookReason, which the Machine controller sets once drain and volume
// detach are over: cluster-api v1.14.2 core/reconcilers/machine/machine_controller.go,
// reconcileDelete) and no other pre-terminate hook is left but those that run last
// (OtherHooks).
func MayAct(m MachineState, h Hook, cp ControlPlane) Readiness {
	if _, ok := m.Annotations[h.Key]; !ok {
		return Readiness{Phase: PhaseNotHeld, Message: fmt.Sprintf("Machine %s does not carry hook %s", m.Name, h.Key)}
	}
	if !m.Deleting {
		return Readiness{Phase: PhaseNotDeleting, Message: fmt.Sprintf("Machine %s is not deleting", m.Name)}
	}
	if m.DeletingReason != WaitingForPreTerminateHookReason {
		return Readiness{Phase: PhaseWaitingForDrain, Message: fmt.Sprintf("Machine %s is deleting; waiting for drain and volume detach (Deleting reason %q)", m.Name, m.DeletingReason)}
	}
	if others := OtherHooks(m.Annotations, h.Key, cp); len(others) > 0 {
		return Readiness{Phase: PhaseWaitingForHooks, Waiting: others,
			Message: fmt.Sprintf("Machine %s waits for pre-terminate hooks %s to be released first", m.Name, strings.Join(others, ", "))}
	}
	return Readiness{Act: true, Phase: PhaseReady, Message: fmt.Sprintf("Machine %s is drained and its other pre-terminate hooks are released", m.Name)}
}
