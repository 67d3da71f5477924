package controlplaneetcd

import (
	"context"
	"fmt"

	"github.com/blang/semver/v4"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/version"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
)

// Control-plane providers put an etcd hook of their own on their Machines, and some of them
// release it only once every other pre-terminate hook is gone ("run last"). If etcd-adapter's
// hook waited for such a hook, each would wait for the other for ever. So etcd-adapter runs
// just before a run-last provider hook: once Cluster API has drained the Node it removes the
// member and releases its own hook, and the provider's hook then finds the member gone and
// only releases:
//
//   - KubeadmControlPlane (cluster-api v1.14.2,
//     controlplane/kubeadm/reconcilers/kubeadmcontrolplane/kubeadmcontrolplane_controller.go,
//     reconcilePreTerminateHook): for spec.version >= 1.31.0 (pre-releases count as their
//     release) it waits while machineHasOtherPreTerminateHooks. A member that is already gone is
//     done: RemoveEtcdMember is only called for a member still in KCP's member list, and
//     itself returns nil when a member list read through another Node has no member of that ID
//     (controlplane/kubeadm/pkg/workload_cluster_etcd.go); forwardEtcdLeadership does nothing
//     when the deleting Machine's Node is not the leader KCP sees. For older versions KCP does
//     not wait for other hooks, so etcd-adapter waits for kcp-cleanup as before: KCP removes the
//     member and etcd-adapter finds it gone. Either way the member is removed once.
//   - RKE2ControlPlane (rancher/cluster-api-provider-rke2,
//     controlplane/internal/controllers/lifecycle_hook.go, reconcilePreTerminateHook): always
//     waits while machineHasOtherHooks, then sets etcd.rke2.cattle.io/remove=true on the Node
//     and releases once etcd.rke2.cattle.io/removed-node-name is non-empty
//     (pkg/rke2/workload_cluster_etcd.go, isMemberRemovedForNode). After etcd-adapter's removal
//     RKE2 has already written removed-node-name, and RKE2's member controller does not remove
//     anything for a Node that carries it (k3s pkg/etcd/member_controller.go), so the second
//     remove=true is a no-op and the member is removed once.
//
// Every other hook (including kcp-cleanup when the version is not known) still goes first,
// because etcd-adapter's removal stops the Node's etcd and, on K3s/RKE2, its apiserver.

// kubeadmControlPlaneKind is Cluster API's KubeadmControlPlane kind.
const kubeadmControlPlaneKind = "KubeadmControlPlane"

// kcpWaitsForOtherHooksFrom is the first Kubernetes version for which KCP's kcp-cleanup hook
// waits until it is the last pre-terminate hook (KCP's reconcilePreTerminateHook).
var kcpWaitsForOtherHooksFrom = semver.MustParse("1.31.0")

// controlPlaneFacts is what the hook order depends on about the Cluster's control-plane object.
type controlPlaneFacts struct {
	// Kind is the control-plane kind the Cluster references ("" when none).
	Kind string
	// Version is its spec.version; "" when it has none or it could not be read.
	Version string
}

// hookOrder is whether etcd-adapter's hook waits for another pre-terminate hook, and why.
type hookOrder struct {
	Wait   bool
	Reason string
}

// orderBefore decides whether etcd-adapter's hook waits for the pre-terminate hook key on the
// same Machine to be released first. A provider hook that itself waits for every other hook is
// not waited for (etcd-adapter runs just before it); every other hook is.
func orderBefore(key string, cp controlPlaneFacts) hookOrder {
	switch key {
	case v1alpha1.RKE2HookAnnotation:
		return hookOrder{Reason: "cluster-api-provider-rke2 releases rke2-cleanup only after every other pre-terminate hook, and finds the member removed"}
	case v1alpha1.KCPHookAnnotation:
		if cp.Kind != kubeadmControlPlaneKind {
			return hookOrder{Wait: true, Reason: fmt.Sprintf("the control plane is a %q, not a KubeadmControlPlane, so kcp-cleanup is not known to wait for other hooks", cp.Kind)}
		}
		v, err := semver.ParseTolerant(cp.Version)
		if err != nil {
			return hookOrder{Wait: true, Reason: fmt.Sprintf("the KubeadmControlPlane's spec.version %q is not a version, so whether kcp-cleanup waits for other hooks is not known", cp.Version)}
		}
		if version.Compare(v, kcpWaitsForOtherHooksFrom, version.WithoutPreReleases()) >= 0 {
			return hookOrder{Reason: fmt.Sprintf("KubeadmControlPlane releases kcp-cleanup for version %s (>= 1.31.0) only after every other pre-terminate hook, and finds the member removed", cp.Version)}
		}
		return hookOrder{Wait: true, Reason: fmt.Sprintf("KubeadmControlPlane runs kcp-cleanup for version %s (< 1.31.0) without waiting for other hooks; it removes the member first", cp.Version)}
	}
	return hookOrder{Wait: true, Reason: "other pre-terminate hooks run while the Node's etcd member and apiserver still work"}
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
