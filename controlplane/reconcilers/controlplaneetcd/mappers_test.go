package controlplaneetcd

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
	"github.com/etcd-adapter/etcd-adapter/controlplane/reconcilers/creation"
)

func Test_nodeChanged(t *testing.T) {
	base := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "cp-0", Annotations: map[string]string{"etcd.k3s.cattle.io/node-name": "cp-0-abc"}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.NewTime(time.Unix(1, 0))},
			{Type: "EtcdIsVoter", Status: corev1.ConditionTrue, Reason: "MemberNotLearner"},
		}},
	}
	tests := []struct {
		name   string
		change func(n *corev1.Node)
		want   bool
	}{
		{"A heartbeat alone does not reconcile", func(n *corev1.Node) { n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(time.Unix(2, 0)) }, false},
		{"K3s asking for a removal reconciles", func(n *corev1.Node) { n.Annotations["etcd.k3s.cattle.io/remove"] = "true" }, true},
		{"A member turning unhealthy reconciles", func(n *corev1.Node) { n.Status.Conditions[1].Reason = "Unhealthy" }, true},
		{"The Node going NotReady reconciles", func(n *corev1.Node) { n.Status.Conditions[0].Status = corev1.ConditionFalse }, true},
		{"Cordoning reconciles", func(n *corev1.Node) { n.Spec.Unschedulable = true }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			changed := base.DeepCopy()
			tt.change(changed)
			g.Expect(nodeChanged().Update(event.UpdateEvent{ObjectOld: base, ObjectNew: changed})).To(Equal(tt.want))
		})
	}
}

func TestReconciler_machineToControlPlaneEtcd(t *testing.T) {
	cpe := func(name, cluster string) client.Object {
		return &v1alpha1.ControlPlaneEtcd{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: v1alpha1.ControlPlaneEtcdSpec{ClusterName: cluster}}
	}
	c := fake.NewClientBuilder().WithScheme(eventScheme()).
		WithIndex(&v1alpha1.ControlPlaneEtcd{}, v1alpha1.ClusterNameField, creation.ClusterNameOf).
		WithObjects(cpe("a-etcd", "a"), cpe("a-twin", "a"), cpe("b-etcd", "b")).Build()
	r := &Reconciler{Client: c}
	machine := func(labels map[string]string) *clusterv1.Machine {
		return &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m", Labels: labels}}
	}
	req := func(name string) ctrl.Request {
		return ctrl.Request{NamespacedName: client.ObjectKey{Namespace: "ns", Name: name}}
	}
	tests := []struct {
		name    string
		machine *clusterv1.Machine
		want    []ctrl.Request
	}{
		{"a control-plane Machine maps to its Cluster's ControlPlaneEtcds", machine(map[string]string{clusterv1.ClusterNameLabel: "a", clusterv1.MachineControlPlaneLabel: ""}),
			[]ctrl.Request{req("a-etcd"), req("a-twin")}},
		{"an etcdadm etcd Machine maps to its Cluster's", machine(map[string]string{clusterv1.ClusterNameLabel: "b", backends.EtcdClusterLabel: "b-etcd"}),
			[]ctrl.Request{req("b-etcd")}},
		{"a worker Machine maps to none", machine(map[string]string{clusterv1.ClusterNameLabel: "a"}), nil},
		{"a Machine of a Cluster without a ControlPlaneEtcd maps to none", machine(map[string]string{clusterv1.ClusterNameLabel: "c", clusterv1.MachineControlPlaneLabel: ""}), nil},
		{"a Machine without a Cluster label maps to none", machine(map[string]string{clusterv1.MachineControlPlaneLabel: ""}), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got := r.machineToControlPlaneEtcd(context.Background(), tt.machine)
			if tt.want == nil {
				g.Expect(got).To(BeEmpty())
				return
			}
			g.Expect(got).To(ConsistOf(tt.want))
		})
	}
}
