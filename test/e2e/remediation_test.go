package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/provider"
	"github.com/etcd-adapter/etcd-adapter/pkg/k3s"
)

var _ = Describe("Remediation with MachineHealthCheck marking Machines", func() {
	// markedByMHC creates a MachineHealthCheck on the control plane and waits until it marked
	// the Machines for remediation.
	markedByMHC := func(ctx context.Context, c *testCluster, condition corev1.NodeConditionType, status corev1.ConditionStatus, machines ...*clusterv1.Machine) {
		createMHC(ctx, c, clusterv1.MachineHealthCheckChecks{UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{{
			Type: condition, Status: status, TimeoutSeconds: ptr.To[int32](1),
		}}}, machines...)
	}
	// mayRemediate is the test provider's remediation gate on a fresh observation.
	mayRemediate := func(ctx context.Context, c *testCluster, m *clusterv1.Machine) func(Gomega) string {
		view, err := k3s.Start(ctx, c.workload.APIServer.Config, k3s.Config{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(view.Stop)
		p := &testProvider{cluster: c.cluster, etcd: view}
		return func(g Gomega) string {
			machines, err := p.machines(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			snap, err := view.Observe(ctx)
			v := provider.MayRemediate(provider.Observation{Snapshot: snap, Err: err, Machines: machines}, m)
			return v.Reason + ": " + v.Message
		}
	}

	It("remediates the one unhealthy Machine of three: its member is removed after the drain", func(ctx SpecContext) {
		c := startK3sCluster(ctx, k3sOptions{version: "v1.34.2+k3s1"})
		c.expectMembers(ctx, 3)
		sick := c.machines["cp-2"]
		Expect(c.workload.Etcd.StopMember(ctx, c.workload.Etcd.MemberOnNode("cp-2").Name())).To(Succeed())
		Expect(c.workload.Kubelet("cp-2").SetNotReady(ctx, corev1.ConditionFalse, "KubeletNotReady")).To(Succeed())
		markedByMHC(ctx, c, corev1.NodeReady, corev1.ConditionFalse, sick)
		gate := mayRemediate(ctx, c, sick)
		Eventually(gate, reconcileTimeout).Should(HavePrefix(v1alpha1.MemberRemovalSafeReason))
		Expect(mgmt.Client.Delete(ctx, sick)).To(Succeed())
		c.expectGone(ctx, sick)
		c.expectMembers(ctx, 2)
	}, SpecTimeout(4*time.Minute))

	It("refuses to remediate either of two unhealthy Machines whose members are both down (their Nodes NotReady: whether quorum holds is unknown), with the reason; once a person restarts one member, remediates the other", func(ctx SpecContext) {
		c := startK3sCluster(ctx, k3sOptions{version: "v1.34.2+k3s1"})
		c.expectMembers(ctx, 3)
		restarted, sick := c.machines["cp-1"], c.machines["cp-2"]
		restartedMember := c.workload.Etcd.MemberOnNode("cp-1").Name()
		before := memberIDs(ctx, c)
		for _, node := range []string{"cp-1", "cp-2"} {
			Expect(c.workload.Etcd.StopMember(ctx, c.workload.Etcd.MemberOnNode(node).Name())).To(Succeed())
			Expect(c.workload.Kubelet(node).SetNotReady(ctx, corev1.ConditionFalse, "KubeletNotReady")).To(Succeed())
		}
		markedByMHC(ctx, c, corev1.NodeReady, corev1.ConditionFalse, restarted, sick)
		Eventually(func(g Gomega) {
			cond := findCondition(c.status(ctx), v1alpha1.AvailableCondition)
			g.Expect(cond).NotTo(BeNil())
			// Note: K3s on a NotReady Node stops reporting, so its member may be Unknown rather than
			// known to be down: with 1 of 3 healthy, quorum is lost when both are known down, and
			// unknown while either is Unknown.
			g.Expect(cond.Reason).To(BeElementOf(v1alpha1.AvailableQuorumUnknownReason, v1alpha1.AvailableQuorumLostReason))
		}, reconcileTimeout).Should(Succeed())

		By("asking to remediate each: with 3 voters and 1 healthy, no membership change is known to commit")
		for _, m := range []*clusterv1.Machine{restarted, sick} {
			gate := mayRemediate(ctx, c, m)
			Eventually(gate, reconcileTimeout).Should(And(
				Or(HavePrefix(v1alpha1.MemberRemovalHealthUnknownReason), HavePrefix(v1alpha1.MemberRemovalQuorumLostReason)), ContainSubstring("1 of 3 voters are healthy")))
			err := mgmt.Client.Delete(ctx, m)
			Expect(err).To(HaveOccurred(), "the quorum guard must refuse remediating Machine %s", m.Name)
			Expect(err.Error()).To(Or(ContainSubstring("("+v1alpha1.MemberRemovalHealthUnknownReason+")"), ContainSubstring("("+v1alpha1.MemberRemovalQuorumLostReason+")")))
		}

		By("a person restarts the member on cp-1: one member is down, so only its Machine may be remediated")
		Expect(c.workload.Etcd.Member(restartedMember).Restart(ctx)).To(Succeed())
		Expect(c.workload.Kubelet("cp-1").SetReady(ctx)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(c.status(ctx).Status.HealthyVoters).To(HaveValue(BeEquivalentTo(2)))
		}, reconcileTimeout).Should(Succeed())
		Expect(memberIDs(ctx, c)).To(Equal(before), "nothing was removed while quorum was not known to hold")
		Eventually(mayRemediate(ctx, c, restarted), reconcileTimeout).Should(And(HavePrefix(v1alpha1.MemberRemovalWouldLoseQuorumReason), ContainSubstring("1 of 2 voters are healthy")))
		Eventually(mayRemediate(ctx, c, sick), reconcileTimeout).Should(HavePrefix(v1alpha1.MemberRemovalSafeReason))
		Expect(mgmt.Client.Delete(ctx, sick)).To(Succeed())
		c.expectGone(ctx, sick)
		c.expectMembers(ctx, 2)
	}, SpecTimeout(4*time.Minute))

	It("remediates the one of two marked Machines whose member is broken, refuses the other while that member is down, and remediates it after a replacement joined", func(ctx SpecContext) {
		c := startK3sCluster(ctx, k3sOptions{version: "v1.34.2+k3s1"})
		c.expectMembers(ctx, 3)
		broken, marked := c.machines["cp-2"], c.machines["cp-1"]

		By("cp-2's member stops and its Node goes NotReady; cp-1's Node reports a network problem while its member stays healthy")
		Expect(c.workload.Etcd.StopMember(ctx, c.workload.Etcd.MemberOnNode("cp-2").Name())).To(Succeed())
		Expect(c.workload.Kubelet("cp-2").SetNotReady(ctx, corev1.ConditionFalse, "KubeletNotReady")).To(Succeed())
		setNodeCondition(ctx, c, "cp-1", corev1.NodeNetworkUnavailable, corev1.ConditionTrue)
		createMHC(ctx, c, clusterv1.MachineHealthCheckChecks{UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: ptr.To[int32](1)},
			{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue, TimeoutSeconds: ptr.To[int32](1)},
		}}, broken, marked)

		By("only cp-2 may go: removing cp-1's healthy member would leave 1 of 2 voters healthy")
		Eventually(mayRemediate(ctx, c, broken), reconcileTimeout).Should(HavePrefix(v1alpha1.MemberRemovalSafeReason))
		Eventually(mayRemediate(ctx, c, marked), reconcileTimeout).Should(And(HavePrefix(v1alpha1.MemberRemovalWouldLoseQuorumReason), ContainSubstring("1 of 2 voters are healthy")))
		err := mgmt.Client.Delete(ctx, marked)
		Expect(err).To(HaveOccurred(), "the quorum guard must refuse remediating Machine %s first", marked.Name)
		Expect(err.Error()).To(ContainSubstring(v1alpha1.MemberRemovalWouldLoseQuorumReason))
		Expect(mgmt.Client.Delete(ctx, broken)).To(Succeed())
		c.expectGone(ctx, broken)
		c.expectMembers(ctx, 2)

		By("the provider replaces it, as KubeadmControlPlane does before the next remediation: a new server joins on cp-3")
		_, err = c.workload.K3s.JoinServer(ctx, "cp-3", "127.0.0.13")
		Expect(err).NotTo(HaveOccurred())
		c.machines["cp-3"] = bindMachine(ctx, c.cluster, c.workload.APIServer.Client, "cp-3")
		c.waitForHooks(ctx)
		c.expectMembers(ctx, 3)

		By("cp-1 is remediated now: two other healthy members remain")
		Eventually(mayRemediate(ctx, c, marked), reconcileTimeout).Should(HavePrefix(v1alpha1.MemberRemovalSafeReason))
		Expect(mgmt.Client.Delete(ctx, marked)).To(Succeed())
		c.expectGone(ctx, marked)
		c.expectMembers(ctx, 2)
	}, SpecTimeout(6*time.Minute))

	It("refuses to remediate a Machine while a different member is unresponsive, with the reason", func(ctx SpecContext) {
		c := startK3sCluster(ctx, k3sOptions{version: "v1.34.2+k3s1"})
		c.expectMembers(ctx, 3)
		unresponsive := c.workload.Etcd.MemberOnNode("cp-0").Name()
		sick := c.machines["cp-1"]
		Expect(c.workload.Etcd.StopMember(ctx, unresponsive)).To(Succeed())
		// The Machine is unhealthy for the MachineHealthCheck (memory pressure) while its etcd
		// member is healthy, as in the KCP proposal's scenario.
		setNodeCondition(ctx, c, "cp-1", corev1.NodeMemoryPressure, corev1.ConditionTrue)
		markedByMHC(ctx, c, corev1.NodeMemoryPressure, corev1.ConditionTrue, sick)
		gate := mayRemediate(ctx, c, sick)
		Eventually(gate, reconcileTimeout).Should(And(HavePrefix(v1alpha1.MemberRemovalWouldLoseQuorumReason), ContainSubstring("1 of 2 voters are healthy")))
		err := mgmt.Client.Delete(ctx, sick)
		Expect(err).To(HaveOccurred(), "the quorum guard must refuse the remediation too")
		Expect(err.Error()).To(ContainSubstring(unresponsive))
	}, SpecTimeout(3*time.Minute))
})

// createMHC creates a MachineHealthCheck with the checks on the control plane and waits until it
// marked the Machines for remediation.
func createMHC(ctx context.Context, c *testCluster, checks clusterv1.MachineHealthCheckChecks, machines ...*clusterv1.Machine) {
	mhc := &clusterv1.MachineHealthCheck{
		ObjectMeta: metav1.ObjectMeta{Namespace: c.cluster.Namespace, Name: "control-plane"},
		Spec: clusterv1.MachineHealthCheckSpec{
			ClusterName: c.cluster.Name,
			Selector:    metav1.LabelSelector{MatchLabels: map[string]string{clusterv1.MachineControlPlaneLabel: ""}},
			Checks:      checks,
		},
	}
	Expect(mgmt.Client.Create(ctx, mhc)).To(Succeed())
	for _, m := range machines {
		Eventually(func(g Gomega) {
			got := &clusterv1.Machine{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
			g.Expect(conditions.IsFalse(got, clusterv1.MachineOwnerRemediatedCondition)).To(BeTrue())
		}, reconcileTimeout).Should(Succeed(), "MachineHealthCheck must mark Machine %s", m.Name)
	}
}

func setNodeCondition(ctx context.Context, c *testCluster, node string, t corev1.NodeConditionType, status corev1.ConditionStatus) {
	n := &corev1.Node{}
	Expect(c.workload.APIServer.Client.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
	before := n.DeepCopy()
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: t, Status: status, Reason: "Test",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()})
	Expect(c.workload.APIServer.Client.Status().Patch(ctx, n, client.MergeFrom(before))).To(Succeed())
}
