package handback

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/cluster-api/util/patch"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/reconcilers/creation"
)

// +kubebuilder:rbac:groups=cluster.x-k8s.io,resources=machines/status,verbs=patch

// takeOffMemberCondition takes etcd-adapter's EtcdAdapterMemberHealthy condition off a Machine of
// a Cluster that no ControlPlaneEtcd is in charge of any more (the Cluster opted out, was handed
// back, or etcd-adapter is being uninstalled): nothing keeps it current, and a
// MachineHealthCheck must not act on a condition nobody maintains. It reads uncached, as the
// check right before the change, so a ControlPlaneEtcd created a moment ago is never missed.
func (r *Reconciler) takeOffMemberCondition(ctx context.Context, cluster *clusterv1.Cluster, m *clusterv1.Machine) error {
	if !conditions.Has(m, v1alpha1.MemberHealthyMachineCondition) {
		return nil
	}
	cpe, err := creation.LiveControlPlaneEtcdOf(ctx, r.APIReader, cluster)
	if err != nil || cpe != nil {
		return err
	}
	m = m.DeepCopy()
	helper, err := patch.NewHelper(m, r.Client)
	if err != nil {
		return fmt.Errorf("failed to create a patch helper for Machine %s: %w", klog.KObj(m), err)
	}
	conditions.Delete(m, v1alpha1.MemberHealthyMachineCondition)
	err = helper.Patch(ctx, m, patch.WithOwnedConditions{Conditions: []string{v1alpha1.MemberHealthyMachineCondition}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("failed to take the %s condition off Machine %s: %w", v1alpha1.MemberHealthyMachineCondition, klog.KObj(m), err)
	}
	ctrl.LoggerFrom(ctx).Info("Took the etcd member condition off: no ControlPlaneEtcd is in charge of the Cluster", "condition", v1alpha1.MemberHealthyMachineCondition)
	return nil
}
