package backends

import clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

// IsControlPlaneOrEtcdMachine says whether a Machine with these labels is one etcd-adapter reads:
// a control-plane Machine (cluster.x-k8s.io/control-plane, set by every control-plane provider)
// or an etcdadm etcd Machine (EtcdClusterLabel). Only these host etcd members or carry
// etcd-adapter's pre-terminate hook; every other Machine (MachineDeployment, MachineSet and
// MachinePool workers) is never read by etcd-adapter beyond its labels.
//
// Note: a label selector cannot say "one label OR the other", so a cache or a List that needs
// both kinds filters with this function, or lists each kind with its own selector.
func IsControlPlaneOrEtcdMachine(labels map[string]string) bool {
	_, cp := labels[clusterv1.MachineControlPlaneLabel]
	_, etcd := labels[EtcdClusterLabel]
	return cp || etcd
}
