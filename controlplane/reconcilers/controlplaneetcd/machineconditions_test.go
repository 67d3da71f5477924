package controlplaneetcd

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

func Test_etcdMachineObservation(t *testing.T) {
	addressed := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "etcd-0"},
		Status: clusterv1.MachineStatus{Addresses: clusterv1.MachineAddresses{{Type: clusterv1.MachineInternalIP, Address: "10.0.0.1"}}}}
	member := func(machine string, health v1alpha1.MemberHealth, role v1alpha1.MemberRole) v1alpha1.EtcdMemberStatus {
		return v1alpha1.EtcdMemberStatus{Name: machine, MachineName: machine, Health: health, Role: role, Reason: memberReason(etcd.Health(health)), Message: "as observed"}
	}
	unobserved := etcd.HealthVerdict{Cluster: metav1.Condition{Reason: v1alpha1.EtcdClusterConnectionDownReason, Message: "Failed to observe etcd"}}
	tests := []struct {
		name       string
		snapshot   *etcd.Snapshot
		machine    *clusterv1.Machine
		members    []v1alpha1.EtcdMemberStatus
		wantHealth etcd.Health
		wantReason string
	}{
		{name: "etcd not observed: Unknown with the cluster's reason", machine: addressed, members: []v1alpha1.EtcdMemberStatus{member("etcd-0", v1alpha1.MemberHealthy, v1alpha1.MemberRoleVoter)},
			wantHealth: etcd.Unknown, wantReason: v1alpha1.EtcdClusterConnectionDownReason},
		{name: "a Machine without addresses is still provisioning: Unknown", snapshot: &etcd.Snapshot{}, machine: &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: "etcd-0"}},
			wantHealth: etcd.Unknown, wantReason: v1alpha1.EtcdMemberInspectionFailedReason},
		{name: "no member on the Machine: not healthy", snapshot: &etcd.Snapshot{}, machine: addressed, members: []v1alpha1.EtcdMemberStatus{member("etcd-1", v1alpha1.MemberHealthy, v1alpha1.MemberRoleVoter)},
			wantHealth: etcd.Unhealthy, wantReason: v1alpha1.EtcdMemberNotHealthyReason},
		{name: "two members on the Machine: not healthy", snapshot: &etcd.Snapshot{}, machine: addressed,
			members:    []v1alpha1.EtcdMemberStatus{member("etcd-0", v1alpha1.MemberHealthy, v1alpha1.MemberRoleVoter), member("etcd-0", v1alpha1.MemberHealthy, v1alpha1.MemberRoleVoter)},
			wantHealth: etcd.Unhealthy, wantReason: v1alpha1.EtcdMemberNotHealthyReason},
		{name: "a learner: not healthy", snapshot: &etcd.Snapshot{}, machine: addressed, members: []v1alpha1.EtcdMemberStatus{member("etcd-0", v1alpha1.MemberHealthy, v1alpha1.MemberRoleLearner)},
			wantHealth: etcd.Unhealthy, wantReason: v1alpha1.EtcdMemberNotHealthyReason},
		{name: "an unhealthy member: its own reason", snapshot: &etcd.Snapshot{}, machine: addressed, members: []v1alpha1.EtcdMemberStatus{member("etcd-0", v1alpha1.MemberUnhealthy, v1alpha1.MemberRoleVoter)},
			wantHealth: etcd.Unhealthy, wantReason: v1alpha1.EtcdMemberNotHealthyReason},
		{name: "a healthy voter", snapshot: &etcd.Snapshot{}, machine: addressed, members: []v1alpha1.EtcdMemberStatus{member("etcd-0", v1alpha1.MemberHealthy, v1alpha1.MemberRoleLeader)},
			wantHealth: etcd.Healthy, wantReason: v1alpha1.EtcdMemberHealthyReason},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			s := &scope{cpe: &v1alpha1.ControlPlaneEtcd{Status: v1alpha1.ControlPlaneEtcdStatus{Members: tt.members}}, snapshot: tt.snapshot}
			got := etcdMachineObservation(s, unobserved, tt.machine)
			g.Expect(got.health).To(Equal(tt.wantHealth))
			g.Expect(got.reason).To(Equal(tt.wantReason))
		})
	}
}
