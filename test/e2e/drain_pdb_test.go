package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// Cluster API's drain has no timeout by default (Machine spec.deletion.nodeDrainTimeoutSeconds
// unset): it evicts through the Eviction API and retries a refused eviction every 20 s
// (core/reconcilers/machine/machine_controller.go and its drain package, Cluster API v1.14.2), so a PodDisruptionBudget that allows no disruption holds
// a Machine in DrainingNode for as long as the budget stands. No disruption controller runs
// in this suite, so the budget's status never allows one: the workload apiserver refuses every
// eviction of the Pod, as a real cluster does for minAvailable equal to the ready Pods.
var _ = Describe("A control-plane Machine whose drain hangs on a PodDisruptionBudget", func() {
	It("does not hold up the removal of another deleting Machine's member; its own member is removed once the drain ends", func(ctx SpecContext) {
		c := startKubeadmCluster(ctx, 3, v1alpha1.ModeManage)
		wl := c.workload
		c.expectMembers(ctx, 3)
		nodeA, nodeC := wl.Nodes[0], wl.Nodes[2]
		a, cm := c.machines[nodeA], c.machines[nodeC]
		idA, idC := wl.Etcd.MemberOnNode(nodeA).ID(), wl.Etcd.MemberOnNode(nodeC).ID()

		By("a Pod on Node " + nodeA + " under a PodDisruptionBudget that allows no eviction")
		pod := createPod(ctx, wl.APIServer.Client, nodeA)
		Expect(wl.APIServer.Client.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
		pod.Labels = map[string]string{"app": "held"}
		Expect(wl.APIServer.Client.Update(ctx, pod)).To(Succeed())
		pdb := &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: "held"},
			Spec: policyv1.PodDisruptionBudgetSpec{
				MinAvailable: ptr.To(intstr.FromInt32(1)),
				Selector:     &metav1.LabelSelector{MatchLabels: pod.Labels},
			},
		}
		Expect(wl.APIServer.Client.Create(ctx, pdb)).To(Succeed())
		createPod(ctx, wl.APIServer.Client, nodeC)

		By("deleting Machine A: Cluster API drains its Node and the eviction is refused")
		Expect(deleteMachine(ctx, a)).To(BeEmpty())
		Eventually(func(g Gomega) {
			got := &clusterv1.Machine{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(a), got)).To(Succeed())
			cond := conditions.Get(got, clusterv1.MachineDeletingCondition)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Reason).To(Equal(clusterv1.MachineDeletingDrainingNodeReason))
			g.Expect(cond.Message).To(ContainSubstring(pod.Name), "the drain names the Pod it cannot evict")
		}, deletionTimeout).Should(Succeed())

		By("deleting Machine C meanwhile: its Node is drained, its member removed, and C goes, while A still drains")
		Expect(deleteMachine(ctx, cm)).To(BeEmpty())
		c.expectGone(ctx, cm)
		Expect(wl.Kubelet(nodeC).Stop()).To(Succeed())
		c.expectRemoved(ctx, cm)
		members := memberIDs(ctx, c)
		Expect(members).NotTo(ContainElement(idC), "C's member is removed")
		Expect(members).To(ContainElement(idA), "A's member stays while its drain is not over")
		got := &clusterv1.Machine{}
		Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(a), got)).To(Succeed())
		Expect(got.Annotations).To(HaveKey(v1alpha1.PreTerminateHookAnnotation), "A keeps etcd-adapter's hook")
		Expect(conditions.Get(got, clusterv1.MachineDeletingCondition).Reason).To(Equal(clusterv1.MachineDeletingDrainingNodeReason))

		By("the budget is deleted: A's drain ends, its member is removed, then A goes")
		Expect(wl.APIServer.Client.Delete(ctx, pdb)).To(Succeed())
		c.expectGone(ctx, a)
		Expect(wl.Kubelet(nodeA).Stop()).To(Succeed())
		c.expectRemoved(ctx, a)
		Expect(memberIDs(ctx, c)).To(Equal([]uint64{wl.Etcd.MemberOnNode(wl.Nodes[1]).ID()}))
	}, SpecTimeout(8*time.Minute))
})
