package backends

import (
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ControlPlaneKinds are the control-plane kinds the manager reads (a Cluster's
// spec.controlPlaneRef): Cluster API's KubeadmControlPlane, cluster-api-k3s's
// KThreesControlPlane and cluster-api-provider-rke2's RKE2ControlPlane, all in group
// controlplane.cluster.x-k8s.io. The manager's role grants list and watch on exactly these
// (the +kubebuilder:rbac marker in controlplane/reconcilers/controlplaneetcd/controller.go
// names their resources; test/rbaccheck checks the two agree), not on every resource of the
// group.
var ControlPlaneKinds = []schema.GroupKind{
	{Group: "controlplane.cluster.x-k8s.io", Kind: KubeadmControlPlaneKind},
	{Group: "controlplane.cluster.x-k8s.io", Kind: "KThreesControlPlane"},
	{Group: "controlplane.cluster.x-k8s.io", Kind: "RKE2ControlPlane"},
}

// ControlPlaneResources are the resources of ControlPlaneKinds, as the role names them.
var ControlPlaneResources = []schema.GroupResource{
	{Group: "controlplane.cluster.x-k8s.io", Resource: "kubeadmcontrolplanes"},
	{Group: "controlplane.cluster.x-k8s.io", Resource: "kthreescontrolplanes"},
	{Group: "controlplane.cluster.x-k8s.io", Resource: "rke2controlplanes"},
}

// ReadsControlPlaneKind reports whether gk is one of ControlPlaneKinds. Another kind is never
// read: the role does not allow it, and a cached read of a kind the manager may not list would
// wait for an informer that never syncs.
func ReadsControlPlaneKind(gk schema.GroupKind) bool {
	return slices.Contains(ControlPlaneKinds, gk)
}
