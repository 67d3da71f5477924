package controlplaneetcd

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/reconcilers/creation"
)

// inChargeOtherThan returns the ControlPlaneEtcd in charge of the Cluster when it is not cpe, or
// nil when cpe is in charge. The quorum guard and the Machine hook webhook read the same rule
// (creation.ControlPlaneEtcdOf), so all three agree on which one acts.
func (r *Reconciler) inChargeOtherThan(ctx context.Context, cpe *v1alpha1.ControlPlaneEtcd, cluster *clusterv1.Cluster) (*v1alpha1.ControlPlaneEtcd, error) {
	inCharge, err := creation.ControlPlaneEtcdOf(ctx, r.Client, cluster)
	if err != nil {
		return nil, err
	}
	// Note: a cached list may not have cpe yet (just created); it is then not in charge only if
	// an older one is listed.
	if inCharge == nil || inCharge.UID == cpe.UID || !creation.OlderThan(inCharge, cpe) {
		return nil, nil
	}
	return inCharge, nil
}

// setDuplicateConditions says, on every condition this controller owns, that cpe does nothing
// because another ControlPlaneEtcd is in charge of the same Cluster.
func (r *Reconciler) setDuplicateConditions(ctx context.Context, cpe, inCharge *v1alpha1.ControlPlaneEtcd) {
	msg := fmt.Sprintf("ControlPlaneEtcd %s is in charge of Cluster %s (the oldest that names it); this one observes nothing, holds no Machine and removes nothing. Delete it",
		inCharge.Name, cpe.Spec.ClusterName)
	if c := conditions.Get(cpe, v1alpha1.AvailableCondition); c == nil || c.Reason != v1alpha1.DuplicateReason {
		ctrl.LoggerFrom(ctx).Info("ControlPlaneEtcd is a duplicate; another one is in charge of the Cluster", "inCharge", klog.KObj(inCharge))
		r.Recorder.Event(cpe, corev1.EventTypeWarning, v1alpha1.EventDuplicate, msg)
	}
	for _, c := range []metav1.Condition{
		{Type: v1alpha1.AvailableCondition, Status: metav1.ConditionFalse},
		{Type: v1alpha1.DegradedCondition, Status: metav1.ConditionTrue},
		{Type: v1alpha1.ProgressingCondition, Status: metav1.ConditionFalse},
		{Type: v1alpha1.EtcdClusterHealthyCondition, Status: metav1.ConditionUnknown},
	} {
		c.Reason, c.Message = v1alpha1.DuplicateReason, msg
		conditions.Set(cpe, c)
	}
}
