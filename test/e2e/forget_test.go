package e2e

import (
	"bytes"
	"runtime"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/test/env/workload"
)

var _ = Describe("A Cluster that is gone", func() {
	It("leaves nothing running: the kubeadm backend's etcd clients and their janitor stop when the ControlPlaneEtcd goes, and again when the Cluster goes", func(ctx SpecContext) {
		wl, err := workload.StartKubeadm(ctx, workload.KubeadmOptions{Members: 3})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(wl.Close)
		// Taken once the workload cluster runs (its kubelet stand-ins have goroutines of their own)
		// and before etcd-adapter knows it, so the difference is what etcd-adapter starts for it.
		baseline := backendGoroutines()

		c := registerTestCluster(ctx, workloadParts{APIServer: wl.APIServer, Etcd: wl.Etcd, Nodes: wl.Nodes, Kubelet: wl.Kubelet, Kubeadm: wl}, v1alpha1.BackendKubeadm, v1alpha1.ModeObserve)
		c.expectMembers(ctx, 3)
		Expect(backendGoroutines()).To(HaveKeyWithValue(janitorFrame, baseline[janitorFrame]+1), "the measure sees the backend this Cluster started")
		// Note: Eventually, not Expect: a stack snapshot misses a connection's reader while it
		// handles a frame it has just read (the status write above starts another pass, whose
		// calls answer on these connections), and a connection that ends is redialled by the
		// next pass, not at once.
		Eventually(func() int { return backendGoroutines()[clientFrame] }, reconcileTimeout).Should(
			BeNumerically(">=", baseline[clientFrame]+3), "the measure sees a connection per member")

		By("deleting the ControlPlaneEtcd: the Cluster stays, etcd-adapter lets go of it")
		Expect(mgmt.Client.Delete(ctx, c.cpe)).To(Succeed())
		Eventually(backendGoroutines, reconcileTimeout).Should(Equal(baseline))

		By("creating it again, then deleting the Cluster")
		cpe := &v1alpha1.ControlPlaneEtcd{}
		cpe.Namespace, cpe.Name, cpe.Spec = c.cpe.Namespace, c.cpe.Name, c.cpe.Spec
		Expect(mgmt.Client.Create(ctx, cpe)).To(Succeed())
		c.cpe = cpe
		c.expectMembers(ctx, 3)
		Expect(backendGoroutines()).To(HaveKeyWithValue(janitorFrame, baseline[janitorFrame]+1))
		Expect(mgmt.Client.Delete(ctx, c.cluster)).To(Succeed())
		Eventually(func() error {
			return mgmt.Client.Get(ctx, client.ObjectKeyFromObject(c.cluster), c.cluster.DeepCopy())
		}, deletionTimeout).Should(Satisfy(apierrors.IsNotFound))
		Eventually(backendGoroutines, reconcileTimeout).Should(Equal(baseline))
		for _, m := range c.machines {
			// Note: after the Cluster, so the quorum guard does not refuse the last one.
			Expect(client.IgnoreNotFound(mgmt.Client.Delete(ctx, m))).To(Succeed())
		}
	}, SpecTimeout(5*time.Minute))
})

const (
	// janitorFrame runs once per kubeadm backend for as long as it is open.
	janitorFrame = "etcd-adapter/pkg/kubeadm.(*pool).janitor"
	// clientFrame is on the stack of gRPC's reader of every member connection a kubeadm backend
	// keeps: its port-forward tunnel (WebSocket, or the older channel protocol), read by gRPC.
	clientFrame    = "etcd-adapter/pkg/kubeadm/internal/portforward.(*"
	clientFrameEnd = "unnel).Read("
)

// backendGoroutines counts the goroutines of this process that run each frame.
func backendGoroutines() map[string]int {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	counts := map[string]int{janitorFrame: 0, clientFrame: 0}
	for _, g := range bytes.Split(buf, []byte("\n\n")) {
		if bytes.Contains(g, []byte(janitorFrame)) {
			counts[janitorFrame]++
		}
		for line := range bytes.Lines(g) {
			if bytes.Contains(line, []byte(clientFrame)) && bytes.Contains(line, []byte(clientFrameEnd)) {
				counts[clientFrame]++
				break
			}
		}
	}
	return counts
}
