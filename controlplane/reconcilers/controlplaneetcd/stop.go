package controlplaneetcd

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// retryOrReleaseHint tells a person what ends a stopped removal: a retry once the cause is
// fixed, or a release.
var retryOrReleaseHint = fmt.Sprintf("Fix the cause and set annotation %s=%s on the Machine to retry the removal, or set %s=%s to release the hook without it",
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

// stopIfOverdue stops a removal that has waited longer than spec.memberRemovalTimeout, and
// reports whether it did, with the outcome.
func (r *Reconciler) stopIfOverdue(s *scope, m *clusterv1.Machine, rec v1alpha1.MemberRemovalStatus) (outcome, bool) {
	limit := s.cpe.Spec.MemberRemovalTimeoutOrDefault()
	if s.now.Sub(rec.StartTime.Time) <= limit {
		return outcome{}, false
	}
	return r.stopRemoval(s, m, rec, v1alpha1.RemovalTimedOut, v1alpha1.EventMemberRemovalTimedOut, fmt.Sprintf("the removal waited longer than %s", limit)), true
}

// stopRemoval keeps the hook, records why and tells the Machine's watchers.
func (r *Reconciler) stopRemoval(s *scope, m *clusterv1.Machine, rec v1alpha1.MemberRemovalStatus, res v1alpha1.RemovalResult, event, why string) outcome {
	s.closeRemoval(rec, res, why)
	r.event(s, m, corev1.EventTypeWarning, event, fmt.Sprintf("Keeping the pre-terminate hook: removal of etcd member %s %s: %s. %s", rec.Member, strings.ToLower(string(res)), why, retryOrReleaseHint))
	return acted(progressReasonFor(res), fmt.Sprintf("Removal of etcd member %s of Machine %s %s: %s", rec.Member, m.Name, strings.ToLower(string(res)), why))
}

// blocked says a deleting Machine waits on an unsafe removal, on the Machine; the outcome says it
// on the status.
func (r *Reconciler) blocked(s *scope, m *clusterv1.Machine, msg string) outcome {
	r.event(s, m, corev1.EventTypeWarning, v1alpha1.EventMemberRemovalBlocked, msg)
	return waiting(v1alpha1.ProgressingRemovalBlockedReason, msg).after(blockedRecheckInterval)
}
