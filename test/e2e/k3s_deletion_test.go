package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

var _ = Describe("kubectl delete machine on a K3s control plane", func() {
	It("refuses a deletion that would lose quorum naming the unhealthy member, then drains and removes the broken member of a Machine carrying the legacy k3s hook", func(ctx SpecContext) {
		c := startK3sCluster(ctx, k3sOptions{version: "v1.34.2+k3s1"})
		rec := startRecorder(ctx, c.workload.APIServer.Config)
		c.expectMembers(ctx, 3)
		healthy, broken := c.machines["cp-0"], c.machines["cp-2"]
		brokenMember := c.workload.Etcd.MemberOnNode("cp-2").Name()

		By("stopping the etcd member on Node cp-2")
		Expect(c.workload.Etcd.StopMember(ctx, brokenMember)).To(Succeed())
		Eventually(func(g Gomega) {
			cpe := c.status(ctx)
			g.Expect(cpe.Status.HealthyVoters).To(HaveValue(BeEquivalentTo(2)))
			g.Expect(conditionStatus(cpe, v1alpha1.DegradedCondition)).To(BeEquivalentTo("True"))
		}, reconcileTimeout).Should(Succeed())

		By("deleting healthy Machine " + healthy.Name + ": the quorum guard refuses")
		err := mgmt.Client.Delete(ctx, healthy)
		Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || err != nil).To(BeTrue(), "the deletion must be refused")
		Expect(err.Error()).To(And(ContainSubstring("would lose etcd quorum"), ContainSubstring(brokenMember), ContainSubstring("1 of 2 voters are healthy")))
		Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(healthy), &clusterv1.Machine{})).To(Succeed())

		By("giving the broken Machine the legacy cluster-api-k3s hook, as a Machine created before a clusterctl upgrade has")
		patchAnnotation(ctx, broken, v1alpha1.LegacyK3sHookAnnotation, v1alpha1.LegacyK3sHookValue)
		createPod(ctx, c.workload.APIServer.Client, "cp-2")

		By("deleting broken Machine " + broken.Name + ": allowed, drained, member removed, both hooks released")
		Expect(mgmt.Client.Delete(ctx, broken)).To(Succeed())
		c.expectGone(ctx, broken)
		// Note: the recorder learns of the changes from watches, which can still be behind the
		// reads that saw the Machine and its Node gone.
		Eventually(func() []string { return rec.order("cp-2") }, reconcileTimeout).Should(Equal([]string{"evicted", "removal-requested"}), "recorded: %s", rec)
		c.expectMembers(ctx, 2)
	}, SpecTimeout(4*time.Minute))
})

var _ = Describe("Cluster deletion", func() {
	It("releases the hooks without member removal so deletion never hangs", func(ctx SpecContext) {
		c := startK3sCluster(ctx, k3sOptions{version: "v1.34.2+k3s1"})
		rec := startRecorder(ctx, c.workload.APIServer.Config)
		c.expectMembers(ctx, 3)

		By("deleting the Cluster (held by a finalizer, as Cluster API's Cluster controller holds it) and its Machines")
		const hold = "test.etcd-adapter.io/hold"
		patchFinalizer(ctx, c.cluster, hold)
		Expect(mgmt.Client.Delete(ctx, c.cluster)).To(Succeed())
		for _, m := range c.machines {
			Expect(mgmt.Client.Delete(ctx, m)).To(Succeed())
		}
		for _, m := range c.machines {
			Eventually(func() error {
				return mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), &clusterv1.Machine{})
			}, deletionTimeout).Should(Satisfy(apierrors.IsNotFound))
		}
		members, err := c.workload.Etcd.NewClient(ctx)
		Expect(err).NotTo(HaveOccurred())
		defer func() { _ = members.Close() }()
		// Note: the recorder learns of a removal request from a Node watch, and K3s removes a
		// member after the request, both after the moment the Machines were seen gone; so
		// neither is checked once, but all along a window.
		Consistently(func(g Gomega) {
			list, err := members.MemberList(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(list.Members).To(HaveLen(3), "no member may be removed when the whole cluster goes")
			g.Expect(rec.String()).NotTo(ContainSubstring("removal-requested"))
		}, 3*time.Second, 250*time.Millisecond).Should(Succeed())
		removeFinalizer(ctx, c.cluster, hold)
	}, SpecTimeout(4*time.Minute))
})

var _ = Describe("A paused Cluster", func() {
	It("is not touched until it is unpaused, and its status says so; periodic passes write nothing", func(ctx SpecContext) {
		c := startK3sCluster(ctx, k3sOptions{version: "v1.34.2+k3s1"})
		c.expectMembers(ctx, 3)

		By("checking that periodic passes (every " + observationInterval.String() + ") do not rewrite an unchanged status")
		rv := c.status(ctx).ResourceVersion
		Consistently(func() string { return c.status(ctx).ResourceVersion }, 5*observationInterval, observationInterval/2).Should(Equal(rv))

		By("pausing the Cluster and deleting a Machine")
		setPaused(ctx, c.cluster, true)
		Eventually(func() string { return string(conditionStatus(c.status(ctx), v1alpha1.PausedCondition)) }, reconcileTimeout).Should(Equal("True"))
		doomed := c.machines["cp-2"]
		Expect(mgmt.Client.Delete(ctx, doomed)).To(Succeed())
		Consistently(func(g Gomega) {
			got := &clusterv1.Machine{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(doomed), got)).To(Succeed())
			g.Expect(got.Annotations).To(HaveKey(v1alpha1.PreTerminateHookAnnotation))
			g.Expect(c.status(ctx).Status.MemberCount).To(HaveValue(BeEquivalentTo(3)))
		}, 3*time.Second, 500*time.Millisecond).Should(Succeed())

		By("unpausing: the deletion completes")
		setPaused(ctx, c.cluster, false)
		c.expectGone(ctx, doomed)
		c.expectMembers(ctx, 2)
		Expect(conditionStatus(c.status(ctx), v1alpha1.PausedCondition)).To(BeEquivalentTo("False"))
	}, SpecTimeout(4*time.Minute))
})
