package controlplaneetcd

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/internal/setby"
)

// releaseRemoved releases the hook of a Machine whose members are gone, closing its record.
func (r *Reconciler) releaseRemoved(ctx context.Context, s *scope, m *clusterv1.Machine, why string) error {
	record := s.removal()
	switch {
	case record.status != nil && !record.isFor(m) && s.recordStillNeeded(record.status):
		// Another Machine's removal is in progress or waits for a person: its record stays.
	case !record.isFor(m):
		// No member belonged to the Machine in this pass's observation and none was recorded:
		// the record still says what ended for this Machine.
		s.closeRemoval(v1alpha1.MemberRemovalStatus{Member: "every member of Machine " + m.Name, MachineName: m.Name,
			NodeName: m.Status.NodeRef.Name, StartTime: metav1.Time{Time: s.now}}, v1alpha1.RemovalRemoved, why)
	case record.status.EndTime == nil:
		s.closeRemoval(*record.status, v1alpha1.RemovalRemoved, why)
	}
	return r.release(ctx, s, m, why, "")
}

// release removes the hooks this controller holds m with. byAnnotation is the annotation with
// which a person asked for the release without a member removal, "" when none did: that release
// is a bypass, recorded as a Warning Event naming the annotation and the field manager that set
// it, and in the closed removal record.
//
// Important! The closed record is persisted before the hook goes: once the Machine is gone, no
// later pass holds it to close a record left InProgress.
func (r *Reconciler) release(ctx context.Context, s *scope, m *clusterv1.Machine, why, byAnnotation string) error {
	eventType, reason := corev1.EventTypeNormal, v1alpha1.EventHookReleased
	if byAnnotation != "" {
		eventType, reason = corev1.EventTypeWarning, v1alpha1.EventHookReleasedByAnnotation
		why = fmt.Sprintf("%s; %s", why, setby.Annotation(m, byAnnotation))
	}
	if record := s.removal(); record.isFor(m) && (record.status.EndTime == nil || stopped(record.status.Result)) {
		// A stopped removal (Rejected, TimedOut) that a person releases ends as Released.
		s.closeRemoval(*record.status, v1alpha1.RemovalReleased, why)
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
	r.event(s, m, eventType, reason, "Released the etcd-adapter pre-terminate hook: "+why)
	return nil
}
