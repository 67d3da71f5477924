package k3s

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func TestTrimNode(t *testing.T) {
	now := metav1.Now()
	kept := func() *corev1.Node {
		return &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{
				Name: "cp-0", ResourceVersion: "7", DeletionTimestamp: &now,
				Labels:      map[string]string{EtcdRoleLabel: "true"},
				Annotations: map[string]string{"etcd.k3s.cattle.io/node-name": "cp-0-0a1b2c3d"},
			},
			Spec: corev1.NodeSpec{Unschedulable: true, ProviderID: "test://cp-0"},
			Status: corev1.NodeStatus{
				Conditions: []corev1.NodeCondition{{Type: EtcdIsVoterCondition, Status: corev1.ConditionTrue}},
				NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: "v1.34.2+k3s1"},
			},
		}
	}
	full := func() *corev1.Node {
		n := kept()
		n.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "k3s"}}
		n.Spec.PodCIDR, n.Spec.Taints = "10.42.0.0/24", []corev1.Taint{{Key: "k", Effect: corev1.TaintEffectNoSchedule}}
		n.Status.Images = []corev1.ContainerImage{{Names: []string{"pause"}}}
		n.Status.Capacity = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}
		n.Status.NodeInfo.OSImage = "K3s"
		return n
	}
	// hostile adds what a workload cluster's admins may write to a Node: owner references,
	// finalizers, many annotations under the K3s, RKE2 and etcd-adapter prefixes, many
	// conditions and a second EtcdIsVoter condition.
	hostile := func(n *corev1.Node) *corev1.Node {
		n.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "x", UID: "u"}}
		n.Finalizers = []string{"example.com/hold"}
		for i := range 100 {
			for _, prefix := range []string{"etcd.k3s.cattle.io/", "etcd.rke2.cattle.io/", "etcd-adapter.cluster.x-k8s.io/"} {
				n.Annotations[fmt.Sprintf("%sx-%d", prefix, i)] = "true"
			}
			n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeConditionType(fmt.Sprintf("X%d", i)), Message: "m"})
		}
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: EtcdIsVoterCondition, Status: corev1.ConditionFalse})
		return n
	}
	tests := []struct {
		name string
		in   any
		want any
	}{
		{name: "A Node keeps its metadata, unschedulable, provider ID, conditions and kubelet version, and loses the rest", in: full(), want: kept()},
		{name: "A trimmed Node trimmed again stays as it is", in: kept(), want: kept()},
		{name: "A Node keeps only the annotations and conditions the backend reads, the first of each condition type", in: hostile(kept()), want: kept()},
		{name: "An object that is not a Node is returned unchanged", in: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}, want: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := TrimNode(tt.in)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestNodeCacheOptions_selectsTheNodesObserveLists(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		want   bool
	}{
		{name: "A K3s server with etcd and a control plane is cached", labels: map[string]string{EtcdRoleLabel: "true", "node-role.kubernetes.io/control-plane": "true"}, want: true},
		{name: "A K3s etcd-only server is cached", labels: map[string]string{EtcdRoleLabel: "true"}, want: true},
		{name: "A K3s control-plane-only server hosts no member and is not cached", labels: map[string]string{"node-role.kubernetes.io/control-plane": "true"}},
		{name: "A kubeadm control-plane Node is not cached", labels: map[string]string{"node-role.kubernetes.io/control-plane": ""}},
		{name: "An agent is not cached", labels: map[string]string{"kubernetes.io/os": "linux"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(NodeCacheOptions().Label.Matches(labels.Set(tt.labels))).To(Equal(tt.want))
		})
	}
}
