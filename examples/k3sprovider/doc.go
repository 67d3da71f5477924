// Package k3sprovider is a minimal control-plane provider in the shape of cluster-api-k3s's
// KThreesControlPlane, pinned to the versions cluster-api-k3s builds with (Cluster API v1.10,
// controller-runtime v0.20, v1beta1 Machines and conditions, Go 1.23). It adopts etcd-adapter as a
// provider would: it imports only the decisions module (pkg/etcd, with pkg/etcd/provider and
// pkg/etcd/hook) and the K3s backend (pkg/k3s), and nothing else of this repository.
//
// It shows the three places a control-plane provider touches etcd:
//   - scale-down and rollout (ScaleDown): observe, write the provider's own conditions, preflight
//     leaving out the Machine being removed, check quorum, delete;
//   - remediation (MayRemediate): may a Machine a MachineHealthCheck marked be deleted;
//   - deletion (ReconcileDeletingMachine): its own pre-terminate hook, so the Node is drained
//     before the member is removed, one step per reconcile, a rejected removal kept on the Machine
//     until a person retries or releases it.
//
// docs/adopters-guide.md walks through it.
package k3sprovider
