package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/test/env/workload"
)

// A Node object deleted while its kubelet and etcd run (a person's `kubectl delete node`, a cloud
// controller's mistake) leaves the etcd member reachable by its peers but not by etcd-adapter:
// the apiserver finds no Node to port-forward through. When that member leads, its leadership
// cannot be moved (etcd takes MoveLeader from the leader only).
var _ = Describe("A kubeadm leader whose Node object was deleted", func() {
	It("is removed while it leads when its Machine is deleted: leadership cannot be moved through it, and etcd elects a new leader", func(ctx SpecContext) {
		// A 5 s election timeout: the member chosen as the leader must still lead when its Machine
		// is deleted, and on a loaded machine 500 ms of late heartbeats elect another.
		c := startKubeadmClusterWith(ctx, workload.KubeadmOptions{Members: 3, ElectionMs: 5000}, v1alpha1.ModeManage)
		wl := c.workload
		c.expectMembers(ctx, 3)
		leader, err := wl.Etcd.Leader()
		Expect(err).NotTo(HaveOccurred())
		node := leader.NodeName()
		m := c.machines[node]
		id := leader.ID()

		By("deleting Node " + node + ", which runs the leader, from the workload apiserver")
		Expect(wl.APIServer.Client.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}})).To(Succeed())
		By("restarting etcd-adapter, so that it holds no connection made while the Node existed")
		Expect(adapter.Stop()).To(Succeed())
		adapter, err = startAdapter(context.Background(), mgmt, nil)
		Expect(err).NotTo(HaveOccurred())
		By("deleting Machine " + m.Name + ": its member is removed although it leads, then the Machine goes")
		// The new etcd-adapter may not have connected to the workload cluster yet; its quorum guard
		// then lets the deletion through with a warning, and the hook holds the Machine either way.
		deleteMachine(ctx, m)
		c.expectGone(ctx, m)
		Expect(memberIDs(ctx, c)).NotTo(ContainElement(id))
		Expect(memberIDs(ctx, c)).To(HaveLen(2))
		Eventually(func() []string {
			var msgs []string
			for _, e := range eventsAbout(ctx, m) {
				if e.Reason == v1alpha1.EventLeaderMoveFailed {
					msgs = append(msgs, e.Message)
				}
			}
			return msgs
		}, reconcileTimeout).Should(ContainElement(ContainSubstring("removing it while it leads")))
		Eventually(func(g Gomega) {
			newLeader, err := wl.Etcd.Leader()
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(newLeader.ID()).NotTo(Equal(id), "etcd elected a new leader")
		}, reconcileTimeout).Should(Succeed())
	}, SpecTimeout(5*time.Minute))
})
