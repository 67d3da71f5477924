package controlplaneetcd

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/hook"
)

// handBackMachines runs outside Manage mode: it takes etcd-adapter's hook off every Machine,
// so a ControlPlaneEtcd switched to Observe (or a Cluster handed to another tool) leaves no
// Machine waiting for a removal flow that no longer runs. A removal already asked for is
// finished first, since etcd (or K3s) is already acting on it and its record must close; a
// deleting Machine whose removal was not asked yet keeps its member, and the Event says so:
// in Observe mode the control-plane provider removes members (KubeadmControlPlane's
// kcp-cleanup hook does), or a person does.
func (r *Reconciler) handBackMachines(ctx context.Context, s *scope) (ctrl.Result, error) {
	for _, m := range s.memberMachines() {
		if m.Annotations[v1alpha1.PreTerminateHookAnnotation] == "" {
			continue
		}
		log := ctrl.LoggerFrom(ctx).WithValues("Machine", klog.KObj(m))
		ctx := ctrl.LoggerInto(ctx, log)
		if !m.DeletionTimestamp.IsZero() && s.removal().inFlightFor(m) != nil {
			o, err := r.reconcileDeletingMachine(ctx, s, m)
			s.apply(o)
			if err != nil || o.step != stepReleased {
				return s.requeue(), err
			}
			continue
		}
		if err := r.handBack(ctx, s, m); err != nil {
			return ctrl.Result{}, err
		}
	}
	return s.requeue(), nil
}

// handBack takes the hook off m and says why, on the Machine and the ControlPlaneEtcd.
func (r *Reconciler) handBack(ctx context.Context, s *scope, m *clusterv1.Machine) error {
	before := m.DeepCopy()
	delete(m.Annotations, v1alpha1.PreTerminateHookAnnotation)
	if err := r.Client.Patch(ctx, m, client.MergeFrom(before)); err != nil {
		return fmt.Errorf("failed to take the pre-terminate hook off Machine %s: %w", klog.KObj(m), err)
	}
	why := fmt.Sprintf("ControlPlaneEtcd %s is in mode %s", s.cpe.Name, s.cpe.Spec.Mode)
	if s.embeddedRemoval && s.cpe.Spec.Mode == v1alpha1.ModeManage {
		why = fmt.Sprintf("%s has annotation %s: its provider removes etcd members itself", s.controlPlaneName, hook.EmbeddedRemovalAnnotation)
	}
	if m.DeletionTimestamp.IsZero() {
		r.event(s, m, corev1.EventTypeNormal, v1alpha1.EventHookHandedBack, "Took the etcd-adapter pre-terminate hook off: "+why)
	} else {
		r.event(s, m, corev1.EventTypeWarning, v1alpha1.EventHookHandedBack, fmt.Sprintf(
			"Released the etcd-adapter pre-terminate hook without removing the etcd member of Node %q: %s, so the control-plane provider (or a person) removes it",
			m.Status.NodeRef.Name, why))
	}
	ctrl.LoggerFrom(ctx).Info("Handed the Machine back: took the pre-terminate hook off", "why", why, "deleting", !m.DeletionTimestamp.IsZero())
	return nil
}
