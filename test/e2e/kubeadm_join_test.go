package e2e

import (
	"context"
	"strconv"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
	"github.com/etcd-adapter/etcd-adapter/test/env/workload"
)

var _ = Describe("A kubeadm control-plane join in Manage mode", func() {
	// joinNode is the joining Node; its address is its own, so that etcd-adapter places the
	// learner on it by its peer URL, as on a real cluster.
	const joinNode, joinIP = "cp-3", "127.0.0.13"

	// provisionMachine creates Machine m-cp-3 and waits until etcd-adapter holds it with its hook:
	// Cluster API creates a Machine well before its host runs kubeadm join (bootstrap data, then
	// the infrastructure), so etcd-adapter knows it is provisioning when the join starts.
	provisionMachine := func(ctx context.Context, c *testCluster) *clusterv1.Machine {
		m := createMachine(ctx, c.cluster, joinNode)
		c.machines[joinNode] = m
		c.waitForHooks(ctx)
		return m
	}

	startJoin := func(ctx context.Context, c *testCluster, order workload.JoinOrder) *workload.Join {
		return c.workload.Kubeadm.NewJoin(workload.JoinOptions{
			Member: etcdcluster.MemberSpec{NodeName: joinNode, IP: joinIP}, Order: order, ProviderID: providerIDOf(c.cluster, joinNode)})
	}

	It("keeps the learner of a Node-first join (no ControlPlaneKubeletLocalMode) while its etcd has not started, with its Machine bound to the Node, and the join completes", func(ctx SpecContext) {
		c := startKubeadmCluster(ctx, 3, v1alpha1.ModeManage)
		c.expectMembers(ctx, 3)

		By("Cluster API creates Machine m-cp-3; kubeadm's kubelet-start registers its Node, and Cluster API binds them")
		m := provisionMachine(ctx, c)
		join := startJoin(ctx, c, workload.JoinNodeFirst)
		Expect(join.RunUntil(ctx, workload.JoinNodeRegistered)).To(Succeed())
		waitForNodeRef(ctx, m, joinNode)

		By("control-plane-join adds the etcd learner; its static Pod has not started (an image pull)")
		Expect(join.RunUntil(ctx, workload.JoinLearnerAdded)).To(Succeed())
		learnerID := join.Member().ID()
		Eventually(func(g Gomega) {
			cpe := &v1alpha1.ControlPlaneEtcd{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(c.cpe), cpe)).To(Succeed())
			cond := findCondition(cpe, v1alpha1.ProgressingCondition)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Reason).To(Equal(v1alpha1.ProgressingWaitingForJoinReason))
			g.Expect(cond.Message).To(ContainSubstring("Machine m-" + joinNode))
			g.Expect(cpe.Status.NotStartedMembers).To(ContainElement(HaveField("ID", strconv.FormatUint(learnerID, 16))))
		}, reconcileTimeout).Should(Succeed(), "Progressing must say the ghost cleanup waits for the join")
		// Note: with every Machine bound, a pass runs on each Machine event and every
		// observationInterval (1 s); a learner taken for a ghost is removed within one pass.
		Consistently(func() []uint64 { return memberIDs(ctx, c) }, 10*observationInterval, observationInterval).Should(ContainElement(learnerID),
			"the learner of a join under way is no ghost")

		By("the etcd static Pod starts and kubeadm promotes the learner: the join completes")
		Expect(join.Run(ctx)).To(Succeed())
		c.waitForHooks(ctx)
		c.expectMembers(ctx, 4)
		Expect(c.status(ctx).Status.NotStartedMembers).To(BeEmpty())
		Expect(eventReasons(ctx, c.cpe.Namespace, c.cpe.Name)).NotTo(ContainElement(v1alpha1.EventGhostMemberRemoved))
	}, SpecTimeout(4*time.Minute))

	It("removes the learner a failed Node-first join left unstarted, once spec.joinTimeout has passed since it was first seen", func(ctx SpecContext) {
		const joinTimeout = 20 * time.Second
		c := startKubeadmCluster(ctx, 3, v1alpha1.ModeManage)
		c.expectMembers(ctx, 3)
		c.setJoinTimeout(ctx, joinTimeout)

		By("Machine m-cp-3's Node registers and is bound; control-plane-join adds the learner, whose etcd never starts")
		m := provisionMachine(ctx, c)
		join := startJoin(ctx, c, workload.JoinNodeFirst)
		Expect(join.RunUntil(ctx, workload.JoinNodeRegistered)).To(Succeed())
		waitForNodeRef(ctx, m, joinNode)
		Expect(join.RunUntil(ctx, workload.JoinLearnerAdded)).To(Succeed())
		learnerID := join.Member().ID()

		var seen v1alpha1.NotStartedMemberStatus
		Eventually(func(g Gomega) {
			cpe := &v1alpha1.ControlPlaneEtcd{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(c.cpe), cpe)).To(Succeed())
			g.Expect(conditionReason(cpe, v1alpha1.ProgressingCondition)).To(Equal(v1alpha1.ProgressingWaitingForJoinReason))
			g.Expect(cpe.Status.NotStartedMembers).To(ContainElement(HaveField("ID", strconv.FormatUint(learnerID, 16)), &seen))
		}, reconcileTimeout).Should(Succeed())
		firstSeen := seen.FirstSeenTime.Time

		By("past spec.joinTimeout the learner counts as left behind by a failed join: it is removed as a ghost")
		Eventually(func() []uint64 { return memberIDs(ctx, c) }, joinTimeout+reconcileTimeout).ShouldNot(ContainElement(learnerID))
		Expect(time.Now()).To(BeTemporally(">=", firstSeen.Add(joinTimeout)), "not before spec.joinTimeout since it was first seen")
		// Note: the recorder writes the Event asynchronously, after the removal awaited above.
		Eventually(func() []string { return eventReasons(ctx, c.cpe.Namespace, c.cpe.Name) }, reconcileTimeout).Should(ContainElement(v1alpha1.EventGhostMemberRemoved))
		Expect(memberIDs(ctx, c)).To(HaveLen(3))
		Eventually(func(g Gomega) {
			cpe := &v1alpha1.ControlPlaneEtcd{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(c.cpe), cpe)).To(Succeed())
			g.Expect(cpe.Status.NotStartedMembers).To(BeEmpty())
			g.Expect(conditionReason(cpe, v1alpha1.ProgressingCondition)).To(Equal(v1alpha1.ProgressingReconciledReason))
			g.Expect(conditionReason(cpe, v1alpha1.AvailableCondition)).To(Equal(v1alpha1.AvailableQuorumHealthyReason))
		}, reconcileTimeout).Should(Succeed(), "Machine m-cp-3 stays without a member: its join failed")
	}, SpecTimeout(4*time.Minute))
})

// setJoinTimeout sets the ControlPlaneEtcd's spec.joinTimeout and returns once a pass has
// written the status for it.
func (c *testCluster) setJoinTimeout(ctx context.Context, d time.Duration) {
	cpe := c.status(ctx)
	before := cpe.DeepCopy()
	cpe.Spec.JoinTimeout = &metav1.Duration{Duration: d}
	Expect(mgmt.Client.Patch(ctx, cpe, client.MergeFrom(before))).To(Succeed())
	Eventually(func(g Gomega) {
		got := &v1alpha1.ControlPlaneEtcd{}
		g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cpe), got)).To(Succeed())
		g.Expect(got.Status.ObservedGeneration).To(BeNumerically(">=", cpe.Generation))
	}, reconcileTimeout).Should(Succeed(), "a pass for spec.joinTimeout %s", d)
}

// conditionReason is the reason of the ControlPlaneEtcd's condition t, or "" without one.
func conditionReason(cpe *v1alpha1.ControlPlaneEtcd, t string) string {
	if cond := findCondition(cpe, t); cond != nil {
		return cond.Reason
	}
	return ""
}
