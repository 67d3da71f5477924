package e2e

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/reconcilers/controlplaneetcd"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
)

// holdHook is a pre-terminate hook of another controller, which etcd-adapter waits for: a test
// holds a deleting Machine with it until the situation it sets up is in place.
const holdHook = clusterv1.PreTerminateDeleteHookAnnotationPrefix + "/e2e-hold"

var _ = Describe("A hook is released only on proof", func() {
	It("keeps the hook and the member of a deleting kubeadm Machine blocked on quorum whose Node object is deleted", func(ctx SpecContext) {
		c := startKubeadmCluster(ctx, 3, v1alpha1.ModeManage)
		c.expectMembers(ctx, 3)
		doomed := c.machines["cp-1"]
		doomedID := c.workload.Etcd.MemberOnNode("cp-1").ID()

		By("deleting Machine m-cp-1 while etcd is healthy, held by another hook, then stopping the member on cp-0")
		deleteHeld(ctx, doomed)
		Expect(c.workload.Etcd.StopMember(ctx, c.workload.Etcd.MemberOnNode("cp-0").Name())).To(Succeed())
		releaseHold(ctx, doomed)
		expectProgressing(ctx, c, v1alpha1.ProgressingRemovalBlockedReason, doomed.Name)

		By("deleting Node cp-1 and its etcd mirror Pod (the member keeps running): the member still belongs to Machine m-cp-1")
		deleteNodeObject(ctx, c, "cp-1")
		Eventually(func(g Gomega) {
			g.Expect(c.status(ctx).Status.Members).To(ContainElement(And(HaveField("Name", "cp-1"), HaveField("NodeName", ""))))
		}, reconcileTimeout).Should(Succeed(), "etcd-adapter must observe the member of cp-1 on no Node")
		Consistently(func(g Gomega) {
			got := &clusterv1.Machine{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(doomed), got)).To(Succeed(), "Machine m-cp-1 must not be let go")
			g.Expect(got.Annotations).To(HaveKeyWithValue(v1alpha1.PreTerminateHookAnnotation, v1alpha1.PreTerminateHookValue))
			g.Expect(memberIDs(ctx, c)).To(ContainElement(doomedID))
		}, 5*time.Second, time.Second).Should(Succeed(), "the hook must stay while etcd still lists the member")
	}, SpecTimeout(4*time.Minute))

	It("never takes the member of a running kubeadm Machine whose Node object was deleted for a ghost", func(ctx SpecContext) {
		c := startKubeadmCluster(ctx, 3, v1alpha1.ModeManage)
		c.expectMembers(ctx, 3)
		id := c.workload.Etcd.MemberOnNode("cp-2").ID()

		By("deleting Node cp-2 and its etcd mirror Pod while Machine m-cp-2 runs")
		deleteNodeObject(ctx, c, "cp-2")
		Eventually(func(g Gomega) {
			members := c.status(ctx).Status.Members
			g.Expect(slices.ContainsFunc(members, func(m v1alpha1.EtcdMemberStatus) bool { return m.Name == "cp-2" && m.NodeName == "" }) ||
				!slices.Contains(memberIDs(ctx, c), id)).To(BeTrue())
		}, reconcileTimeout).Should(Succeed(), "etcd-adapter must observe the member of cp-2 on no Node")
		// Note: the recorder writes Events asynchronously, so the absence of GhostMemberRemoved is
		// checked all along the window, not once at its end.
		Consistently(func(g Gomega) {
			g.Expect(memberIDsWith(ctx, g, c)).To(ContainElement(id), "ghost clean-up must not remove the member of a running Machine")
			g.Expect(eventReasons(ctx, c.cpe.Namespace, c.cpe.Name)).NotTo(ContainElement(v1alpha1.EventGhostMemberRemoved))
		}, 5*time.Second, time.Second).Should(Succeed())
	}, SpecTimeout(4*time.Minute))

	It("keeps the hook of a Machine without a Node whose member joined until that member is removed", func(ctx SpecContext) {
		c := startKubeadmCluster(ctx, 3, v1alpha1.ModeManage)
		c.expectMembers(ctx, 3)

		By("Machine cp-3 is created and its member joins as a learner, but its Node never registers")
		m, err := env.CreateControlPlaneMachine(ctx, mgmt.Client, env.MachineInput{Cluster: c.cluster, Name: "cp-3", ProviderID: providerIDOf(c.cluster, "cp-3")})
		Expect(err).NotTo(HaveOccurred())
		learner, err := c.workload.Etcd.AddLearner(ctx, etcdcluster.MemberSpec{NodeName: "cp-3"})
		Expect(err).NotTo(HaveOccurred())
		Expect(learner.Name()).To(Equal(m.Name), "kubeadm names the member after the host, here the Machine's name")
		Eventually(func(g Gomega) {
			got := &clusterv1.Machine{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
			g.Expect(got.Annotations).To(HaveKeyWithValue(v1alpha1.PreTerminateHookAnnotation, v1alpha1.PreTerminateHookValue))
			g.Expect(got.Status.NodeRef.Name).To(BeEmpty())
		}, reconcileTimeout).Should(Succeed())

		By("deleting it: its member is removed before the hook goes")
		Expect(mgmt.Client.Delete(ctx, m)).To(Succeed())
		Eventually(func() error {
			return mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), &clusterv1.Machine{})
		}, deletionTimeout).Should(Satisfy(apierrors.IsNotFound))
		Expect(memberIDs(ctx, c)).NotTo(ContainElement(learner.ID()))
		// Note: the recorder writes Events asynchronously; the Machine going does not wait for them.
		Eventually(func() []corev1.Event { return eventsAbout(ctx, m) }, reconcileTimeout).Should(ContainElement(And(
			HaveField("Reason", v1alpha1.EventMemberRemoved), HaveField("Message", ContainSubstring("cp-3")))),
			"the Machine's own removal flow must remove its member")
		rec := c.status(ctx).Status.Removal
		Expect(rec).NotTo(BeNil())
		Expect(rec.MachineName).To(Equal(m.Name))
		Expect(rec.MemberID).To(Equal(memberIDHex(learner)))
		Expect(rec.Result).To(Equal(v1alpha1.RemovalRemoved))
	}, SpecTimeout(4*time.Minute))

	It("writes the removal record before K3s is asked: a manager stopped right after remove=true leaves it InProgress, and the next one confirms it", func(ctx SpecContext) {
		c := startK3sCluster(ctx, k3sOptions{version: "v1.34.2+k3s1"})
		c.expectMembers(ctx, 3)
		doomed := c.machines["cp-2"]
		member := c.workload.Etcd.MemberOnNode("cp-2")

		var rec *v1alpha1.MemberRemovalStatus
		crashAtChecking(ctx, controlplaneetcd.StepRemovalRequested, func() { Expect(mgmt.Client.Delete(ctx, doomed)).To(Succeed()) }, func() {
			rec = c.status(ctx).Status.Removal
		})
		Expect(rec).NotTo(BeNil(), "status.removal must be written before the backend is asked")
		Expect(rec.MachineName).To(Equal(doomed.Name))
		Expect(rec.Member).To(Equal(member.Name()))
		Expect(rec.Result).To(Equal(v1alpha1.RemovalInProgress))

		By("the next etcd-adapter confirms the removal through K3s's evidence and releases")
		c.expectGone(ctx, doomed)
		c.expectMembers(ctx, 2)
		c.expectRemoved(ctx, doomed)
		Expect(c.status(ctx).Status.Removal.Member).To(Equal(member.Name()))
	}, SpecTimeout(4*time.Minute))

	It("closes the removal record before the hook goes: a manager stopped right after the release leaves no record InProgress", func(ctx SpecContext) {
		c := startKubeadmCluster(ctx, 3, v1alpha1.ModeManage)
		c.expectMembers(ctx, 3)
		doomed := c.machines["cp-2"]

		crashAt(ctx, controlplaneetcd.StepHookReleased, func() { Expect(mgmt.Client.Delete(ctx, doomed)).To(Succeed()) })
		c.expectGone(ctx, doomed)
		c.expectMembers(ctx, 2)
		c.expectRemoved(ctx, doomed)
	}, SpecTimeout(4*time.Minute))
})

var _ = Describe("The repair path", func() {
	It("removes the broken member of a Machine deleted to replace it while the Machine held longest is blocked on quorum", func(ctx SpecContext) {
		c := startKubeadmCluster(ctx, 3, v1alpha1.ModeManage)
		c.expectMembers(ctx, 3)
		healthy, broken := c.machines["cp-0"], c.machines["cp-2"]
		brokenID := c.workload.Etcd.MemberOnNode("cp-2").ID()

		By("Machine m-cp-0 is deleting when the member on cp-2 fails: removing m-cp-0's member now would lose quorum")
		deleteHeld(ctx, healthy)
		Expect(c.workload.Etcd.StopMember(ctx, c.workload.Etcd.MemberOnNode("cp-2").Name())).To(Succeed())
		releaseHold(ctx, healthy)
		expectProgressing(ctx, c, v1alpha1.ProgressingRemovalBlockedReason, healthy.Name)

		By("a person deletes Machine m-cp-2 to replace the broken member: its member is removed first, then m-cp-0's")
		Expect(mgmt.Client.Delete(ctx, broken)).To(Succeed())
		c.expectGone(ctx, broken)
		Expect(memberIDs(ctx, c)).NotTo(ContainElement(brokenID))
		c.expectGone(ctx, healthy)
		c.expectMembers(ctx, 1)
	}, SpecTimeout(5*time.Minute))
})

// deleteHeld deletes the Machine while another controller's pre-terminate hook holds it, so
// etcd-adapter does not start its removal yet.
func deleteHeld(ctx context.Context, m *clusterv1.Machine) {
	patchAnnotation(ctx, m, holdHook, "")
	Expect(mgmt.Client.Delete(ctx, m)).To(Succeed())
	Eventually(func(g Gomega) {
		got := &clusterv1.Machine{}
		g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
		g.Expect(deletingReason(got)).To(Equal(clusterv1.MachineDeletingWaitingForPreTerminateHookReason))
	}, deletionTimeout).Should(Succeed(), "Cluster API must drain Machine %s and wait on its pre-terminate hooks", m.Name)
}

// releaseHold takes the other controller's hook off the Machine.
func releaseHold(ctx context.Context, m *clusterv1.Machine) {
	Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), m)).To(Succeed())
	before := m.DeepCopy()
	delete(m.Annotations, holdHook)
	Expect(mgmt.Client.Patch(ctx, m, client.MergeFrom(before))).To(Succeed())
}

// expectProgressing waits until Progressing has the reason and its message names the Machine.
func expectProgressing(ctx context.Context, c *testCluster, reason, machine string) {
	Eventually(func(g Gomega) {
		cond := findCondition(c.status(ctx), v1alpha1.ProgressingCondition)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Reason).To(Equal(reason))
		g.Expect(cond.Message).To(ContainSubstring(machine))
	}, reconcileTimeout).Should(Succeed())
}

// deleteNodeObject deletes the workload Node object and kubeadm's etcd mirror Pod on it (the
// garbage collector deletes a mirror Pod with its Node; none runs here), while the member and the
// kubelet stand-in keep running.
func deleteNodeObject(ctx context.Context, c *testCluster, node string) {
	wl := c.workload.APIServer.Client
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: "etcd-" + node}}
	Expect(client.IgnoreNotFound(wl.Delete(ctx, pod, client.GracePeriodSeconds(0)))).To(Succeed())
	Expect(wl.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})).To(Succeed())
	Eventually(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(wl.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{}))).To(BeTrue())
		g.Expect(apierrors.IsNotFound(wl.Get(ctx, client.ObjectKey{Name: node}, &corev1.Node{}))).To(BeTrue())
	}, reconcileTimeout).Should(Succeed())
}

// memberIDHex is the member's ID as status.removal writes it.
func memberIDHex(m *etcdcluster.Member) string {
	return strconv.FormatUint(m.ID(), 16)
}

// crashAtChecking is crashAt with capture run while the stopping etcd-adapter is held at step,
// before it is stopped; capture only reads (the test asserts afterwards, with an etcd-adapter
// running again).
func crashAtChecking(ctx context.Context, step string, trigger, capture func()) {
	Expect(adapter.Stop()).To(Succeed())
	reached := make(chan struct{})
	var once sync.Once
	crashing, err := startAdapter(context.Background(), mgmt, func(rctx context.Context, s string) {
		if s != step {
			return
		}
		once.Do(func() { close(reached) })
		<-rctx.Done()
	})
	Expect(err).NotTo(HaveOccurred())
	trigger()
	Eventually(reached, deletionTimeout).Should(BeClosed(), "etcd-adapter must reach step %s", step)
	capture()
	Expect(crashing.Stop()).To(Succeed())
	adapter, err = startAdapter(context.Background(), mgmt, nil)
	Expect(err).NotTo(HaveOccurred())
}
