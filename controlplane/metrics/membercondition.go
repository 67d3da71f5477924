package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
)

var machineMemberConditionDesc = prometheus.NewDesc(Namespace+"_machine_member_condition",
	"Control-plane and etcdadm etcd Machines of a Cluster by the status (True, False, Unknown) of their "+v1alpha1.MemberHealthyMachineCondition+" condition; a Machine without it is not counted.",
	[]string{"namespace", "cluster", "status"}, nil)

// conditionStatuses are the statuses exported for every Cluster, 0 included, so each Cluster has
// exactly three series and a query for False does not find an empty result ambiguous.
var conditionStatuses = []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown}

// MemberConditions counts, per Cluster, the control-plane and etcdadm etcd Machines by the status
// of their EtcdAdapterMemberHealthy condition. A Machine without the condition is not counted.
func MemberConditions(machines []clusterv1.Machine) map[client.ObjectKey]map[metav1.ConditionStatus]int {
	out := map[client.ObjectKey]map[metav1.ConditionStatus]int{}
	for i := range machines {
		m := &machines[i]
		if !backends.IsControlPlaneOrEtcdMachine(m.Labels) {
			continue
		}
		c := conditions.Get(m, v1alpha1.MemberHealthyMachineCondition)
		if c == nil {
			continue
		}
		key := client.ObjectKey{Namespace: m.Namespace, Name: m.Spec.ClusterName}
		if out[key] == nil {
			out[key] = map[metav1.ConditionStatus]int{}
		}
		out[key][c.Status]++
	}
	return out
}

// collectMemberConditions sends three series per Cluster that has a ControlPlaneEtcd, so the
// series are bounded by the Clusters etcd-adapter is in charge of and go with their
// ControlPlaneEtcd; a condition left on the Machines of a Cluster without one is not exported.
func collectMemberConditions(ch chan<- prometheus.Metric, cpes []v1alpha1.ControlPlaneEtcd, machines []clusterv1.Machine) {
	counts := MemberConditions(machines)
	seen := map[client.ObjectKey]bool{}
	for i := range cpes {
		key := client.ObjectKey{Namespace: cpes[i].Namespace, Name: cpes[i].Spec.ClusterName}
		// Two ControlPlaneEtcds naming one Cluster (DuplicateControlPlaneEtcd) must not send
		// the same series twice: the registry would fail the whole scrape.
		if seen[key] {
			continue
		}
		seen[key] = true
		for _, s := range conditionStatuses {
			ch <- prometheus.MustNewConstMetric(machineMemberConditionDesc, prometheus.GaugeValue, float64(counts[key][s]), key.Namespace, key.Name, string(s))
		}
	}
}
