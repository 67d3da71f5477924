package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// Cluster API copies a Machine's addresses from its infrastructure Machine on a later reconcile
// (core/reconcilers/machine machine_controller_phases.go reconcileInfrastructure, v1.14.2), and an
// etcdadm member is tied to its etcd Machine only by the address in its peer URL. A person or the
// etcdadm controller can delete the etcd Machine before that copy.
var _ = Describe("An etcd Machine deleted before Cluster API copied its address", func() {
	It("keeps its hook while its member is tied to no Machine, then removes the member once the address is copied, and only then lets the Machine go", func(ctx SpecContext) {
		ips := []string{"127.0.0.67", "127.0.0.68", "127.0.0.69"}
		e := startManagedEtcdadmPending(ctx, "eadm-addr", ips, nil, 2)
		pending, id := e.machines[2], e.etcd.Members()[2].ID()

		By("deleting etcd Machine " + pending.Name + ", which reports no address yet")
		Expect(deleteMachine(ctx, pending)).To(BeEmpty())
		Eventually(func(g Gomega) {
			cond := findCondition(e.status(ctx), v1alpha1.ProgressingCondition)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Reason).To(Equal(v1alpha1.ProgressingRemovalBlockedReason))
			g.Expect(cond.Message).To(ContainSubstring(pending.Name))
			g.Expect(cond.Message).To(ContainSubstring("belong to no other Machine"))
		}, reconcileTimeout).Should(Succeed())
		Consistently(func(g Gomega) {
			got := &clusterv1.Machine{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(pending), got)).To(Succeed())
			g.Expect(got.Annotations).To(HaveKey(v1alpha1.PreTerminateHookAnnotation), "absence of a tie is no proof: the hook stays")
			g.Expect(e.memberIDs(ctx, g, 0)).To(ContainElement(id))
		}, 3*observationInterval, observationInterval/2).Should(Succeed())

		By("the infrastructure provider reports the address: the member is removed, then the Machine goes")
		setEtcdMachineAddress(ctx, pending, ips[2])
		e.expectRemoved(ctx, 2, 0)
		Expect(e.memberIDs(ctx, Default, 0)).NotTo(ContainElement(id))
	}, SpecTimeout(5*time.Minute))
})
