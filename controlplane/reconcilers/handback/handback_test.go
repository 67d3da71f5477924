package handback

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
)

var memberCondition = metav1.Condition{Type: v1alpha1.MemberHealthyMachineCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.EtcdMemberHealthyReason}

func Test_handsBack(t *testing.T) {
	hook := map[string]string{v1alpha1.PreTerminateHookAnnotation: v1alpha1.PreTerminateHookValue}
	tests := []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		conditions  []metav1.Condition
		want        bool
	}{
		{name: "A control-plane Machine with the hook is looked at", labels: map[string]string{clusterv1.MachineControlPlaneLabel: ""}, annotations: hook, want: true},
		{name: "An etcdadm etcd Machine with the hook is looked at", labels: map[string]string{backends.EtcdClusterLabel: "c-etcd"}, annotations: hook, want: true},
		{name: "A control-plane Machine without the hook is not looked at", labels: map[string]string{clusterv1.MachineControlPlaneLabel: ""}},
		{name: "A worker Machine is not looked at even with the hook", labels: map[string]string{clusterv1.MachineDeploymentNameLabel: "md-0"}, annotations: hook},
		{name: "A control-plane Machine with etcd-adapter's member condition and no hook is looked at (Observe mode)", labels: map[string]string{clusterv1.MachineControlPlaneLabel: ""},
			conditions: []metav1.Condition{memberCondition}, want: true},
		{name: "A control-plane Machine with only KCP's EtcdMemberHealthy is not looked at", labels: map[string]string{clusterv1.MachineControlPlaneLabel: ""},
			conditions: []metav1.Condition{{Type: v1alpha1.EtcdMemberHealthyCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.EtcdMemberHealthyReason}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Labels: tt.labels, Annotations: tt.annotations}}
			m.Status.Conditions = tt.conditions
			g.Expect(handsBack(m)).To(Equal(tt.want))
		})
	}
}

func TestReconciler_hookedMachines(t *testing.T) {
	g := NewWithT(t)
	scheme := runtime.NewScheme()
	utilruntime.Must(clusterv1.AddToScheme(scheme))
	hooked := map[string]string{v1alpha1.PreTerminateHookAnnotation: v1alpha1.PreTerminateHookValue}
	machine := func(name string, labels, annotations map[string]string) client.Object {
		labels[clusterv1.ClusterNameLabel] = "c"
		return &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labels, Annotations: annotations}}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		machine("cp-0", map[string]string{clusterv1.MachineControlPlaneLabel: ""}, hooked),
		machine("etcd-0", map[string]string{backends.EtcdClusterLabel: "c-etcd"}, hooked),
		machine("etcd-1", map[string]string{backends.EtcdClusterLabel: "c-etcd"}, nil),
		machine("worker-0", map[string]string{clusterv1.MachineDeploymentNameLabel: "md-0"}, hooked),
	).Build()
	r := &Reconciler{Client: c}
	var names []string
	for _, req := range r.hookedMachines(context.Background(), "ns", "c") {
		names = append(names, req.Name)
	}
	g.Expect(names).To(ConsistOf("cp-0", "etcd-0"), "the hooked control-plane and etcdadm etcd Machines, as handsBack lets through")
}
