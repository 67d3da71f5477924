package metrics

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
)

func TestStatusCollector_machineMemberCondition(t *testing.T) {
	cpe := func(name, cluster string) *v1alpha1.ControlPlaneEtcd {
		return &v1alpha1.ControlPlaneEtcd{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
			Spec: v1alpha1.ControlPlaneEtcdSpec{ClusterName: cluster, Backend: v1alpha1.BackendK3s}}
	}
	machine := func(name, cluster string, labels map[string]string, status metav1.ConditionStatus) *clusterv1.Machine {
		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labels},
			Spec: clusterv1.MachineSpec{ClusterName: cluster}}
		if status != "" {
			m.Status.Conditions = []metav1.Condition{{Type: v1alpha1.MemberHealthyMachineCondition, Status: status, Reason: "R"}}
		}
		return m
	}
	// A duplicate reports so in its Available reason, which keeps its etcdadapter_available
	// series apart from that of the one in charge.
	duplicate := func(cpe *v1alpha1.ControlPlaneEtcd) *v1alpha1.ControlPlaneEtcd {
		cpe.Status.Conditions = []metav1.Condition{{Type: v1alpha1.AvailableCondition, Status: metav1.ConditionFalse, Reason: v1alpha1.DuplicateReason}}
		return cpe
	}
	cp := map[string]string{clusterv1.MachineControlPlaneLabel: ""}
	etcd := map[string]string{backends.EtcdClusterLabel: "etcd"}
	series := func(cluster string, t, f, u int) string {
		return fmt.Sprintf(`
etcdadapter_machine_member_condition{cluster=%[1]q,namespace="ns",status="False"} %[3]d
etcdadapter_machine_member_condition{cluster=%[1]q,namespace="ns",status="True"} %[2]d
etcdadapter_machine_member_condition{cluster=%[1]q,namespace="ns",status="Unknown"} %[4]d
`, cluster, t, f, u)
	}
	tests := []struct {
		name    string
		objects []client.Object
		want    string
	}{
		{
			name:    "no ControlPlaneEtcd: no series, even for a condition left on a Machine",
			objects: []client.Object{machine("m1", "c1", cp, metav1.ConditionFalse)},
		},
		{
			name:    "a Cluster whose Machines have no condition yet: three zeros",
			objects: []client.Object{cpe("c1", "c1"), machine("m1", "c1", cp, "")},
			want:    series("c1", 0, 0, 0),
		},
		{
			name: "control-plane and etcdadm etcd Machines counted by status; workers and other Clusters not",
			objects: []client.Object{cpe("c1", "c1"),
				machine("m1", "c1", cp, metav1.ConditionTrue), machine("m2", "c1", cp, metav1.ConditionTrue),
				machine("m3", "c1", cp, metav1.ConditionFalse), machine("etcd-0", "c1", etcd, metav1.ConditionUnknown),
				machine("etcd-1", "c1", etcd, metav1.ConditionFalse), machine("w1", "c1", nil, metav1.ConditionFalse),
				machine("o1", "other", cp, metav1.ConditionFalse)},
			want: series("c1", 2, 2, 1),
		},
		{
			name: "two ControlPlaneEtcds naming one Cluster: its series once",
			objects: []client.Object{cpe("a", "c1"), duplicate(cpe("b", "c1")), cpe("c2", "c2"),
				machine("m1", "c1", cp, metav1.ConditionFalse), machine("n1", "c2", cp, metav1.ConditionTrue)},
			want: series("c1", 0, 1, 0) + series("c2", 1, 0, 0),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := runtime.NewScheme()
			g.Expect(clusterv1.AddToScheme(s)).To(Succeed())
			g.Expect(v1alpha1.AddToScheme(s)).To(Succeed())
			c := fake.NewClientBuilder().WithScheme(s).WithObjects(tt.objects...).Build()
			want := ""
			if tt.want != "" {
				want = "# HELP etcdadapter_machine_member_condition Control-plane and etcdadm etcd Machines of a Cluster by the status " +
					"(True, False, Unknown) of their EtcdAdapterMemberHealthy condition; a Machine without it is not counted.\n" +
					"# TYPE etcdadapter_machine_member_condition gauge" + tt.want
			}
			g.Expect(testutil.CollectAndCompare(&StatusCollector{Reader: c}, strings.NewReader(want),
				"etcdadapter_machine_member_condition")).To(Succeed())
		})
	}
}

func TestSeriesNames_machineMemberCondition(t *testing.T) {
	g := NewWithT(t)
	g.Expect(SeriesNames()).To(ContainElement("etcdadapter_machine_member_condition"))
}
