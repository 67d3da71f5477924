package metrics

import (
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
)

var now = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func TestRemovalEnded(t *testing.T) {
	start := metav1.Time{Time: now}
	end := &metav1.Time{Time: now.Add(3 * time.Second)}
	removal := func(id string, e *metav1.Time) *v1alpha1.ControlPlaneEtcd {
		return &v1alpha1.ControlPlaneEtcd{Status: v1alpha1.ControlPlaneEtcdStatus{Removal: &v1alpha1.MemberRemovalStatus{
			Member: "m", MemberID: id, MachineName: "machine", StartTime: start, EndTime: e, Result: v1alpha1.RemovalRemoved}}}
	}
	tests := []struct {
		name          string
		before, after *v1alpha1.ControlPlaneEtcd
		ended         bool
	}{
		{name: "no removal", before: &v1alpha1.ControlPlaneEtcd{}, after: &v1alpha1.ControlPlaneEtcd{}},
		{name: "in progress", before: nil, after: removal("a", nil)},
		{name: "ends now", before: removal("a", nil), after: removal("a", end), ended: true},
		{name: "seen first already ended", before: &v1alpha1.ControlPlaneEtcd{}, after: removal("a", end), ended: true},
		{name: "already counted", before: removal("a", end), after: removal("a", end)},
		{name: "another member ended", before: removal("a", end), after: removal("b", end), ended: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(RemovalEnded(tt.before, tt.after) != nil).To(Equal(tt.ended))
		})
	}
}

func TestStatusCollector(t *testing.T) {
	g := NewWithT(t)
	s := runtime.NewScheme()
	g.Expect(clusterv1.AddToScheme(s)).To(Succeed())
	g.Expect(v1alpha1.AddToScheme(s)).To(Succeed())
	cpe := &v1alpha1.ControlPlaneEtcd{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c1"},
		Spec:       v1alpha1.ControlPlaneEtcdSpec{ClusterName: "c1", Backend: v1alpha1.BackendK3s},
		Status: v1alpha1.ControlPlaneEtcdStatus{
			Members: []v1alpha1.EtcdMemberStatus{
				{Name: "a", Role: v1alpha1.MemberRoleLeader, Health: v1alpha1.MemberHealthy},
				{Name: "b", Role: v1alpha1.MemberRoleVoter, Health: v1alpha1.MemberHealthy},
				{Name: "c", Role: v1alpha1.MemberRoleVoter, Health: v1alpha1.MemberUnhealthy},
			},
			FaultTolerance: ptr.To(int32(0)),
			Conditions:     []metav1.Condition{{Type: v1alpha1.AvailableCondition, Status: metav1.ConditionTrue, Reason: v1alpha1.AvailableQuorumAvailableReason}},
		},
	}
	held := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "m1", DeletionTimestamp: &metav1.Time{Time: now}, Finalizers: []string{"test"},
			Labels:      map[string]string{clusterv1.MachineControlPlaneLabel: ""},
			Annotations: map[string]string{v1alpha1.PreTerminateHookAnnotation: v1alpha1.PreTerminateHookValue}},
		Spec: clusterv1.MachineSpec{ClusterName: "c1"},
		Status: clusterv1.MachineStatus{Conditions: []metav1.Condition{{Type: clusterv1.MachineDeletingCondition, Status: metav1.ConditionTrue,
			Reason: clusterv1.MachineDeletingWaitingForPreTerminateHookReason}}},
	}
	heldEtcd := held.DeepCopy()
	heldEtcd.Name, heldEtcd.Labels = "etcd-0", map[string]string{backends.EtcdClusterLabel: "etcd"}
	// Still draining: the hook waits, but a PodDisruptionBudget, not the hook, holds it.
	heldEtcd.Status.Conditions[0].Reason = clusterv1.MachineDeletingDrainingNodeReason
	heldBoth := held.DeepCopy()
	heldBoth.Name, heldBoth.Labels = "m2", map[string]string{clusterv1.MachineControlPlaneLabel: "", backends.EtcdClusterLabel: "etcd"}
	worker := held.DeepCopy()
	worker.Name, worker.Labels = "w1", nil
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(cpe, held, heldEtcd, heldBoth, worker).Build()

	want := `
# HELP etcdadapter_fault_tolerance How many more voting members of a Cluster may fail before etcd loses quorum (status.faultTolerance); absent before the first observation.
# TYPE etcdadapter_fault_tolerance gauge
etcdadapter_fault_tolerance{backend="k3s",cluster="c1",namespace="ns"} 0
# HELP etcdadapter_hooks_waiting Deleting control-plane and etcdadm etcd Machines of a Cluster still held by the etcd-adapter pre-terminate hook (or the adopted cluster-api-k3s hook).
# TYPE etcdadapter_hooks_waiting gauge
etcdadapter_hooks_waiting{cluster="c1",namespace="ns"} 3
# HELP etcdadapter_hooks_blocking Of hooks_waiting, the Machines whose deletion waits on pre-terminate hooks alone (Cluster API's Deleting condition reason WaitingForPreTerminateHook): drain and volume detach are done, so the hook, not a PodDisruptionBudget, holds them.
# TYPE etcdadapter_hooks_blocking gauge
etcdadapter_hooks_blocking{cluster="c1",namespace="ns"} 2
`
	g.Expect(testutil.CollectAndCompare(&StatusCollector{Reader: c}, strings.NewReader(want),
		"etcdadapter_fault_tolerance", "etcdadapter_hooks_waiting", "etcdadapter_hooks_blocking")).To(Succeed())
	g.Expect(testutil.CollectAndCount(&StatusCollector{Reader: c}, "etcdadapter_members")).To(Equal(3)) // Leader/Healthy, Voter/Healthy (b), Voter/Unhealthy (c)
}
