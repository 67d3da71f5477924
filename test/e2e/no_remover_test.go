package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// In mode Observe no etcd-adapter hook holds a Machine, and a control plane with no provider hook
// that removes members (a K3s Cluster switched to Observe; a kubeadm control plane that is not a
// KubeadmControlPlane) has its infrastructure deleted with the member still voting (Cluster API's
// Machine deletion: drain, pre-terminate hooks, then the infrastructure, core/reconcilers/machine
// in cluster-api v1.14.2). Such a member is a voter that stops answering, not a removed one: of a
// healthy 3-member control plane one Machine may go (2 of 3 voters answer), a second may not (1 of
// 3). The deletions are the concurrent ones of `kubectl delete machine m-cp-0 m-cp-1`.
var _ = Describe("Deleting control-plane Machines whose members nothing removes", func() {
	for _, backend := range []v1alpha1.Backend{v1alpha1.BackendKubeadm, v1alpha1.BackendK3s} {
		It("admits one of two concurrent deletions of a healthy 3-member "+string(backend)+" control plane in mode Observe, counting its member as a voter that stops answering", func(ctx SpecContext) {
			var c *testCluster
			if backend == v1alpha1.BackendK3s {
				c = startK3sCluster(ctx, k3sOptions{version: "v1.34.2+k3s1"})
				c.expectMembers(ctx, 3)
				By("switching the ControlPlaneEtcd to Observe: etcd-adapter's hooks go")
				c.setMode(ctx, v1alpha1.ModeObserve)
				expectNoHooks(ctx, c, c.workload.Nodes...)
			} else {
				c = startKubeadmCluster(ctx, 3, v1alpha1.ModeObserve)
				c.expectMembers(ctx, 3)
			}
			machines := []*clusterv1.Machine{c.machines["cp-0"], c.machines["cp-1"]}

			By("deleting Machines m-cp-0 and m-cp-1 concurrently")
			errs := deleteConcurrently(ctx, machines)
			var deleting, kept []*clusterv1.Machine
			for i, m := range machines {
				GinkgoWriter.Printf("DELETE Machine %s: %v\n", m.Name, errs[i])
				got := &clusterv1.Machine{}
				Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
				if got.DeletionTimestamp.IsZero() {
					kept = append(kept, got)
					Expect(errs[i]).To(MatchError(And(ContainSubstring("would lose etcd quorum"), ContainSubstring("which nothing removes before"),
						ContainSubstring("1 of 3 voters are healthy"))), "Machine %s", m.Name)
					continue
				}
				deleting = append(deleting, got)
			}
			Expect(deleting).To(HaveLen(1), "one member may stop answering, not two: %v", errs)
			Expect(kept).To(HaveLen(1))

			if backend != v1alpha1.BackendKubeadm {
				return
			}
			By("the admitted Machine's infrastructure goes with its member: it stops answering, and 2 of 3 voters keep quorum")
			gone := deleting[0]
			member := c.workload.Etcd.MemberOnNode(gone.Status.NodeRef.Name)
			c.expectGone(ctx, gone)
			Expect(c.workload.Kubelet(gone.Status.NodeRef.Name).Stop()).To(Succeed())
			Expect(c.workload.Etcd.StopMember(ctx, member.Name())).To(Succeed())
			Eventually(func(g Gomega) {
				cpe := c.status(ctx)
				g.Expect(cpe.Status.Voters).To(HaveValue(BeEquivalentTo(3)))
				g.Expect(cpe.Status.HealthyVoters).To(HaveValue(BeEquivalentTo(2)))
				g.Expect(conditionStatus(cpe, v1alpha1.AvailableCondition)).To(Equal(metav1.ConditionTrue), "status: %+v", cpe.Status)
			}, reconcileTimeout).Should(Succeed())
			Expect(memberIDs(ctx, c)).To(ContainElement(member.ID()), "in Observe mode nothing removed the member")
		}, SpecTimeout(6*time.Minute))
	}
})
