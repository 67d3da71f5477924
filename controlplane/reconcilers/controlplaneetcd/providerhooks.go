package controlplaneetcd

import (
	"context"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd/hook"
)

// The order of etcd-adapter's hook and the control-plane providers' own hooks is decided by
// hook.OrderBefore (pkg/etcd/hook, order.go, which cites each provider): a provider hook that
// itself waits for every other hook (KubeadmControlPlane's kcp-cleanup for Kubernetes >= 1.31,
// CAPRKE2's rke2-cleanup, and the hook named by hook.EmbeddedRemovalAnnotation on the control
// plane) is not waited for, since each waiting for the other would hang the deletion for ever;
// every other hook goes first, because etcd-adapter's removal stops the Node's etcd and, on
// K3s/RKE2, its apiserver.

// kubeadmControlPlaneKind is Cluster API's KubeadmControlPlane kind.
const kubeadmControlPlaneKind = hook.KubeadmControlPlaneKind

// controlPlaneFacts is what the hook order depends on about the Cluster's control-plane object.
type controlPlaneFacts = hook.ControlPlane

// hookOrder is whether etcd-adapter's hook waits for another pre-terminate hook, and why.
type hookOrder = hook.Order

// orderBefore decides whether etcd-adapter's hook waits for the pre-terminate hook key on the
// same Machine to be released first (hook.OrderBefore).
func orderBefore(key string, cp controlPlaneFacts) hookOrder {
	return hook.OrderBefore(key, cp)
}

// controlPlaneFactsFor reads what the hook order needs of the Cluster's control-plane object.
// It reads the object (a cached read) only when a deleting Machine carries KCP's hook, the only
// hook whose order depends on it. An object that cannot be read leaves Version empty: KCP's hook
// is then waited for, and the Progressing condition names it.
func (r *Reconciler) controlPlaneFactsFor(ctx context.Context, cluster *clusterv1.Cluster, machines []*clusterv1.Machine) controlPlaneFacts {
	ref := cluster.Spec.ControlPlaneRef
	facts := controlPlaneFacts{Kind: ref.Kind}
	if ref.Kind != kubeadmControlPlaneKind || !anyDeletingWith(machines, v1alpha1.KCPHookAnnotation) {
		return facts
	}
	obj := &unstructured.Unstructured{}
	if found, err := backends.GetControlPlane(ctx, r.Client, r.Client.RESTMapper(), cluster, obj); err != nil || !found {
		ctrl.LoggerFrom(ctx).V(2).Info("Failed to read the control plane's spec.version; waiting for its hook", "kind", ref.Kind, "name", ref.Name, "found", found, "err", err)
		return facts
	}
	facts.Version, _, _ = unstructured.NestedString(obj.Object, "spec", "version")
	return facts
}

func anyDeletingWith(machines []*clusterv1.Machine, hook string) bool {
	for _, m := range machines {
		if _, ok := m.Annotations[hook]; ok && !m.DeletionTimestamp.IsZero() {
			return true
		}
	}
	return false
}
