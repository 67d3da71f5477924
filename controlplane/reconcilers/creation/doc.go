// Package creation creates a ControlPlaneEtcd for every CAPI Cluster whose control plane is a
// kind etcd-adapter knows: KubeadmControlPlane (backend kubeadm, mode Observe, since KCP removes
// members itself; backend external, mode Observe, when its
// spec.kubeadmConfigSpec.clusterConfiguration.etcd.external is set, and none until the
// KubeadmControlPlane can be read), KThreesControlPlane (k3s, Manage) and RKE2ControlPlane (rke2,
// Manage). A Cluster that owns an etcdadm EtcdadmCluster (the owner reference the etcdadm
// controller follows) gets backend external, mode Observe, whatever its control-plane kind. The Cluster owns it, so it moves with the Cluster in clusterctl move and goes with it
// on deletion.
// A Cluster annotated with v1alpha1.OptOutAnnotation gets none; a person may create one for any
// other control plane. The ControlPlaneEtcd carries the Cluster's cluster.x-k8s.io/watch-filter
// label (kept equal when the Cluster is relabelled), so it goes with its Cluster's shard.
package creation
