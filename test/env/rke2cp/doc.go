// Package rke2cp stands in for the pre-terminate hook of cluster-api-provider-rke2's
// RKE2ControlPlane controller (CAPRKE2), so tests can run etcd-adapter beside it on an RKE2
// workload cluster (the K3s simulator in its RKE2 flavour, etcd.rke2.cattle.io/ keys).
//
// It follows CAPRKE2's reconcilePreTerminateHook and what it calls, as the provider's source
// shows them (rancher/cluster-api-provider-rke2 controlplane/internal/controllers/lifecycle_hook.go
// and pkg/rke2/workload_cluster_etcd.go), written anew here:
//
//   - every control-plane Machine that is not deleting gets the hook
//     pre-terminate.delete.hook.machine.cluster.x-k8s.io/rke2-cleanup (applyHookToActiveMachines);
//   - while some deleting Machine lacks the hook, nothing is done (getDeletingMachineWithHook);
//     otherwise the deleting Machine with the oldest deletion timestamp is taken, once Cluster
//     API waits on its pre-terminate (or pre-drain) hooks;
//   - while that Machine carries any other pre-terminate hook it waits (machineHasOtherHooks:
//     the provider's hook "should be the one executed last");
//   - with more than one Machine, it sets etcd.rke2.cattle.io/remove=true on the Machine's Node
//     on every pass (removeMemberForNode) and waits until etcd.rke2.cattle.io/removed-node-name
//     is non-empty (isMemberRemovedForNode);
//   - then it removes its hook and sets Cluster API's exclude-node-draining and
//     exclude-wait-for-node-volume-detach annotations (removePreTerminateHookAnnotationFromMachine).
//
// Left out: CAPRKE2 also forwards etcd leadership through a direct etcd client before setting
// remove (ForwardEtcdLeadership); it does nothing when the Node's member is not the leader or is
// gone, and RKE2 itself moves leadership before a removal from the K3s 1.34.2 / 1.32.10 code on.
// The stand-in polls instead of watching, as CAPRKE2 requeues while it waits.
package rke2cp
