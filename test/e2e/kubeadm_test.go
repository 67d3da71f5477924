package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

var _ = Describe("kubeadm flavour", func() {
	startKubeadm := func(ctx context.Context, mode v1alpha1.Mode) *testCluster {
		return startKubeadmCluster(ctx, 3, mode)
	}

	It("reports members, leader and cluster ID in Observe mode and holds no Machine; reports a ghost learner, and removes it once in Manage mode", func(ctx SpecContext) {
		c := startKubeadm(ctx, v1alpha1.ModeObserve)
		c.expectMembers(ctx, 3)
		cpe := c.status(ctx)
		Expect(cpe.Status.ClusterID).NotTo(BeEmpty())
		Expect(cpe.Status.Leader).NotTo(BeEmpty())
		Expect(cpe.Status.Voters).To(HaveValue(BeEquivalentTo(3)))
		for _, m := range c.machines {
			got := m.DeepCopy()
			Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
			Expect(got.Annotations).NotTo(HaveKey(v1alpha1.PreTerminateHookAnnotation), "Observe mode leaves Machines to KCP")
		}

		By("adding a learner that never starts and that no Machine hosts")
		ghostID, _, err := c.workload.Etcd.AddGhostLearner(ctx)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			cond := findCondition(c.status(ctx), v1alpha1.EtcdClusterHealthyCondition)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Reason).To(Equal(v1alpha1.EtcdClusterNotHealthyReason))
			g.Expect(cond.Message).To(ContainSubstring("never started"))
		}, reconcileTimeout).Should(Succeed())
		Expect(memberIDs(ctx, c)).To(ContainElement(ghostID), "Observe mode removes nothing")

		By("switching to Manage mode: the ghost is removed")
		cpe = c.status(ctx)
		original := cpe.DeepCopy()
		cpe.Spec.Mode = v1alpha1.ModeManage
		Expect(mgmt.Client.Patch(ctx, cpe, client.MergeFrom(original))).To(Succeed())
		Eventually(func() []uint64 { return memberIDs(ctx, c) }, reconcileTimeout).ShouldNot(ContainElement(ghostID))
		Expect(memberIDs(ctx, c)).To(HaveLen(3))
		c.expectMembers(ctx, 3)
		// Note: the recorder writes the Event asynchronously, after the removal awaited above.
		Eventually(func() []string { return eventReasons(ctx, cpe.Namespace, cpe.Name) }, reconcileTimeout).Should(ContainElement(v1alpha1.EventGhostMemberRemoved))
	}, SpecTimeout(3*time.Minute))

	It("in Manage mode moves leadership off the leader's Machine before removing its member", func(ctx SpecContext) {
		c := startKubeadm(ctx, v1alpha1.ModeManage)
		c.expectMembers(ctx, 3)
		leader := c.status(ctx).Status.Leader
		doomed := c.machines[leader]
		Expect(doomed).NotTo(BeNil(), "the leader %s must be on a Machine's Node", leader)
		before := memberIDs(ctx, c)
		doomedID := c.workload.Etcd.MemberOnNode(leader).ID()
		By("status.members show etcd's own member IDs")
		etcdIDs := map[string]string{}
		for _, m := range c.workload.Etcd.Members() {
			etcdIDs[m.Name()] = fmt.Sprintf("%x", m.ID())
		}
		for _, m := range c.status(ctx).Status.Members {
			Expect(m.ID).To(Equal(etcdIDs[m.Name]), "member %s", m.Name)
		}

		Expect(mgmt.Client.Delete(ctx, doomed)).To(Succeed())
		c.expectGone(ctx, doomed)
		c.expectMembers(ctx, 2)
		Expect(memberIDs(ctx, c)).NotTo(ContainElement(doomedID))
		Expect(memberIDs(ctx, c)).To(HaveLen(len(before) - 1))
		Expect(c.status(ctx).Status.Leader).NotTo(Equal(leader))
		// Note: the recorder writes HookReleased asynchronously, after the hook went, so it can
		// still be unwritten when the Machine is gone. It writes Events in order: the
		// MemberRemoved Event read below was recorded before HookReleased.
		Eventually(func() []string { return eventReasons(ctx, doomed.Namespace, doomed.Name) }, reconcileTimeout).Should(
			ContainElements(v1alpha1.EventLeaderMoved, v1alpha1.EventMemberRemoved, v1alpha1.EventHookReleased))
		By("status.removal and the removal's Event show etcd's ID of the removed member")
		Expect(c.status(ctx).Status.Removal).To(HaveValue(HaveField("MemberID", fmt.Sprintf("%x", doomedID))))
		Expect(eventsAbout(ctx, doomed)).To(ContainElement(And(HaveField("Reason", v1alpha1.EventMemberRemoved),
			HaveField("Message", ContainSubstring(fmt.Sprintf("(%x) of Node %s", doomedID, leader))))))
	}, SpecTimeout(4*time.Minute))

	It("shows a member whose etcd stopped as not healthy at once, not at the next observation", func(ctx SpecContext) {
		c := startKubeadm(ctx, v1alpha1.ModeObserve)
		c.expectMembers(ctx, 3)

		By("observing only every 10 minutes from now on")
		cpe := c.status(ctx)
		original := cpe.DeepCopy()
		cpe.Spec.ObservationInterval = &metav1.Duration{Duration: 10 * time.Minute}
		Expect(mgmt.Client.Patch(ctx, cpe, client.MergeFrom(original))).To(Succeed())
		Eventually(func(g Gomega) {
			got := c.status(ctx)
			g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		}, reconcileTimeout).Should(Succeed(), "the pass the change started must have written its status")
		c.expectMembers(ctx, 3)
		By("waiting until Cluster API stopped updating the Cluster and its Machines (each update starts a pass)")
		Eventually(func(g Gomega) {
			before := c.resourceVersions(ctx)
			g.Consistently(func() map[string]string { return c.resourceVersions(ctx) }).WithTimeout(5 * time.Second).Should(Equal(before))
		}, 2*time.Minute).Should(Succeed())

		By("stopping the etcd of a member that does not lead")
		leader := c.status(ctx).Status.Leader
		node := c.workload.Nodes[0]
		if node == leader {
			node = c.workload.Nodes[1]
		}
		Expect(c.workload.Etcd.MemberOnNode(node).Stop()).To(Succeed())
		// Note: nothing else changes (no Node, Machine or Cluster event), and the next periodic
		// observation is 10 minutes away: only the end of the backend's kept connection to the
		// member can start the pass that sees it.
		Eventually(func(g Gomega) {
			var health v1alpha1.MemberHealth
			for _, m := range c.status(ctx).Status.Members {
				if m.NodeName == node {
					health = m.Health
				}
			}
			g.Expect(health).NotTo(BeEmpty(), "the member of Node %s must be in the status", node)
			g.Expect(health).NotTo(Equal(v1alpha1.MemberHealthy))
		}, time.Minute).Should(Succeed())
	}, SpecTimeout(4*time.Minute))
})

// resourceVersions are the resourceVersions of the Cluster and its Machines, by name.
func (c *testCluster) resourceVersions(ctx context.Context) map[string]string {
	out := map[string]string{}
	cluster := &clusterv1.Cluster{}
	Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(c.cluster), cluster)).To(Succeed())
	out["Cluster "+cluster.Name] = cluster.ResourceVersion
	for _, m := range c.machines {
		got := &clusterv1.Machine{}
		Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
		out["Machine "+got.Name] = got.ResourceVersion
	}
	return out
}

// eventReasons lists the reasons of the Events about the named object.
func eventReasons(ctx context.Context, namespace, name string) []string {
	list := &corev1.EventList{}
	Expect(mgmt.Client.List(ctx, list, client.InNamespace(namespace))).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name {
			out = append(out, e.Reason)
		}
	}
	return out
}
