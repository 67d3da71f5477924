package backends

import (
	"testing"

	. "github.com/onsi/gomega"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

func TestIsControlPlaneOrEtcdMachine(t *testing.T) {
	tests := []struct {
		name   string
		labels map[string]string
		want   bool
	}{
		{name: "A control-plane Machine is read", labels: map[string]string{clusterv1.ClusterNameLabel: "c", clusterv1.MachineControlPlaneLabel: ""}, want: true},
		{name: "An etcdadm etcd Machine is read", labels: map[string]string{clusterv1.ClusterNameLabel: "c", EtcdClusterLabel: "c-etcd"}, want: true},
		{name: "A MachineDeployment's worker Machine is not read", labels: map[string]string{clusterv1.ClusterNameLabel: "c", clusterv1.MachineDeploymentNameLabel: "md-0", clusterv1.MachineSetNameLabel: "md-0-x"}},
		{name: "A Machine without labels is not read"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			g.Expect(IsControlPlaneOrEtcdMachine(tt.labels)).To(Equal(tt.want))
		})
	}
}
