package controlplaneetcd

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// retryAction is what a Machine's retry-removal annotation asks of this pass.
type retryAction string

const (
	// retryNothing: no retry is asked (no annotation, or a value other than "true").
	retryNothing retryAction = ""
	// retryRestart: the Machine's removal stopped; clear its record so the flow runs again.
	retryRestart retryAction = "Restart"
	// retryTakeOff: there is no stopped removal to retry; take the annotation off, saying why.
	retryTakeOff retryAction = "TakeOff"
)

// retryFacts are the inputs of decideRetry about one Machine.
type retryFacts struct {
	// Machine is the Machine's name.
	Machine string
	// Annotation is the value of the retry-removal annotation; absent is "".
	Annotation string
	// Deleting is true when the Machine has a deletion timestamp.
	Deleting bool
	// Held is true when a hook this controller releases holds the Machine.
	Held bool
}

// retryVerdict is decideRetry's answer, with the reason for the Event and the log.
type retryVerdict struct {
	Action retryAction
	Why    string
}

// decideRetry says what the retry-removal annotation on a Machine asks, given the removal
// record of the ControlPlaneEtcd (rec, nil when none). Only the value "true" acts, as for the
// release annotation, so "false" or an empty value is left alone. A retry restarts only a
// stopped removal (Rejected, TimedOut) of that Machine, which nothing restarts on its own; on
// any other Machine the annotation is taken off with the reason, so it cannot wait there and
// restart a removal that stops later without a person having looked at why (a Machine not
// being deleted has no removal to stop; a removal under way, ended, or not started yet runs
// on its own).
func decideRetry(f retryFacts, rec *v1alpha1.MemberRemovalStatus) retryVerdict {
	if f.Annotation != v1alpha1.AnnotationTrue {
		return retryVerdict{Action: retryNothing}
	}
	ours := rec != nil && rec.MachineName == f.Machine
	takeOff := func(format string, args ...any) retryVerdict {
		return retryVerdict{Action: retryTakeOff, Why: fmt.Sprintf(format, args...)}
	}
	switch {
	case !f.Deleting:
		return takeOff("Machine %s is not being deleted, so it has no member removal to retry", f.Machine)
	case !f.Held:
		return takeOff("Machine %s is not held by the etcd-adapter pre-terminate hook, so etcd-adapter runs no member removal for it", f.Machine)
	case ours && stopped(rec.Result):
		return retryVerdict{Action: retryRestart, Why: fmt.Sprintf("the removal of etcd member %s of Machine %s stopped as %s: %s", rec.Member, f.Machine, rec.Result, rec.Message)}
	case ours && rec.EndTime == nil:
		return takeOff("the removal of etcd member %s of Machine %s is %s, not stopped: it goes on by itself", rec.Member, f.Machine, rec.Result)
	case ours:
		return takeOff("the removal of etcd member %s of Machine %s ended as %s, not stopped: there is nothing to retry", rec.Member, f.Machine, rec.Result)
	}
	return takeOff("no stopped removal is recorded for Machine %s (a retry clears it): its removal flow runs by itself, from the start", f.Machine)
}

// reconcileRetries acts on the retry-removal annotations, one Machine per pass: it restarts a
// stopped removal, or takes an annotation off that has nothing to retry. It returns a non-zero
// result when it acted, so the removal flow runs only once no Machine carries the annotation.
//
// Important! Order, for a manager that stops between the steps: the stopped record is cleared
// first (status patch; a K3s request left on the Node is withdrawn right before), and the
// annotation is taken off in a later pass, by the rule for a Machine with no stopped removal.
// A stop before the record is cleared finds the record and the annotation as they were and
// restarts again (the withdrawal is idempotent), so the retry is never lost; a stop after finds
// no stopped record and only takes the annotation off, so nothing loops. A pass that acted on
// an annotation runs no removal flow, so a Machine's annotation is off before its new attempt
// starts: a new attempt that stopped again while the annotation was still there would be
// restarted without a person having looked.
func (r *Reconciler) reconcileRetries(ctx context.Context, s *scope) (ctrl.Result, error) {
	for _, m := range s.memberMachines() {
		value, annotated := m.Annotations[v1alpha1.RetryRemovalAnnotation]
		if !annotated {
			continue
		}
		v := decideRetry(retryFacts{Machine: m.Name, Annotation: value,
			Deleting: !m.DeletionTimestamp.IsZero(), Held: s.holdsMachine(m)}, s.cpe.Status.Removal)
		log := ctrl.LoggerFrom(ctx).WithValues("Machine", klog.KObj(m))
		log.V(4).Info("Retry-removal annotation", "value", value, "action", v.Action, "why", v.Why)
		switch v.Action {
		case retryRestart:
			if s.snapshot == nil {
				// The withdrawal needs the workload cluster: without it K3s's leftovers would
				// decide the new attempt at once. The record stays stopped, so the removal flow
				// holds this Machine, and the retry is made once etcd can be observed.
				s.setProgressing(progressReasonFor(s.cpe.Status.Removal.Result), fmt.Sprintf("Retrying the removal of Machine %s once etcd can be observed: %v", m.Name, s.observeErr))
				continue
			}
			return s.requeue(), r.restartRemoval(ctrl.LoggerInto(ctx, log), s, m, v.Why)
		case retryTakeOff:
			return s.requeue(), r.takeOffRetry(ctrl.LoggerInto(ctx, log), s, m, v.Why)
		}
	}
	return ctrl.Result{}, nil
}

// restartRemoval clears the stopped removal record of m, after withdrawing what the backend
// left of the stopped attempt, so the removal flow runs again from the start on a fresh
// observation: quorum projection, leadership, a new request with a new start time (an old
// one would time the new attempt out at once).
//
// Note: K3s leaves annotations on the Node that would make the new attempt look decided
// before it starts: etcd-adapter's record of the request (pkg/k3s then reports the refusal
// again and never asks anew), and, when the member's server disproved K3s's claim,
// removed-node-name, with which K3s's member controller ignores remove on that Node
// (k3s pkg/etcd/member_controller.go). WithdrawRemoval deletes both; a claim the server did
// not disprove is kept and still has to be proven by the new attempt's evidence.
func (r *Reconciler) restartRemoval(ctx context.Context, s *scope, m *clusterv1.Machine, why string) error {
	rec := s.cpe.Status.Removal
	// Important! The annotation is read again uncached: a cache that has not seen it taken off
	// (the pass after a retry) would restart a new attempt that stopped again, with no person
	// having asked.
	if asked, err := r.retryStillAsked(ctx, s, m); err != nil || !asked {
		return err
	}
	if w, ok := s.backend.(etcd.RemovalWithdrawer); ok {
		member, err := recordedMember(*rec, s.snapshot.SyntheticMemberIDs)
		if err == nil {
			callCtx, cancel := context.WithTimeout(ctx, r.callTimeout())
			err = w.WithdrawRemoval(callCtx, member)
			cancel()
			if err != nil {
				s.setProgressing(progressReasonFor(rec.Result), fmt.Sprintf("Retrying the removal of etcd member %s of Machine %s: withdrawing the stopped request failed, trying again: %v", rec.Member, m.Name, err))
				return fmt.Errorf("failed to withdraw the stopped removal of etcd member %s of Machine %s: %w", rec.Member, klog.KObj(m), err)
			}
		}
	}
	s.clearRemoval()
	if err := r.persistRemoval(ctx, s); err != nil {
		return err
	}
	msg := fmt.Sprintf("Retrying as annotation %s=%s asks: %s. The removal runs again from a fresh observation", v1alpha1.RetryRemovalAnnotation, v1alpha1.AnnotationTrue, why)
	ctrl.LoggerFrom(ctx).Info("Cleared a stopped removal record to retry it", "memberName", rec.Member, "result", rec.Result)
	r.event(s, m, corev1.EventTypeNormal, v1alpha1.EventMemberRemovalRetried, msg)
	s.setProgressing(v1alpha1.ProgressingMemberRemovalReason, msg)
	s.wantRequeue(confirmRequeueAfter)
	return nil
}

// retryStillAsked reads m uncached and reports whether it still carries the retry annotation.
// It lists the Machines etcd-adapter holds (backends.ListControlPlaneAndEtcdMachines), as
// newScope does: the controller may list Machines, not get them one by one.
func (r *Reconciler) retryStillAsked(ctx context.Context, s *scope, m *clusterv1.Machine) (bool, error) {
	var reader client.Reader = r.Client
	if r.APIReader != nil {
		reader = r.APIReader
	}
	machines, err := backends.ListControlPlaneAndEtcdMachines(ctx, reader, m.Namespace, s.cluster.Name)
	if err != nil {
		return false, err
	}
	for _, live := range machines {
		if live.Name == m.Name {
			return live.Annotations[v1alpha1.RetryRemovalAnnotation] == v1alpha1.AnnotationTrue, nil
		}
	}
	return false, nil
}

// takeOffRetry takes the retry-removal annotation off m and says why.
func (r *Reconciler) takeOffRetry(ctx context.Context, s *scope, m *clusterv1.Machine, why string) error {
	before := m.DeepCopy()
	delete(m.Annotations, v1alpha1.RetryRemovalAnnotation)
	if err := r.Client.Patch(ctx, m, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("failed to take annotation %s off Machine %s: %w", v1alpha1.RetryRemovalAnnotation, klog.KObj(m), err)
	}
	ctrl.LoggerFrom(ctx).Info("Took the retry-removal annotation off", "why", why)
	r.event(s, m, corev1.EventTypeNormal, v1alpha1.EventRetryRemovalTakenOff, fmt.Sprintf("Took annotation %s off: %s", v1alpha1.RetryRemovalAnnotation, strings.TrimSuffix(why, ".")))
	s.wantRequeue(confirmRequeueAfter)
	return nil
}
