package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
)

var _ = Describe("The Machine hook webhook", func() {
	It("puts the hook on a control-plane Machine at creation, so one deleted while etcd-adapter's controllers are down is drained and held before its member is removed", func(ctx SpecContext) {
		c := startKubeadmCluster(ctx, 3, v1alpha1.ModeManage)
		wl := c.workload
		c.expectMembers(ctx, 3)

		By("stopping etcd-adapter's controllers; its webhooks keep answering")
		Expect(adapter.Stop()).To(Succeed())
		webhooks, err := startWebhooksOnly(context.Background(), mgmt)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() error {
			// Later specs need the whole etcd-adapter, also when this one failed half way.
			if err := webhooks.Stop(); err != nil {
				return err
			}
			if adapter.Running() {
				return nil
			}
			adapter, err = startAdapter(context.Background(), mgmt, nil)
			return err
		})

		By("a scale-up: member cp-3 joins and is promoted, its Node registers, and Machine m-cp-3 is created")
		joining, err := c.workload.Etcd.AddLearner(ctx, etcdcluster.MemberSpec{NodeName: "cp-3"})
		Expect(err).NotTo(HaveOccurred())
		Expect(c.workload.Kubeadm.AddNode(ctx, joining)).To(Succeed())
		Expect(c.workload.Etcd.PromoteMember(ctx, joining.Name())).To(Succeed())
		setProviderID(ctx, wl.APIServer.Client, "cp-3", providerIDOf(c.cluster, "cp-3"))
		m := createMachine(ctx, c.cluster, "cp-3")
		Expect(m.Annotations).To(HaveKeyWithValue(v1alpha1.PreTerminateHookAnnotation, v1alpha1.PreTerminateHookValue),
			"the webhook must put the hook on the Machine as it is created")
		waitForNodeRef(ctx, m, "cp-3")
		pod := createPod(ctx, wl.APIServer.Client, "cp-3")

		By("deleting Machine m-cp-3 while no etcd-adapter controller runs: Cluster API drains its Node, then waits on the hook; the member stays")
		Expect(mgmt.Client.Delete(ctx, m)).To(Succeed())
		Eventually(func(g Gomega) {
			got := &clusterv1.Machine{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
			g.Expect(deletingReason(got)).To(Equal(clusterv1.MachineDeletingWaitingForPreTerminateHookReason))
		}, deletionTimeout).Should(Succeed())
		Expect(apierrors.IsNotFound(wl.APIServer.Client.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}))).To(BeTrue(), "the Node must be drained")
		Consistently(func(g Gomega) {
			got := &clusterv1.Machine{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
			g.Expect(got.Annotations).To(HaveKey(v1alpha1.PreTerminateHookAnnotation))
			g.Expect(memberIDs(ctx, c)).To(ContainElement(joining.ID()))
		}, 3*time.Second, time.Second).Should(Succeed(), "the hook holds the drained Machine while no controller runs")

		By("etcd-adapter's controllers start again: the member is removed, then the hook released and the Machine goes")
		Expect(webhooks.Stop()).To(Succeed())
		adapter, err = startAdapter(context.Background(), mgmt, nil)
		Expect(err).NotTo(HaveOccurred())
		c.expectGone(ctx, m)
		Expect(memberIDs(ctx, c)).NotTo(ContainElement(joining.ID()))
		c.expectMembers(ctx, 3)
		// Note: the recorder writes HookReleased asynchronously, after the hook went, so it can
		// still be unwritten when the Machine is gone.
		Eventually(func() []string { return eventReasons(ctx, m.Namespace, m.Name) }, reconcileTimeout).Should(
			ContainElements(v1alpha1.EventMemberRemoved, v1alpha1.EventHookReleased))
	}, SpecTimeout(5*time.Minute))
})

// deletingReason is the reason of the Machine's Deleting condition.
func deletingReason(m *clusterv1.Machine) string {
	for _, c := range m.Status.Conditions {
		if c.Type == clusterv1.MachineDeletingCondition {
			return c.Reason
		}
	}
	return ""
}
