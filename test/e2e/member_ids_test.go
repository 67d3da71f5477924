package e2e

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/k3s"
)

// K3s publishes no etcd member IDs on Nodes, so pkg/k3s keys members by a hash of the member
// name. etcd has its own ID for the same member (etcdctl member list): a person must never see
// the hash, or one member shows two IDs.
var _ = Describe("Member IDs on a K3s control plane", func() {
	It("are never shown: the status, status.removal and the Events of a removal name the member by name and Node", func(ctx SpecContext) {
		c := startK3sCluster(ctx, k3sOptions{version: "v1.34.2+k3s1"})
		c.expectMembers(ctx, 3)
		notEtcds := madeUpIDs(ctx, c)
		doomed := c.machines["cp-2"]
		member := c.workload.Etcd.MemberOnNode("cp-2")

		By("status.members carry names and Nodes and no member ID")
		for _, m := range c.status(ctx).Status.Members {
			Expect(m.ID).To(BeEmpty(), "member %s on Node %s", m.Name, m.NodeName)
			Expect(m.Name).NotTo(BeEmpty())
			Expect(m.NodeName).NotTo(BeEmpty())
		}

		By("deleting Machine " + doomed.Name + ": the member is removed, recorded and told by name and Node")
		Expect(mgmt.Client.Delete(ctx, doomed)).To(Succeed())
		c.expectGone(ctx, doomed)
		c.expectMembers(ctx, 2)
		c.expectRemoved(ctx, doomed)
		rec := c.status(ctx).Status.Removal
		Expect(rec.Member).To(Equal(member.Name()))
		Expect(rec.NodeName).To(Equal("cp-2"))
		Expect(rec.MemberID).To(BeEmpty(), "K3s shows no etcd member ID, so none is recorded")
		// Note: the recorder writes Events asynchronously; the Machine going does not wait for them.
		Eventually(func() []corev1.Event { return eventsAbout(ctx, doomed) }, reconcileTimeout).Should(ContainElement(And(
			HaveField("Reason", v1alpha1.EventMemberRemoving), HaveField("Message", ContainSubstring(fmt.Sprintf("Removing etcd member %s of Node cp-2:", member.Name()))))))
		expectNoMadeUpIDs(ctx, c, doomed, notEtcds)
	}, SpecTimeout(4*time.Minute))

	It("a removal in flight that an earlier version recorded with the made-up ID completes against the same member after the upgrade", func(ctx SpecContext) {
		c := startK3sCluster(ctx, k3sOptions{version: "v1.34.2+k3s1"})
		c.expectMembers(ctx, 3)
		doomed := c.machines["cp-2"]
		member := c.workload.Etcd.MemberOnNode("cp-2")
		w := watchRemoval(ctx, c, doomed)

		By("stopping K3s's member controller, so the removal stays in flight")
		sim := c.workload.Simulator
		sim.StopMemberController()
		DeferCleanup(func(ctx context.Context) error { return sim.StartMemberController(ctx) })
		Expect(mgmt.Client.Delete(ctx, doomed)).To(Succeed())
		var started metav1.Time
		Eventually(func(g Gomega) {
			rec := c.status(ctx).Status.Removal
			g.Expect(rec).NotTo(BeNil())
			g.Expect(rec.MachineName).To(Equal(doomed.Name))
			g.Expect(rec.Result).To(Equal(v1alpha1.RemovalInProgress))
			started = rec.StartTime
		}, deletionTimeout).Should(Succeed(), "the removal must be asked and recorded")

		By("stopping etcd-adapter and writing the record as the earlier version did, with the made-up ID, as a clusterctl upgrade finds it")
		Expect(adapter.Stop()).To(Succeed())
		cpe := c.status(ctx)
		before := cpe.DeepCopy()
		old := fmt.Sprintf("%x", k3s.MemberID(member.Name()))
		cpe.Status.Removal.MemberID = old
		Expect(mgmt.Client.Status().Patch(ctx, cpe, client.MergeFrom(before))).To(Succeed())
		Expect(c.status(ctx).Status.Removal).To(HaveValue(And(HaveField("MemberID", old), HaveField("Member", member.Name()))))

		By("starting the new etcd-adapter, then K3s's member controller: the same member is removed and the hook released")
		var err error
		adapter, err = startAdapter(context.Background(), mgmt, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(sim.StartMemberController(ctx)).To(Succeed())
		c.expectGone(ctx, doomed)
		var violation string
		Eventually(w.done, reconcileTimeout).Should(Receive(&violation))
		Expect(violation).To(BeEmpty())
		Expect(memberIDs(ctx, c)).To(Equal(w.others), "exactly the deleted Machine's member must be gone")
		c.expectMembers(ctx, 2)
		c.expectRemoved(ctx, doomed)
		Expect(c.status(ctx).Status.Removal).To(HaveValue(And(HaveField("Member", member.Name()), HaveField("NodeName", "cp-2"),
			HaveField("MemberID", BeEmpty()), HaveField("StartTime", started))),
			"the record in flight is continued, not made anew, and no longer shows the made-up ID")
	}, SpecTimeout(5*time.Minute))
})

// madeUpIDs are the IDs pkg/k3s gives the cluster's members (hashes of their names), in the
// hexadecimal the status and Events would use, each with the member it stands for.
func madeUpIDs(ctx context.Context, c *testCluster) map[string]string {
	members, err := c.workload.Etcd.MemberList(ctx)
	Expect(err).NotTo(HaveOccurred())
	out := map[string]string{}
	for _, m := range members {
		id := fmt.Sprintf("%x", k3s.MemberID(m.Name))
		Expect(id).NotTo(Equal(fmt.Sprintf("%x", m.ID)), "etcd's own ID for %s", m.Name)
		out[id] = m.Name
	}
	return out
}

// expectNoMadeUpIDs checks that no ID in notEtcds appears where a person looks: the status (its
// members, removal record and conditions) and the Events about the Machine and the
// ControlPlaneEtcd.
func expectNoMadeUpIDs(ctx context.Context, c *testCluster, m *clusterv1.Machine, notEtcds map[string]string) {
	// Note: the recorder writes Events asynchronously, and in the order they were recorded. The
	// ControlPlaneEtcd's HookReleased naming m is the last Event of m's removal flow: once it is
	// written, every Event checked below is.
	Eventually(func() []corev1.Event { return eventsAboutControlPlaneEtcd(ctx, c) }, reconcileTimeout).Should(ContainElement(And(
		HaveField("Reason", v1alpha1.EventHookReleased), HaveField("Message", HavePrefix("Machine "+m.Name+": ")))))
	cpe := c.status(ctx)
	shown := []string{fmt.Sprintf("status %+v", cpe.Status)}
	for _, e := range append(eventsAbout(ctx, m), eventsAboutControlPlaneEtcd(ctx, c)...) {
		shown = append(shown, fmt.Sprintf("Event %s: %s", e.Reason, e.Message))
	}
	Expect(shown).To(ContainElement(ContainSubstring("Event "+v1alpha1.EventMemberRemoving+": ")), "the Events of the removal must be there to check")
	for _, text := range shown {
		for id, name := range notEtcds {
			Expect(strings.Contains(text, id)).To(BeFalse(), "%s shows %s, an ID etcd did not assign to member %s", text, id, name)
		}
	}
}
