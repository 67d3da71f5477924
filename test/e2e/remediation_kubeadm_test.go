package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
)

var _ = Describe("Remediation on a kubeadm control plane", func() {
	startKubeadm := func(ctx context.Context, members int) *testCluster {
		return startKubeadmCluster(ctx, members, v1alpha1.ModeManage)
	}

	It("remediates an unhealthy Machine during a rollout whose new member is still a learner, refuses a healthy one, and the rollout then completes", func(ctx SpecContext) {
		c := startKubeadm(ctx, 3)
		c.expectMembers(ctx, 3)

		By("a rollout adds Machine m-cp-3: its member joins as a learner, its Node registers, and the learner is not promoted yet")
		// Note: Cluster API creates a Machine before its Node joins, so a joining member is never
		// without a Machine. Here the stand-in kubelet registers the Node before the Machine
		// exists (Cluster API binds a Machine to a Node that has its providerID when the Machine
		// is created), so etcd-adapter only observes meanwhile and cannot act on that order.
		c.setMode(ctx, v1alpha1.ModeObserve)
		joining, err := c.workload.Etcd.AddLearner(ctx, etcdcluster.MemberSpec{NodeName: "cp-3"})
		Expect(err).NotTo(HaveOccurred())
		Expect(c.workload.Kubeadm.AddNode(ctx, joining)).To(Succeed())
		c.machines["cp-3"] = bindMachine(ctx, c.cluster, c.workload.APIServer.Client, "cp-3")
		c.setMode(ctx, v1alpha1.ModeManage)
		c.waitForHooks(ctx)
		Expect(memberIDs(ctx, c)).To(ContainElement(joining.ID()))

		By("the member on cp-2 fails and a MachineHealthCheck marks its Machine")
		sick, healthy := c.machines["cp-2"], c.machines["cp-1"]
		Expect(c.workload.Etcd.StopMember(ctx, c.workload.Etcd.MemberOnNode("cp-2").Name())).To(Succeed())
		Expect(c.workload.Kubelet("cp-2").SetNotReady(ctx, corev1.ConditionFalse, "KubeletNotReady")).To(Succeed())
		createMHC(ctx, c, clusterv1.MachineHealthCheckChecks{UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{{
			Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: ptr.To[int32](1)}}}, sick)

		By("asking the quorum guard (etcd.CanRemediate on a fresh observation): removing the failed voter keeps a healthy majority even if the learner is promoted; removing a healthy one does not")
		Eventually(func() string { return guardVerdict(ctx, healthy) }, reconcileTimeout).Should(And(
			ContainSubstring(v1alpha1.MemberRemovalWouldLoseQuorumReason), ContainSubstring("1 of 2 voters are healthy, and 1 learner(s) may be promoted at any moment")))
		Eventually(func() string { return guardVerdict(ctx, sick) }, reconcileTimeout).Should(BeEmpty())

		By("remediating Machine m-cp-2 during the rollout: drained, its member removed, the hook released")
		failedID := c.workload.Etcd.MemberOnNode("cp-2").ID()
		Expect(mgmt.Client.Delete(ctx, sick)).To(Succeed())
		c.expectGone(ctx, sick)
		Expect(memberIDs(ctx, c)).NotTo(ContainElement(failedID))
		Expect(memberIDs(ctx, c)).To(ContainElement(joining.ID()), "the learner of the rollout stays")

		By("the rollout completes: the learner is promoted")
		Expect(c.workload.Etcd.PromoteMember(ctx, joining.Name())).To(Succeed())
		c.expectMembers(ctx, 3)
	}, SpecTimeout(5*time.Minute))

	It("releases the hook of a Machine whose Node never registered after a failed 1→2 join, and then removes the learner the join left", func(ctx SpecContext) {
		c := startKubeadm(ctx, 1)
		c.expectMembers(ctx, 1)

		By("a scale-up 1→2 fails: Machine m-cp-1's Node never registers, and its learner (peer URL on the Node's address) never starts")
		failed := createMachine(ctx, c.cluster, "cp-1")
		learnerID, _, err := c.workload.Etcd.AddGhostLearnerOn(ctx, "127.0.0.51")
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			got := &clusterv1.Machine{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(failed), got)).To(Succeed())
			g.Expect(got.Annotations).To(HaveKeyWithValue(v1alpha1.PreTerminateHookAnnotation, v1alpha1.PreTerminateHookValue))
		}, reconcileTimeout).Should(Succeed(), "the provisioning Machine must carry the hook too")
		Eventually(func(g Gomega) {
			cond := findCondition(c.status(ctx), v1alpha1.EtcdClusterHealthyCondition)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(cond.Message).To(ContainSubstring("never started"))
		}, reconcileTimeout).Should(Succeed())
		Consistently(func() []uint64 { return memberIDs(ctx, c) }, 3*time.Second, time.Second).Should(ContainElement(learnerID),
			"nothing is removed while a Machine is provisioning")

		By("a MachineHealthCheck marks Machine m-cp-1: its Node did not start in time")
		createMHC(ctx, c, clusterv1.MachineHealthCheckChecks{NodeStartupTimeoutSeconds: ptr.To[int32](1)}, failed)
		Eventually(func() string { return guardVerdict(ctx, failed) }, reconcileTimeout).Should(BeEmpty(),
			"a Machine without a Node hosts no member the guard must protect")

		By("remediating it: the hook is released without a member removal, the Machine goes, and the learner is removed")
		Expect(mgmt.Client.Delete(ctx, failed)).To(Succeed())
		Eventually(func() error {
			return mgmt.Client.Get(ctx, client.ObjectKeyFromObject(failed), &clusterv1.Machine{})
		}, deletionTimeout).Should(Satisfy(apierrors.IsNotFound))
		// Note: the recorder writes HookReleased asynchronously, after the hook went, so it can
		// still be unwritten when the Machine is gone.
		Eventually(func() []corev1.Event { return eventsAbout(ctx, failed) }, reconcileTimeout).Should(ContainElement(And(
			HaveField("Reason", v1alpha1.EventHookReleased), HaveField("Message", ContainSubstring("never had a Node")))))
		Eventually(func() []uint64 { return memberIDs(ctx, c) }, reconcileTimeout).ShouldNot(ContainElement(learnerID))
		c.expectMembers(ctx, 1)
		// Note: the recorder writes the Event asynchronously, after the removal awaited above.
		Eventually(func() []string { return eventReasons(ctx, c.cpe.Namespace, c.cpe.Name) }, reconcileTimeout).Should(ContainElement(v1alpha1.EventGhostMemberRemoved))
	}, SpecTimeout(4*time.Minute))
})

// setMode sets the ControlPlaneEtcd's spec.mode.
//
// It returns once a pass has written the status for the new spec: passes of one
// ControlPlaneEtcd never overlap, so no pass that read the old mode is still running then. A
// change made right after a bare patch could otherwise meet a pass of the old mode (a learner
// added after switching to Observe was removed as a ghost by the Manage pass under way).
func (c *testCluster) setMode(ctx context.Context, mode v1alpha1.Mode) {
	c.changeSpec(ctx, func(spec *v1alpha1.ControlPlaneEtcdSpec) { spec.Mode = mode }, "mode "+string(mode))
}

// changeSpec patches the ControlPlaneEtcd's spec with change and returns once a pass has written
// the status for the new generation (what names the change in a failure).
func (c *testCluster) changeSpec(ctx context.Context, change func(*v1alpha1.ControlPlaneEtcdSpec), what string) {
	cpe := c.status(ctx)
	before := cpe.DeepCopy()
	change(&cpe.Spec)
	Expect(mgmt.Client.Patch(ctx, cpe, client.MergeFrom(before))).To(Succeed())
	Eventually(func(g Gomega) {
		got := &v1alpha1.ControlPlaneEtcd{}
		g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cpe), got)).To(Succeed())
		g.Expect(got.Status.ObservedGeneration).To(BeNumerically(">=", cpe.Generation))
	}, reconcileTimeout).Should(Succeed(), "a pass for %s", what)
}

// guardVerdict asks the quorum guard about deleting the Machine (a server dry-run, so nothing is
// deleted) and returns its refusal, or "" when it allowed the deletion without a warning. A
// deletion it allowed with a warning (etcd could not be observed, e.g. an observation that timed out)
// is returned as "warning: ...", so callers polling for a clear answer keep polling.
func guardVerdict(ctx context.Context, m *clusterv1.Machine) string {
	cfg := rest.CopyConfig(mgmt.Config)
	w := &warningCollector{}
	cfg.WarningHandler = w
	dyn, err := dynamic.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	err = dyn.Resource(clusterv1.GroupVersion.WithResource("machines")).Namespace(m.Namespace).
		Delete(ctx, m.Name, metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return err.Error()
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.texts) > 0 {
		return fmt.Sprintf("warning: %v", w.texts)
	}
	return ""
}
