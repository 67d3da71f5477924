package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

var _ = Describe("The quorum guard next to a broken member", func() {
	It("lets clusterctl move of a paused Cluster, a paused Cluster (warning) and a deleting control plane through, and skips only on skip-quorum-guard=true", func(ctx SpecContext) {
		installKThreesControlPlaneCRD(ctx)
		c := startK3sCluster(ctx, k3sOptions{version: "v1.34.2+k3s1"})
		c.expectMembers(ctx, 3)
		healthy := c.machines["cp-0"]

		By("stopping the etcd member on Node cp-2: deleting healthy Machine " + healthy.Name + " would lose quorum")
		Expect(c.workload.Etcd.StopMember(ctx, c.workload.Etcd.MemberOnNode("cp-2").Name())).To(Succeed())
		refused := ContainSubstring("would lose etcd quorum")
		Eventually(func() string { return guardVerdict(ctx, healthy) }, reconcileTimeout).Should(refused)

		By("skip-quorum-guard=false is not a request to skip the guard")
		patchAnnotation(ctx, healthy, v1alpha1.SkipQuorumGuardAnnotation, "false")
		Expect(guardVerdict(ctx, healthy)).To(refused)
		patchAnnotation(ctx, healthy, v1alpha1.SkipQuorumGuardAnnotation, v1alpha1.AnnotationTrue)
		Expect(guardVerdict(ctx, healthy)).To(ContainSubstring("warning: [etcd quorum guard skipped for Machine " + healthy.Name))
		removeAnnotation(ctx, healthy, v1alpha1.SkipQuorumGuardAnnotation)

		By("delete-for-move on a Cluster that is not paused is no way around the guard")
		patchAnnotation(ctx, healthy, v1alpha1.DeleteForMoveAnnotation, "")
		Expect(guardVerdict(ctx, healthy)).To(refused)

		By("clusterctl move pauses the Cluster, then deletes the Machine with delete-for-move: let through")
		setPaused(ctx, c.cluster, true)
		Eventually(func() string { return guardVerdict(ctx, healthy) }, reconcileTimeout).Should(BeEmpty())
		removeAnnotation(ctx, healthy, v1alpha1.DeleteForMoveAnnotation)

		By("a paused Cluster's Machine deleted without it: let through with a warning; unpaused: guarded again")
		Expect(guardVerdict(ctx, healthy)).To(ContainSubstring("the etcd quorum guard does not check the deletion of Machine " + healthy.Name))
		setPaused(ctx, c.cluster, false)
		Eventually(func() string { return guardVerdict(ctx, healthy) }, reconcileTimeout).Should(refused)

		By("the Cluster's control-plane object being deleted: let through")
		cp := &unstructured.Unstructured{}
		cp.SetGroupVersionKind(kthreesControlPlane)
		cp.SetNamespace(c.cluster.Namespace)
		cp.SetName(c.cluster.Name)
		cp.SetFinalizers([]string{"test.etcd-adapter.io/hold"})
		Expect(mgmt.Client.Create(ctx, cp)).To(Succeed())
		Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(c.cluster), c.cluster)).To(Succeed())
		before := c.cluster.DeepCopy()
		c.cluster.Spec.ControlPlaneRef = clusterv1.ContractVersionedObjectReference{APIGroup: kthreesControlPlane.Group, Kind: kthreesControlPlane.Kind, Name: cp.GetName()}
		Expect(mgmt.Client.Patch(ctx, c.cluster, client.MergeFrom(before))).To(Succeed())
		Eventually(func() string { return guardVerdict(ctx, healthy) }, reconcileTimeout).Should(refused)
		Expect(mgmt.Client.Delete(ctx, cp)).To(Succeed())
		DeferCleanup(func(ctx context.Context) {
			Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cp), cp)).To(Succeed())
			cp.SetFinalizers(nil)
			Expect(mgmt.Client.Update(ctx, cp)).To(Succeed())
		})
		Eventually(func() string { return guardVerdict(ctx, healthy) }, reconcileTimeout).Should(BeEmpty())
	}, SpecTimeout(4*time.Minute))

	It("says health unknown, not quorum lost, in the status and the guard's refusal when every member's health is unknown (K3s 1.28.4 checks no member health)", func(ctx SpecContext) {
		c := startK3sCluster(ctx, k3sOptions{version: "v1.28.4+k3s1"})

		By("the status: Available and Degraded Unknown, QuorumUnknown")
		Eventually(func(g Gomega) {
			cpe := c.status(ctx)
			avail, degraded := findCondition(cpe, v1alpha1.AvailableCondition), findCondition(cpe, v1alpha1.DegradedCondition)
			g.Expect(avail).NotTo(BeNil())
			g.Expect(degraded).NotTo(BeNil())
			g.Expect([]string{avail.Reason, string(avail.Status), degraded.Reason, string(degraded.Status)}).To(Equal(
				[]string{v1alpha1.AvailableQuorumUnknownReason, string(metav1.ConditionUnknown), v1alpha1.DegradedQuorumUnknownReason, string(metav1.ConditionUnknown)}), "status: %+v", cpe.Status)
			g.Expect(avail.Message).To(ContainSubstring("0 of 3 voting members are healthy and the health of 3 is unknown"))
		}, reconcileTimeout).Should(Succeed())

		By("the quorum guard: a deletion is refused with a message that says unknown, not lost")
		verdict := guardVerdict(ctx, c.machines["cp-0"])
		Expect(verdict).To(And(ContainSubstring("cannot be shown to keep etcd quorum ("+v1alpha1.MemberRemovalHealthUnknownReason+")"),
			ContainSubstring("whether etcd has quorum is unknown: 0 of 3 voters are healthy (the health of 3 is unknown)")))
		Expect(verdict).NotTo(Or(HavePrefix("warning: "), ContainSubstring("already lost"), ContainSubstring(v1alpha1.MemberRemovalQuorumLostReason)))
	}, SpecTimeout(3*time.Minute))
})

func removeAnnotation(ctx context.Context, m *clusterv1.Machine, key string) {
	Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), m)).To(Succeed())
	before := m.DeepCopy()
	delete(m.Annotations, key)
	Expect(mgmt.Client.Patch(ctx, m, client.MergeFrom(before))).To(Succeed())
}
