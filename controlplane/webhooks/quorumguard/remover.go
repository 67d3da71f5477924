package quorumguard

import (
	"fmt"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// memberRemover names what removes m's etcd members before Cluster API deletes its
// infrastructure, "" when nothing does: the members then stay in the cluster and stop answering,
// and the projection counts them as voters that are not healthy (etcd.ProjectChanges). Only a
// pre-terminate hook holds the infrastructure until a removal; these are the hooks known to
// remove the member before they are released:
//
//   - etcd-adapter's own, while the ControlPlaneEtcd is in mode Manage and no person asked for it
//     to be released without a removal (v1alpha1.ReleaseHookAnnotation); outside Manage it is
//     taken off without a removal (the ControlPlaneEtcd controller's handBackMachines).
//   - KubeadmControlPlane's kcp-cleanup (cluster-api v1.14.2,
//     controlplane/kubeadm/reconcilers/kubeadmcontrolplane/kubeadmcontrolplane_controller.go,
//     reconcilePreTerminateHook: it removes the member, then releases the hook).
//   - cluster-api-provider-rke2's rke2-cleanup (controlplane/internal/controllers/lifecycle_hook.go:
//     etcd.rke2.cattle.io/remove on the Node, released once removed-node-name is set).
//   - cluster-api-k3s's bare hook with the value "k3s" (pkg/k3s/workload_cluster_etcd.go,
//     RemoveEtcdMemberForMachine: etcd.k3s.cattle.io/remove on the Node), which etcd-adapter
//     adopts when no KThreesControlPlane is left to release it.
//   - the hook embeddedHook that the control-plane object names in hook.EmbeddedRemovalAnnotation:
//     its provider removes the member with pkg/etcd/hook's flow before it releases the hook. The
//     ControlPlaneEtcd controller then takes etcd-adapter's own hook off, whatever the mode.
//
// An etcdadm etcd Machine needs none: the etcdadm controller removes the member before it deletes
// the Machine (aws/etcdadm-controller controllers/scale.go removeEtcdMemberAndDeleteMachine), so
// the guard finds no member for it. A Machine a person deletes without any of these hooks (a K3s
// or RKE2 Cluster switched to Observe, a kubeadm control plane that is not a KubeadmControlPlane)
// has none.
func memberRemover(m *clusterv1.Machine, cpe *v1alpha1.ControlPlaneEtcd, embeddedHook string) string {
	a := m.Annotations
	switch {
	case embeddedHook != "" && hasKey(a, embeddedHook):
		return fmt.Sprintf("the control-plane provider's pre-terminate hook %s", embeddedHook)
	case a[v1alpha1.PreTerminateHookAnnotation] != "" && cpe.Spec.Mode == v1alpha1.ModeManage && a[v1alpha1.ReleaseHookAnnotation] != v1alpha1.ReleaseHookValue:
		return "etcd-adapter's pre-terminate hook"
	case hasKey(a, v1alpha1.KCPHookAnnotation):
		return "KubeadmControlPlane's kcp-cleanup hook"
	case hasKey(a, v1alpha1.RKE2HookAnnotation):
		return "RKE2ControlPlane's rke2-cleanup hook"
	case a[v1alpha1.LegacyK3sHookAnnotation] == v1alpha1.LegacyK3sHookValue:
		return "cluster-api-k3s's pre-terminate hook"
	}
	return ""
}

func hasKey(m map[string]string, key string) bool {
	_, ok := m[key]
	return ok
}
