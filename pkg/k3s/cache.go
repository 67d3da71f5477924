package k3s

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
)

// NodeCacheOptions restricts a Node cache to what this backend reads: the Nodes K3s (or RKE2)
// labelled etcd servers (EtcdRoleLabel=true, the selector Observe lists with), trimmed by
// TrimNode. Agents and other worker Nodes never carry the label (K3s sets it only on servers
// with etcd, pkg/etcd/metadata_controller.go), so a cache built with these options holds as
// many Nodes as the cluster has etcd members, whatever its worker count.
//
// Note: a label selector cannot say "etcd OR control-plane", and the cache's options are one
// per process, so a cache built with these options holds no Node of a kubeadm cluster (kubeadm
// labels its control-plane Nodes node-role.kubernetes.io/control-plane only). The kubeadm
// backend does not read Nodes from a cache: it lists them from the apiserver on each
// observation.
func NodeCacheOptions() ctrlcache.ByObject {
	return ctrlcache.ByObject{
		Label:     labels.SelectorFromSet(labels.Set{EtcdRoleLabel: "true"}),
		Transform: TrimNode,
	}
}

// TrimNode keeps of a Node what this backend and its callers read: the object metadata (name,
// labels, K3s's etcd annotations, deletion timestamp, resource version) without managed fields,
// spec.unschedulable and spec.providerID, the conditions (EtcdIsVoter, Ready) and the kubelet
// version (it tells K3s from RKE2 and which removal rules apply). Images, capacity, volumes and
// the rest of the status, most of a Node's size, are dropped. Objects that are not Nodes are
// returned unchanged. It may be applied more than once to the same object.
func TrimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	n.ManagedFields = nil
	n.Spec = corev1.NodeSpec{Unschedulable: n.Spec.Unschedulable, ProviderID: n.Spec.ProviderID}
	n.Status = corev1.NodeStatus{
		Conditions: n.Status.Conditions,
		NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: n.Status.NodeInfo.KubeletVersion},
	}
	return n, nil
}
