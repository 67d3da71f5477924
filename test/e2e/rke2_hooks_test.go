package e2e

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/controlplane/reconcilers/creation"
	"github.com/etcd-adapter/etcd-adapter/test/env/rke2cp"
	"github.com/etcd-adapter/etcd-adapter/test/env/workload"
)

var _ = Describe("Beside cluster-api-provider-rke2's own pre-terminate hook", func() {
	It("deletes RKE2 control-plane Machines in RKE2ControlPlane's default mode: drained first, each member removed once, both hooks released, no hang", func(ctx SpecContext) {
		d, ok := creation.Defaults["RKE2ControlPlane"]
		Expect(ok).To(BeTrue())
		Expect(d).To(Equal(creation.DefaultSpec{Backend: v1alpha1.BackendRKE2, Mode: v1alpha1.ModeManage}))
		wl, err := workload.StartK3s(ctx, workload.K3sOptions{Version: "v1.34.2+rke2r1", Tick: 200 * time.Millisecond})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(wl.Close)
		c := registerTestCluster(ctx, workloadParts{APIServer: wl.APIServer, Etcd: wl.Etcd, Nodes: wl.Nodes, Kubelet: wl.Kubelet, Simulator: wl.Simulator, K3s: wl}, d.Backend, d.Mode)
		rec := startRecorder(ctx, c.workload.APIServer.Config)
		c.expectMembers(ctx, 3)

		By("running the CAPRKE2 stand-in: its rke2-cleanup hook goes on every Machine beside etcd-adapter's")
		standIn, err := rke2cp.Start(ctx, rke2cp.Options{Management: mgmt.Client, Workload: c.workload.APIServer.Client, Cluster: client.ObjectKeyFromObject(c.cluster)})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(standIn.Stop)
		Eventually(func(g Gomega) {
			for _, m := range c.machines {
				got := &clusterv1.Machine{}
				g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
				g.Expect(got.Annotations).To(HaveKey(v1alpha1.PreTerminateHookAnnotation))
				g.Expect(got.Annotations).To(HaveKey(v1alpha1.RKE2HookAnnotation))
			}
		}, reconcileTimeout).Should(Succeed(), func() string { return fmt.Sprintf("stand-in's last error: %v", standIn.LastError()) })

		var removed []string
		for i, node := range []string{"cp-2", "cp-1"} {
			m := c.machines[node]
			member, running := wl.Simulator.MemberName(node)
			Expect(running).To(BeTrue())
			By("deleting Machine " + m.Name + " (member " + member + ")")
			createPod(ctx, c.workload.APIServer.Client, node)
			Expect(mgmt.Client.Delete(ctx, m)).To(Succeed())
			c.expectGone(ctx, m)
			// Note: the recorder learns of the changes from watches, which can still be behind the
			// reads that saw the Machine and its Node gone.
			Eventually(func() []string { return rec.order(node) }, reconcileTimeout).Should(Equal([]string{"evicted", "removal-requested"}),
				"the Node is drained before its member's removal is asked for; recorded: %s", rec)
			removed = append(removed, member)
			Expect(wl.Simulator.MemberRemovals()).To(Equal(removed), "RKE2 removed each member once")
			actions := standIn.ActionsFor(m.Name)
			Expect(actions).To(ContainElement(And(HaveField("What", rke2cp.RemoveRequested), HaveField("Detail", member))),
				"CAPRKE2's hook runs after etcd-adapter's and finds RKE2's removed-node-name already written: %+v", actions)
			// Note: the stand-in notes its release after its patch returns, which can be after the
			// Machine was seen gone.
			Eventually(func() []rke2cp.Action { return standIn.ActionsFor(m.Name) }, reconcileTimeout).Should(
				ContainElement(HaveField("What", rke2cp.Released)), func() string { return fmt.Sprintf("%+v", standIn.ActionsFor(m.Name)) })
			c.expectMembers(ctx, 3-(i+1))
		}
	}, SpecTimeout(6*time.Minute))
})
