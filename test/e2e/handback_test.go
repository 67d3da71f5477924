package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

var _ = Describe("Handing a Cluster back", func() {
	It("takes every hook off when the ControlPlaneEtcd leaves Manage mode, releasing a blocked deleting Machine without removing its member; and again when a person opts the Cluster out and deletes its ControlPlaneEtcd", func(ctx SpecContext) {
		c := startKubeadmCluster(ctx, 3, v1alpha1.ModeManage)
		c.expectMembers(ctx, 3)
		blocked, down := c.machines["cp-0"], c.workload.Etcd.MemberOnNode("cp-2")

		By("cp-2's member stops; a person deletes cp-0 past the quorum guard, and its removal is blocked")
		Expect(c.workload.Etcd.StopMember(ctx, down.Name())).To(Succeed())
		patchAnnotation(ctx, blocked, v1alpha1.SkipQuorumGuardAnnotation, "true")
		Expect(mgmt.Client.Delete(ctx, blocked)).To(Succeed())
		Eventually(func(g Gomega) {
			cond := findCondition(c.status(ctx), v1alpha1.ProgressingCondition)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Reason).To(Equal(v1alpha1.ProgressingRemovalBlockedReason))
		}, deletionTimeout).Should(Succeed())
		blockedID := c.workload.Etcd.MemberOnNode("cp-0").ID()

		By("switching the ControlPlaneEtcd to Observe: every hook goes, the blocked Machine is released and its member stays")
		c.setMode(ctx, v1alpha1.ModeObserve)
		c.expectGone(ctx, blocked)
		Expect(memberIDs(ctx, c)).To(ContainElement(blockedID), "in Observe mode etcd-adapter removes no member")
		// Note: the recorder writes HookHandedBack asynchronously, after the hook went, so it can
		// still be unwritten when the Machine is gone.
		Eventually(func() []corev1.Event {
			return eventsOf(ctx, blocked.Namespace, blocked.Name, v1alpha1.EventHookHandedBack)
		}, reconcileTimeout).Should(ContainElement(HaveField("Type", corev1.EventTypeWarning)))
		expectNoHooks(ctx, c, "cp-1", "cp-2")

		By("back in Manage mode the hooks come back; a person opts the Cluster out and deletes its ControlPlaneEtcd: the hooks go again")
		c.setMode(ctx, v1alpha1.ModeManage)
		Eventually(func(g Gomega) {
			for _, node := range []string{"cp-1", "cp-2"} {
				got := &clusterv1.Machine{}
				g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(c.machines[node]), got)).To(Succeed())
				g.Expect(got.Annotations).To(HaveKey(v1alpha1.PreTerminateHookAnnotation))
			}
		}, reconcileTimeout).Should(Succeed())
		cluster := c.cluster.DeepCopy()
		Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)).To(Succeed())
		before := cluster.DeepCopy()
		if cluster.Annotations == nil {
			cluster.Annotations = map[string]string{}
		}
		cluster.Annotations[v1alpha1.OptOutAnnotation] = "true"
		Expect(mgmt.Client.Patch(ctx, cluster, client.MergeFrom(before))).To(Succeed())
		Expect(mgmt.Client.Delete(ctx, c.cpe)).To(Succeed())
		expectNoHooks(ctx, c, "cp-1", "cp-2")
		// Note: this Cluster names no control-plane kind, so it gets no ControlPlaneEtcd by default
		// with or without the opt-out: the second hand-back is for "no ControlPlaneEtcd", a plain
		// HookHandedBack. HookHandedBackOptedOut, for a kind the opt-out switches off, is asserted
		// by the handback controller's TestReconciler_Reconcile. The recorder writes the Event
		// asynchronously, after the hook went.
		Eventually(func() []corev1.Event {
			return eventsOf(ctx, c.machines["cp-1"].Namespace, c.machines["cp-1"].Name, v1alpha1.EventHookHandedBack)
		}, reconcileTimeout).Should(HaveLen(2), "handed back twice: once for Observe mode, once with no ControlPlaneEtcd")
		Expect(eventsOf(ctx, c.machines["cp-1"].Namespace, c.machines["cp-1"].Name, v1alpha1.EventHookHandedBackOptedOut)).To(BeEmpty())
	}, SpecTimeout(6*time.Minute))
})

func expectNoHooks(ctx context.Context, c *testCluster, nodes ...string) {
	Eventually(func(g Gomega) {
		for _, node := range nodes {
			got := &clusterv1.Machine{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(c.machines[node]), got)).To(Succeed())
			g.Expect(got.Annotations).NotTo(HaveKey(v1alpha1.PreTerminateHookAnnotation), "Machine %s", got.Name)
		}
	}, reconcileTimeout).Should(Succeed())
}

// eventsOf lists the Events with the reason recorded on the named object.
func eventsOf(ctx context.Context, namespace, name, reason string) []corev1.Event {
	list := &corev1.EventList{}
	Expect(mgmt.Client.List(ctx, list, client.InNamespace(namespace))).To(Succeed())
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Name == name && e.Reason == reason {
			out = append(out, e)
		}
	}
	return out
}
