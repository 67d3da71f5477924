package v1alpha1

import (
	"testing"

	. "github.com/onsi/gomega"

	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
)

// The decisions module defines the member and cluster condition strings itself so providers can
// import it without Cluster API; alerts and dashboards written for KubeadmControlPlane read them,
// so they must stay KCP's.
func TestConditionsEqualKubeadmControlPlanes(t *testing.T) {
	for _, c := range [][2]string{
		{EtcdMemberHealthyCondition, controlplanev1.KubeadmControlPlaneMachineEtcdMemberHealthyCondition},
		{EtcdMemberHealthyReason, controlplanev1.KubeadmControlPlaneMachineEtcdMemberHealthyReason},
		{EtcdMemberNotHealthyReason, controlplanev1.KubeadmControlPlaneMachineEtcdMemberNotHealthyReason},
		{EtcdMemberInspectionFailedReason, controlplanev1.KubeadmControlPlaneMachineEtcdMemberInspectionFailedReason},
		{EtcdMemberConnectionDownReason, controlplanev1.KubeadmControlPlaneMachineEtcdMemberConnectionDownReason},
		{EtcdMemberDeletingReason, controlplanev1.KubeadmControlPlaneMachineEtcdMemberDeletingReason},
		{EtcdClusterHealthyCondition, controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition},
		{EtcdClusterHealthyReason, controlplanev1.KubeadmControlPlaneEtcdClusterHealthyReason},
		{EtcdClusterNotHealthyReason, controlplanev1.KubeadmControlPlaneEtcdClusterNotHealthyReason},
		{EtcdClusterHealthUnknownReason, controlplanev1.KubeadmControlPlaneEtcdClusterHealthUnknownReason},
		{EtcdClusterInspectionFailedReason, controlplanev1.KubeadmControlPlaneEtcdClusterInspectionFailedReason},
		{EtcdClusterConnectionDownReason, controlplanev1.KubeadmControlPlaneEtcdClusterConnectionDownReason},
	} {
		NewWithT(t).Expect(c[0]).To(Equal(c[1]))
	}
}
