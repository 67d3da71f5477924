package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/k3s"
	"github.com/etcd-adapter/etcd-adapter/test/env/infra"
)

// K3s profiles around the 1.34.2 fixes (K3s moves leadership off a member before removing it,
// and ends the removal requeue); 1.33.4 is before them.
var k3sProfiles = []string{"v1.34.2+k3s1", "v1.33.4+k3s1"}

var _ = Describe("K3s scale-down 3→2→1 by a provider using the provider library", func() {
	for _, version := range k3sProfiles {
		It("drains each Node before its member is removed, keeps quorum and releases the hooks on "+version, func(ctx SpecContext) {
			c := startK3sCluster(ctx, k3sOptions{version: version})
			rec := startRecorder(ctx, c.workload.APIServer.Config)
			etcdView, err := k3s.Start(ctx, c.workload.APIServer.Config, k3s.Config{})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(etcdView.Stop)
			p := &testProvider{cluster: c.cluster, etcd: etcdView}

			By("reporting three healthy members")
			c.expectMembers(ctx, 3)

			for _, node := range c.workload.Nodes {
				createPod(ctx, c.workload.APIServer.Client, node)
			}
			for _, want := range []int{2, 1} {
				var doomed *clusterv1.Machine
				Eventually(func() error {
					doomed, err = p.scaleDown(ctx)
					return err
				}, reconcileTimeout).Should(Succeed(), "the provider's preflight and gate must allow the scale-down")
				node := doomed.Status.NodeRef.Name
				By("deleting Machine " + doomed.Name + " on Node " + node)

				c.expectGone(ctx, doomed)
				// Note: the recorder learns of the changes from watches, which can still be behind
				// the reads that saw the Machine and its Node gone.
				Eventually(func() []string { return rec.order(node) }, reconcileTimeout).Should(Equal([]string{"evicted", "removal-requested"}),
					"the Node must be drained before its member's removal is asked for; recorded: %s", rec)
				c.expectMembers(ctx, want)
				c.expectRemoved(ctx, doomed)
			}
		}, SpecTimeout(6*time.Minute))
	}
})

// expectGone waits until the Machine, its TestMachine and its Node are gone, and stops tracking
// the Machine.
func (c *testCluster) expectGone(ctx context.Context, m *clusterv1.Machine) {
	Eventually(func() error {
		return mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), &clusterv1.Machine{})
	}, deletionTimeout).Should(Satisfy(apierrors.IsNotFound), "the Machine must be deleted once its hook is released")
	Expect(apierrors.IsNotFound(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), infra.NewMachine("", "", "")))).To(BeTrue(), "the infrastructure Machine must be gone")
	Eventually(func() error {
		return c.workload.APIServer.Client.Get(ctx, client.ObjectKey{Name: m.Status.NodeRef.Name}, &corev1.Node{})
	}, reconcileTimeout).Should(Satisfy(apierrors.IsNotFound), "the Node must be gone")
	// The cluster's later checks (expectMembers, waitForHooks) look at the Machines still there.
	for node, tracked := range c.machines {
		if tracked.Name == m.Name {
			delete(c.machines, node)
		}
	}
}

// expectMembers waits until the status reports n healthy voters, all bound to Machines, and etcd
// available with no membership change under way, and no hook left on deleted Machines.
func (c *testCluster) expectMembers(ctx context.Context, n int) {
	Eventually(func(g Gomega) {
		cpe := &v1alpha1.ControlPlaneEtcd{}
		g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(c.cpe), cpe)).To(Succeed())
		g.Expect(cpe.Status.MemberCount).To(HaveValue(BeEquivalentTo(n)))
		g.Expect(cpe.Status.HealthyVoters).To(HaveValue(BeEquivalentTo(n)))
		g.Expect(cpe.Status.FaultTolerance).To(HaveValue(BeEquivalentTo(max(0, n-(n/2+1)))))
		g.Expect(conditionStatus(cpe, v1alpha1.AvailableCondition)).To(Equal(metav1.ConditionTrue), "status: %+v", cpe.Status)
		g.Expect(conditionStatus(cpe, v1alpha1.ProgressingCondition)).To(Equal(metav1.ConditionFalse), "status: %+v", cpe.Status)
		g.Expect(conditionStatus(cpe, v1alpha1.EtcdClusterHealthyCondition)).To(Equal(metav1.ConditionTrue), "status: %+v", cpe.Status)
		for _, m := range cpe.Status.Members {
			g.Expect(m.MachineName).NotTo(BeEmpty(), "member %s must be bound to a Machine", m.Name)
			g.Expect(m.Health).To(Equal(v1alpha1.MemberHealthy))
		}
	}, reconcileTimeout).Should(Succeed())
}

// expectRemoved checks the status records the Machine's member removal as done.
func (c *testCluster) expectRemoved(ctx context.Context, m *clusterv1.Machine) {
	rec := c.status(ctx).Status.Removal
	Expect(rec).NotTo(BeNil())
	Expect(rec.MachineName).To(Equal(m.Name))
	Expect(rec.Result).To(Equal(v1alpha1.RemovalRemoved))
	Expect(rec.EndTime).NotTo(BeNil())
}
