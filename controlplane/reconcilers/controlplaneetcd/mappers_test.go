package controlplaneetcd

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
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
