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

var _ = Describe("The retry-removal annotation on a Machine whose member removal stopped", func() {
	It("retries a removal K3s rejected once the cause is fixed: the member is removed, the hook released, the Machine gone", func(ctx SpecContext) {
		c := startK3sCluster(ctx, k3sOptions{version: "v1.34.2+k3s1"})
		c.expectMembers(ctx, 3)
		doomed := c.machines["cp-2"]
		member := c.workload.Etcd.MemberOnNode("cp-2")
		node := &corev1.Node{}
		Expect(c.workload.APIServer.Client.Get(ctx, client.ObjectKey{Name: "cp-2"}, node)).To(Succeed())
		address := node.Annotations[k3sNodeAddress]
		Expect(address).NotTo(BeEmpty())

		By("changing Node cp-2's address after its member joined: K3s finds no member to remove, claims it removed one, and the removal stops as Rejected")
		Expect(c.workload.Simulator.ChangeAddress(ctx, "cp-2", "127.0.0.99")).To(Succeed())
		Expect(mgmt.Client.Delete(ctx, doomed)).To(Succeed())
		var rejected v1alpha1.MemberRemovalStatus
		Eventually(func(g Gomega) {
			rec := c.status(ctx).Status.Removal
			g.Expect(rec).NotTo(BeNil())
			g.Expect(rec.MachineName).To(Equal(doomed.Name))
			g.Expect(rec.Result).To(Equal(v1alpha1.RemovalRejected))
			rejected = *rec
		}, deletionTimeout).Should(Succeed(), "the removal must stop as Rejected")
		Expect(memberIDs(ctx, c)).To(ContainElement(member.ID()), "no member was removed")
		// Note: the recorder writes the Event asynchronously, after the pass that stopped the
		// removal and wrote the status awaited above.
		Eventually(func() []corev1.Event { return eventsAbout(ctx, doomed) }, reconcileTimeout).Should(ContainElement(And(HaveField("Reason", v1alpha1.EventMemberRemovalRejected),
			HaveField("Message", ContainSubstring(v1alpha1.RetryRemovalAnnotation)))), "the rejection must say how to retry")

		By("fixing the cause: the Node gets its member's address back")
		Expect(c.workload.Simulator.ChangeAddress(ctx, "cp-2", address)).To(Succeed())
		Eventually(func(g Gomega) {
			n := &corev1.Node{}
			g.Expect(c.workload.APIServer.Client.Get(ctx, client.ObjectKey{Name: "cp-2"}, n)).To(Succeed())
			g.Expect(n.Annotations).To(HaveKeyWithValue(k3sNodeAddress, address))
			g.Expect(n.Annotations).To(HaveKeyWithValue(k3sRemovedNodeName, member.Name()), "K3s's false claim is still on the Node")
		}, reconcileTimeout).Should(Succeed())
		Expect(c.status(ctx).Status.Removal.Result).To(Equal(v1alpha1.RemovalRejected), "nothing retries on its own")

		By("a person asks for a retry: the member is removed, the hook released and the Machine deleted")
		patchAnnotation(ctx, doomed, v1alpha1.RetryRemovalAnnotation, v1alpha1.AnnotationTrue)
		Eventually(func(g Gomega) {
			ids := memberIDsWith(ctx, g, c)
			if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(doomed), &clusterv1.Machine{}); apierrors.IsNotFound(err) && slices.Contains(ids, member.ID()) {
				StopTrying(fmt.Sprintf("Machine %s was deleted while its etcd member %x is still a member", doomed.Name, member.ID())).Now()
			}
			g.Expect(ids).NotTo(ContainElement(member.ID()), "the retried removal must remove member %s", member.Name())
		}, deletionTimeout).Should(Succeed())
		c.expectGone(ctx, doomed)
		c.expectMembers(ctx, 2)

		By("the status and the Events tell the retry: the stopped attempt, the retry, a new attempt that ended Removed")
		rec := c.status(ctx).Status.Removal
		Expect(rec).NotTo(BeNil())
		Expect(rec.MachineName).To(Equal(doomed.Name))
		Expect(rec.Result).To(Equal(v1alpha1.RemovalRemoved), "status.removal: %+v", *rec)
		Expect(rec.StartTime.Time).To(BeTemporally(">=", rejected.EndTime.Time), "the retry is a new attempt, with its own start")
		// Note: the recorder writes HookReleased asynchronously, after the hook went, so it can
		// still be unwritten when the Machine is gone. The ControlPlaneEtcd's Retried Event below
		// was recorded before it by the same recorder, which writes in order: once HookReleased is
		// there, so is it.
		Eventually(func() []string {
			var reasons []string
			for _, e := range eventsAbout(ctx, doomed) {
				reasons = append(reasons, e.Reason)
			}
			return reasons
		}, reconcileTimeout).Should(ContainElements(v1alpha1.EventMemberRemovalRejected, v1alpha1.EventMemberRemovalRetried,
			v1alpha1.EventRetryRemovalTakenOff, v1alpha1.EventHookReleased))
		Expect(eventsAboutControlPlaneEtcd(ctx, c)).To(ContainElement(And(HaveField("Reason", v1alpha1.EventMemberRemovalRetried),
			HaveField("Message", And(ContainSubstring("Machine "+doomed.Name), ContainSubstring("stopped as Rejected"))))))

		By("a retry annotation on a Machine that is not being deleted is taken off, saying why")
		bystander := c.machines["cp-0"]
		patchAnnotation(ctx, bystander, v1alpha1.RetryRemovalAnnotation, v1alpha1.AnnotationTrue)
		Eventually(func(g Gomega) {
			got := &clusterv1.Machine{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(bystander), got)).To(Succeed())
			g.Expect(got.Annotations).NotTo(HaveKey(v1alpha1.RetryRemovalAnnotation))
		}, reconcileTimeout).Should(Succeed(), "the retry annotation must be taken off a Machine that has nothing to retry")
		// Note: Events are written by the recorder after the patch, asynchronously.
		Eventually(func() []corev1.Event { return eventsAbout(ctx, bystander) }, reconcileTimeout).Should(ContainElement(And(HaveField("Reason", v1alpha1.EventRetryRemovalTakenOff),
			HaveField("Message", ContainSubstring("not being deleted")))))
	}, SpecTimeout(6*time.Minute))

	It("retries a removal that timed out with a new clock: the new request is carried out once K3s acts again", func(ctx SpecContext) {
		c := startK3sCluster(ctx, k3sOptions{version: "v1.34.2+k3s1"})
		c.expectMembers(ctx, 3)
		doomed := c.machines["cp-2"]
		member := c.workload.Etcd.MemberOnNode("cp-2")
		setRemovalTimeout := func(d time.Duration) {
			cpe := c.status(ctx)
			before := cpe.DeepCopy()
			cpe.Spec.MemberRemovalTimeout = &metav1.Duration{Duration: d}
			Expect(mgmt.Client.Patch(ctx, cpe, client.MergeFrom(before))).To(Succeed())
		}
		setRemovalTimeout(3 * time.Second)

		By("stopping K3s's member controller, so the removal request is not carried out and times out")
		sim := c.workload.Simulator
		sim.StopMemberController()
		DeferCleanup(func(ctx context.Context) error { return sim.StartMemberController(ctx) })
		Expect(mgmt.Client.Delete(ctx, doomed)).To(Succeed())
		var timedOut v1alpha1.MemberRemovalStatus
		Eventually(func(g Gomega) {
			rec := c.status(ctx).Status.Removal
			g.Expect(rec).NotTo(BeNil())
			g.Expect(rec.MachineName).To(Equal(doomed.Name))
			g.Expect(rec.Result).To(Equal(v1alpha1.RemovalTimedOut))
			timedOut = *rec
		}, deletionTimeout).Should(Succeed(), "the removal must stop as TimedOut")

		By("raising the limit and asking for a retry while K3s still does not act: the new attempt is under way on a new clock")
		setRemovalTimeout(10 * time.Minute)
		patchAnnotation(ctx, doomed, v1alpha1.RetryRemovalAnnotation, v1alpha1.AnnotationTrue)
		Eventually(func(g Gomega) {
			rec := c.status(ctx).Status.Removal
			g.Expect(rec).NotTo(BeNil())
			g.Expect(rec.MachineName).To(Equal(doomed.Name))
			g.Expect(rec.Result).To(Equal(v1alpha1.RemovalInProgress))
			g.Expect(rec.StartTime.Time).To(BeTemporally(">=", timedOut.EndTime.Time))
			got := &clusterv1.Machine{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(doomed), got)).To(Succeed())
			g.Expect(got.Annotations).NotTo(HaveKey(v1alpha1.RetryRemovalAnnotation))
		}, reconcileTimeout).Should(Succeed(), "the retried removal must be under way, with its own start")
		Expect(memberIDs(ctx, c)).To(ContainElement(member.ID()))

		By("K3s's member controller comes back: the member is removed, the hook released, the Machine gone")
		Expect(sim.StartMemberController(ctx)).To(Succeed())
		c.expectGone(ctx, doomed)
		Expect(memberIDs(ctx, c)).NotTo(ContainElement(member.ID()))
		c.expectMembers(ctx, 2)
		Expect(c.status(ctx).Status.Removal).To(HaveValue(And(HaveField("MachineName", doomed.Name), HaveField("Result", v1alpha1.RemovalRemoved))))
		// Note: the recorder writes the Event asynchronously; the Machine going does not wait for it.
		Eventually(func() []corev1.Event { return eventsAbout(ctx, doomed) }, reconcileTimeout).Should(ContainElement(And(
			HaveField("Reason", v1alpha1.EventMemberRemovalRetried), HaveField("Message", ContainSubstring("stopped as TimedOut")))))
	}, SpecTimeout(6*time.Minute))
})

// k3sNodeAddress is where K3s keeps a member's advertise IP (k3s pkg/etcd/etcd.go).
const k3sNodeAddress = "etcd.k3s.cattle.io/node-address"

// eventsAboutControlPlaneEtcd lists the Events about the cluster's ControlPlaneEtcd.
func eventsAboutControlPlaneEtcd(ctx context.Context, c *testCluster) []corev1.Event {
	list := &corev1.EventList{}
	Expect(mgmt.Client.List(ctx, list, client.InNamespace(c.cpe.Namespace))).To(Succeed())
	var out []corev1.Event
	for _, e := range list.Items {
		if e.InvolvedObject.Kind == v1alpha1.ControlPlaneEtcdKind && e.InvolvedObject.Name == c.cpe.Name {
			out = append(out, e)
		}
	}
	return out
}
