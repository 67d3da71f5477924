package e2e

import (
	"context"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// A person running `kubectl delete machine -l cluster.x-k8s.io/control-plane` sends one DELETE per
// Machine, at once. Each is admitted before the apiserver writes any of them, so the quorum guard
// must count the deletions it already admitted: of a healthy 3-member control plane, etcd's
// majority rule lets two members go one after the other (2 of 2, then 1 of 1), never the third,
// which is the last member of a Cluster that is not being deleted.
var _ = Describe("Deleting every control-plane Machine at once", func() {
	for _, backend := range []v1alpha1.Backend{v1alpha1.BackendK3s, v1alpha1.BackendKubeadm} {
		It("admits at most the deletions etcd survives on "+string(backend)+", refuses the rest naming the deletions under way, and keeps quorum", func(ctx SpecContext) {
			var c *testCluster
			if backend == v1alpha1.BackendK3s {
				c = startK3sCluster(ctx, k3sOptions{version: "v1.34.2+k3s1"})
			} else {
				c = startKubeadmCluster(ctx, 3, v1alpha1.ModeManage)
			}
			c.expectMembers(ctx, 3)
			var machines []*clusterv1.Machine
			for _, node := range c.workload.Nodes {
				machines = append(machines, c.machines[node])
				createPod(ctx, c.workload.APIServer.Client, node)
			}

			By("deleting the three control-plane Machines concurrently")
			errs := deleteConcurrently(ctx, machines)

			var admitted, refused []*clusterv1.Machine
			for i, m := range machines {
				if errs[i] == nil {
					admitted = append(admitted, m)
					continue
				}
				refused = append(refused, m)
				Expect(errs[i].Error()).To(And(
					ContainSubstring("would remove the last etcd member of Cluster "+c.cluster.Name+" ("+v1alpha1.MemberRemovalLastMemberReason+")"),
					ContainSubstring("already under way")),
					"Machine %s must be refused naming the deletions under way", m.Name)
			}
			for i, m := range machines {
				GinkgoWriter.Printf("DELETE Machine %s: %v\n", m.Name, errs[i])
			}
			Expect(len(admitted)).To(BeNumerically("<=", 2), "at most two of three members may go: %v", errs)
			Expect(refused).NotTo(BeEmpty(), "the last member's Machine must be refused: %v", errs)
			for _, m := range refused {
				for _, a := range admitted {
					Expect(errs[indexOf(machines, m)].Error()).To(ContainSubstring(a.Name), "the refusal must name the deletion of %s under way", a.Name)
				}
			}

			By("letting the controller finish the admitted deletions: quorum holds with the members left")
			for _, m := range admitted {
				c.expectGone(ctx, m)
				if backend == v1alpha1.BackendKubeadm {
					// The Machine is gone, and in a real cluster its kubelet with it: here the etcd
					// Pod object stays (no Pod garbage collector runs), and a port-forward through
					// it must not reach the removed member (as in the kubeadm scale-down spec).
					Expect(c.workload.Kubelet(m.Status.NodeRef.Name).Stop()).To(Succeed())
				}
			}
			c.expectMembers(ctx, len(machines)-len(admitted))
			for _, m := range refused {
				got := &clusterv1.Machine{}
				Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
				Expect(got.DeletionTimestamp.IsZero()).To(BeTrue(), "refused Machine %s must not be deleting", m.Name)
			}
		}, SpecTimeout(8*time.Minute))
	}
})

// The second case of the issue: with 4 voters and 1 down, each of two deletions of healthy
// Machines keeps quorum alone (2 of 3 healthy after it), but not both (1 of 2).
var _ = Describe("Deleting two healthy control-plane Machines at once next to a broken member", func() {
	It("admits one of them on kubeadm, refuses the other naming the deletion under way, and keeps quorum", func(ctx SpecContext) {
		c := startKubeadmCluster(ctx, 4, v1alpha1.ModeManage)
		c.expectMembers(ctx, 4)
		By("stopping the etcd member on Node cp-3")
		Expect(c.workload.Etcd.StopMember(ctx, c.workload.Etcd.MemberOnNode("cp-3").Name())).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(c.status(ctx).Status.HealthyVoters).To(HaveValue(BeEquivalentTo(3)))
		}, reconcileTimeout).Should(Succeed())
		machines := []*clusterv1.Machine{c.machines["cp-0"], c.machines["cp-1"]}
		for _, m := range machines {
			createPod(ctx, c.workload.APIServer.Client, m.Status.NodeRef.Name)
		}

		By("deleting Machines m-cp-0 and m-cp-1 concurrently")
		errs := deleteConcurrently(ctx, machines)
		for i, m := range machines {
			GinkgoWriter.Printf("DELETE Machine %s: %v\n", m.Name, errs[i])
		}
		var admitted *clusterv1.Machine
		for i, m := range machines {
			if errs[i] != nil {
				continue
			}
			Expect(admitted).To(BeNil(), "only one of the two may go: %v", errs)
			admitted = m
		}
		Expect(admitted).NotTo(BeNil(), "one of the two may go: %v", errs)
		for i, m := range machines {
			if m != admitted {
				Expect(errs[i].Error()).To(And(ContainSubstring("would lose etcd quorum"), ContainSubstring(v1alpha1.MemberRemovalWouldLoseQuorumReason),
					ContainSubstring("with the deletions of Machines "+admitted.Name+" already under way"), ContainSubstring("1 of 2 voters are healthy")))
			}
		}

		By("letting the controller finish the admitted deletion: 2 of 3 voters healthy, quorum holds")
		c.expectGone(ctx, admitted)
		Expect(c.workload.Kubelet(admitted.Status.NodeRef.Name).Stop()).To(Succeed())
		Eventually(func(g Gomega) {
			cpe := c.status(ctx)
			g.Expect(cpe.Status.Voters).To(HaveValue(BeEquivalentTo(3)))
			g.Expect(cpe.Status.HealthyVoters).To(HaveValue(BeEquivalentTo(2)))
			g.Expect(conditionStatus(cpe, v1alpha1.AvailableCondition)).To(Equal(metav1.ConditionTrue), "status: %+v", cpe.Status)
		}, reconcileTimeout).Should(Succeed())
	}, SpecTimeout(6*time.Minute))
})

// deleteConcurrently sends one DELETE per Machine, all released at once, as `kubectl delete
// machine -l ...` does, and returns each one's error.
func deleteConcurrently(ctx context.Context, machines []*clusterv1.Machine) []error {
	errs := make([]error, len(machines))
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i, m := range machines {
		wg.Go(func() {
			<-start
			errs[i] = mgmt.Client.Delete(ctx, m)
		})
	}
	close(start)
	wg.Wait()
	return errs
}

func indexOf(ms []*clusterv1.Machine, m *clusterv1.Machine) int {
	for i, x := range ms {
		if x.Name == m.Name {
			return i
		}
	}
	return -1
}
