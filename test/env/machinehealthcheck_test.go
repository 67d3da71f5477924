package env

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestMachineHealthCheck_seesWorkloadNodes checks that Cluster API's MachineHealthCheck
// controller runs and reads the workload Nodes through the ClusterCache: both control-plane
// Machines are expected and counted healthy.
func TestMachineHealthCheck_seesWorkloadNodes(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := sharedPair(t)
	cluster := registerTestCluster(ctx, t, p)
	createBoundMachine(ctx, t, p, cluster, "cp-0", nil)
	createBoundMachine(ctx, t, p, cluster, "cp-1", nil)

	mhc := &clusterv1.MachineHealthCheck{
		ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: "control-plane"},
		Spec: clusterv1.MachineHealthCheckSpec{
			ClusterName: cluster.Name,
			Selector: metav1.LabelSelector{MatchLabels: map[string]string{
				clusterv1.MachineControlPlaneLabel: "",
			}},
			Checks: clusterv1.MachineHealthCheckChecks{
				UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{{
					Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: ptr.To[int32](300),
				}},
			},
		},
	}
	g.Expect(p.mgmt.Client.Create(ctx, mhc)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(p.mgmt.Client.Get(ctx, client.ObjectKeyFromObject(mhc), mhc)).To(Succeed())
		g.Expect(mhc.Status.ExpectedMachines).To(HaveValue(BeEquivalentTo(2)))
		g.Expect(mhc.Status.CurrentHealthy).To(HaveValue(BeEquivalentTo(2)))
	}, reconcileTimeout).Should(Succeed())
}
