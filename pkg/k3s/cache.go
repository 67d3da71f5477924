package k3s

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Bounds on what is kept of a workload cluster's Node (TrimNode).
const (
	// maxAnnotationBytes is the longest annotation value kept. K3s's etcd annotations hold a
	// member name (<node name>-<8 hex>, a Node name being at most 253 characters), an IP, or
	// "true" (k3s pkg/etcd/metadata_controller.go); etcd-adapter's hold a member name.
	maxAnnotationBytes = etcd.MaxMemberNameBytes

	// maxReasonBytes is the longest Node condition reason kept: K3s's are one CamelCase word
	// (MemberNotLearner), and metav1.Condition allows 1024.
	maxReasonBytes = 128
)

// isOurAnnotation reports whether a Node annotation is one this backend reads: K3s's or RKE2's
// etcd annotations (KeysFor) or the removal records etcd-adapter writes (annotations.go). The
// keys are named one by one, so a Node keeps at most this many annotations, however many a
// workload cluster's admins add under the same prefixes.
func isOurAnnotation(k string) bool {
	switch k {
	case RemovingMemberAnnotation, RemovalRequestedAtAnnotation, RemovalConfirmedAnnotation:
		return true
	}
	for _, p := range []string{programK3s, programRKE2} {
		if keys := KeysFor(p); k == keys.NodeName || k == keys.NodeAddress || k == keys.Remove || k == keys.RemovedNodeName {
			return true
		}
	}
	return false
}

// keptConditions are the Node conditions this backend reads (nodeCondition returns the first of
// a type, so only the first of each is kept).
var keptConditions = []corev1.NodeConditionType{EtcdIsVoterCondition, corev1.NodeReady}

// trimConditions keeps the first condition of each kept type, its reason and message made one
// bounded printable line; nil when there is none.
func trimConditions(in []corev1.NodeCondition) []corev1.NodeCondition {
	var out []corev1.NodeCondition
	for _, t := range keptConditions {
		i := slices.IndexFunc(in, func(c corev1.NodeCondition) bool { return c.Type == t })
		if i < 0 {
			continue
		}
		c := in[i]
		c.Reason = etcd.SanitizeText(c.Reason, maxReasonBytes)
		c.Message = etcd.SanitizeText(c.Message, etcd.MaxTextBytes)
		out = append(out, c)
	}
	return out
}

// keepEntries returns the entries of m keep accepts, nil when none.
func keepEntries(m map[string]string, keep func(k, v string) bool) map[string]string {
	var out map[string]string
	for k, v := range m {
		if keep(k, v) {
			if out == nil {
				out = map[string]string{}
			}
			out[k] = v
		}
	}
	return out
}

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

// TrimNode keeps of a Node what this backend reads: the object metadata (name, EtcdRoleLabel,
// the K3s, RKE2 and etcd-adapter annotations isOurAnnotation names, deletion timestamp, resource
// version) without managed fields, owner references and finalizers, spec.unschedulable and
// spec.providerID, the EtcdIsVoter and Ready conditions and the kubelet version (it tells K3s
// from RKE2 and which removal rules apply). Images, capacity, volumes, other labels,
// annotations and conditions and the rest of the status, most of a Node's size, are dropped.
// Objects that are not Nodes are returned unchanged. It may be applied more than once to the
// same object.
//
// Important! A workload cluster's admins write its Nodes: what is kept is bounded too. At most
// 11 annotations and 2 conditions are kept; an annotation value longer than maxAnnotationBytes is
// dropped (etcdNodes, which every read goes through, reports such a Node as etcd.ErrTooLarge
// when it lists live), and a condition's reason and message are made one bounded printable line
// (etcd.SanitizeText), since K3s's message reaches status and Events. The number of etcd Nodes
// a cache holds is not bounded here (an informer holds what it lists): etcdNodes reads at most
// etcd.MaxMembers+1 of them and reports more as etcd.ErrTooLarge.
func TrimNode(obj any) (any, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return obj, nil
	}
	n.ManagedFields, n.OwnerReferences, n.Finalizers = nil, nil, nil
	n.Labels = keepEntries(n.Labels, func(k, _ string) bool { return k == EtcdRoleLabel })
	n.Annotations = keepEntries(n.Annotations, func(k, v string) bool { return isOurAnnotation(k) && len(v) <= maxAnnotationBytes })
	n.Spec = corev1.NodeSpec{Unschedulable: n.Spec.Unschedulable, ProviderID: n.Spec.ProviderID}
	n.Status = corev1.NodeStatus{
		Conditions: trimConditions(n.Status.Conditions),
		NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: n.Status.NodeInfo.KubeletVersion},
	}
	return n, nil
}
