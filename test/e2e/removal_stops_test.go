package e2e

import (
	"context"
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

var _ = Describe("A member removal that stops", func() {
	// releasedBy is what a person writes in the release annotation: only the explicit value
	// releases.
	const releasedBy = v1alpha1.ReleaseHookValue

	// expectStopped waits until the removal of the Machine's member stopped with the result,
	// and checks that the status, the Machine's Events and the kept hook say so.
	expectStopped := func(ctx context.Context, c *testCluster, m *clusterv1.Machine, result v1alpha1.RemovalResult, progressing, event, why string) {
		memberID := c.workload.Etcd.MemberOnNode(m.Status.NodeRef.Name).ID()
		Eventually(func(g Gomega) {
			cpe := c.status(ctx)
			if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), &clusterv1.Machine{}); apierrors.IsNotFound(err) {
				StopTrying(fmt.Sprintf("the hook was released and Machine %s deleted while its etcd member %x is still a member (%v); status.removal: %+v",
					m.Name, memberID, slices.Contains(memberIDs(ctx, c), memberID), cpe.Status.Removal)).Now()
			}
			g.Expect(cpe.Status.Removal).NotTo(BeNil())
			g.Expect(cpe.Status.Removal.MachineName).To(Equal(m.Name))
			g.Expect(cpe.Status.Removal.Result).To(Equal(result))
			g.Expect(cpe.Status.Removal.Message).To(ContainSubstring(why))
			cond := findCondition(cpe, v1alpha1.ProgressingCondition)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(cond.Reason).To(Equal(progressing))
			g.Expect(cond.Message).To(ContainSubstring(v1alpha1.ReleaseHookAnnotation))
		}, deletionTimeout).Should(Succeed(), "the removal of Machine %s's member must stop as %s", m.Name, result)
		Eventually(func() []corev1.Event { return eventsAbout(ctx, m) }, reconcileTimeout).Should(ContainElement(And(
			HaveField("Reason", event), HaveField("Type", corev1.EventTypeWarning),
			HaveField("Message", And(ContainSubstring("Keeping the pre-terminate hook"), ContainSubstring(v1alpha1.ReleaseHookAnnotation))))))
		Consistently(func(g Gomega) {
			got := &clusterv1.Machine{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
			g.Expect(got.Annotations).To(HaveKeyWithValue(v1alpha1.PreTerminateHookAnnotation, v1alpha1.PreTerminateHookValue))
			g.Expect(c.status(ctx).Status.Removal.Result).To(Equal(result))
		}, 5*time.Second, time.Second).Should(Succeed(), "the hook must be kept and the removal not retried on its own")
	}
	// expectReleased releases the hook with the annotation and waits until the Machine is gone.
	expectReleased := func(ctx context.Context, c *testCluster, m *clusterv1.Machine) {
		patchAnnotation(ctx, m, v1alpha1.ReleaseHookAnnotation, releasedBy)
		Eventually(func() error {
			return mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), &clusterv1.Machine{})
		}, deletionTimeout).Should(Satisfy(apierrors.IsNotFound), "the Machine must be deleted once a person released its hook")
		// Note: the recorder writes HookReleasedByAnnotation asynchronously, after the hook went,
		// so it can still be unwritten when the Machine is gone.
		Eventually(func() []corev1.Event { return eventsAbout(ctx, m) }, reconcileTimeout).Should(ContainElement(And(
			HaveField("Type", corev1.EventTypeWarning), HaveField("Reason", v1alpha1.EventHookReleasedByAnnotation),
			HaveField("Message", ContainSubstring(v1alpha1.ReleaseHookAnnotation)))))
	}
	// expectReleaseRecorded checks that status.removal records the person's release, as
	// docs/operations.md promises ("records Released with your text in status.removal").
	expectReleaseRecorded := func(ctx context.Context, c *testCluster, m *clusterv1.Machine) {
		rec := c.status(ctx).Status.Removal
		Expect(rec).NotTo(BeNil())
		Expect(rec.MachineName).To(Equal(m.Name))
		Expect(rec.Result).To(Equal(v1alpha1.RemovalReleased), "status.removal must say that a person released the hook; it is %+v", *rec)
		Expect(rec.Message).To(ContainSubstring(releasedBy), "status.removal must say the release annotation released the hook")
	}

	It("keeps the hook of a removal that waits longer than spec.memberRemovalTimeout, says why, and lets a person release it", func(ctx SpecContext) {
		c := startK3sCluster(ctx, k3sOptions{version: "v1.34.2+k3s1"})
		c.expectMembers(ctx, 3)
		const limit = 3 * time.Second
		cpe := c.status(ctx)
		before := cpe.DeepCopy()
		cpe.Spec.MemberRemovalTimeout = &metav1.Duration{Duration: limit}
		Expect(mgmt.Client.Patch(ctx, cpe, client.MergeFrom(before))).To(Succeed())

		By("stopping K3s's member controller, so the removal request is never carried out")
		sim := c.workload.Simulator
		sim.StopMemberController()
		DeferCleanup(func(ctx context.Context) error { return sim.StartMemberController(ctx) })
		doomed := c.machines["cp-2"]
		Expect(mgmt.Client.Delete(ctx, doomed)).To(Succeed())
		expectStopped(ctx, c, doomed, v1alpha1.RemovalTimedOut, v1alpha1.ProgressingRemovalTimedOutReason, v1alpha1.EventMemberRemovalTimedOut,
			"waited longer than "+limit.String())

		By("a person releases the hook: the Machine goes")
		expectReleased(ctx, c, doomed)

		By("K3s's member controller comes back: the Node's finalizer removes the member and lets the Node go")
		Expect(sim.StartMemberController(ctx)).To(Succeed())
		Eventually(func() error {
			return c.workload.APIServer.Client.Get(ctx, client.ObjectKey{Name: "cp-2"}, &corev1.Node{})
		}, reconcileTimeout).Should(Satisfy(apierrors.IsNotFound))
		delete(c.machines, "cp-2")
		c.expectMembers(ctx, 2)
		expectReleaseRecorded(ctx, c, doomed)
	}, SpecTimeout(4*time.Minute))

	It("keeps the hook of a removal K3s rejected, says why, and lets a person release it", func(ctx SpecContext) {
		c := startK3sCluster(ctx, k3sOptions{version: "v1.34.2+k3s1"})
		c.expectMembers(ctx, 3)
		before := memberIDs(ctx, c)

		By("changing Node cp-2's address after its member joined: K3s then finds no member to remove and claims it removed one")
		Expect(c.workload.Simulator.ChangeAddress(ctx, "cp-2", "127.0.0.99")).To(Succeed())
		doomed := c.machines["cp-2"]
		Expect(mgmt.Client.Delete(ctx, doomed)).To(Succeed())
		expectStopped(ctx, c, doomed, v1alpha1.RemovalRejected, v1alpha1.ProgressingRemovalRejectedReason, v1alpha1.EventMemberRemovalRejected,
			"is still running")
		Expect(memberIDs(ctx, c)).To(Equal(before), "no member is removed")

		By("a person releases the hook: the Machine and its Node go")
		expectReleased(ctx, c, doomed)
		c.expectGone(ctx, doomed)
		Expect(memberIDs(ctx, c)).To(Equal(before), "a release removes no member; the person handles it")
		expectReleaseRecorded(ctx, c, doomed)
	}, SpecTimeout(4*time.Minute))
})

// eventsAbout lists the Events about the Machine.
func eventsAbout(ctx context.Context, m *clusterv1.Machine) []corev1.Event {
	list := &corev1.EventList{}
	Expect(mgmt.Client.List(ctx, list, client.InNamespace(m.Namespace))).To(Succeed())
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == "Machine" && e.InvolvedObject.Name == m.Name {
			out = append(out, e)
		}
	}
	return out
}
