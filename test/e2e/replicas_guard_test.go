package e2e

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// The etcd-adapter Deployment runs two replicas behind one Service; requests from several
// apiservers, or over HTTP/1.1 connections, reach both. Three concurrent DELETEs of a healthy
// 3-member control plane (kubectl delete machine -l cluster.x-k8s.io/control-plane) must still
// admit at most the two deletions etcd survives, whichever replica answers which: each replica
// must count the deletions the other admitted.
var _ = Describe("Two replicas of the quorum guard behind one address", func() {
	// rounds is how many fresh control planes each backend is tried on.
	const rounds = 2
	for _, backend := range []v1alpha1.Backend{v1alpha1.BackendKubeadm, v1alpha1.BackendK3s} {
		It("admit at most two of three concurrent deletions of a healthy 3-member "+string(backend)+" control plane, in every round", func(ctx SpecContext) {
			By("serving the webhooks from two replicas behind a proxy that spreads the requests")
			Expect(adapter.Stop()).To(Succeed())
			wio := mgmt.WebhookInstallOptions()
			var ports []int
			for range 2 {
				port, err := freePort(wio.LocalServingHost)
				Expect(err).NotTo(HaveOccurred())
				ports = append(ports, port)
			}
			// Note: the first replica runs the controllers too; the second only serves webhooks.
			_, err := startAdapterWith(ctx, mgmt, adapterOptions{webhookPort: ports[0]})
			Expect(err).NotTo(HaveOccurred())
			_, err = startAdapterWith(ctx, mgmt, adapterOptions{webhooksOnly: true, webhookPort: ports[1]})
			Expect(err).NotTo(HaveOccurred())
			proxy, err := startSpreadProxy(wio, ports...)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(proxy.Close)

			for round := range rounds {
				By(fmt.Sprintf("round %d: a fresh healthy 3-member control plane", round+1))
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
				}

				By("deleting the three control-plane Machines concurrently")
				proxy.arm(len(machines))
				errs := deleteConcurrently(ctx, machines)
				var deleting []*clusterv1.Machine
				for i, m := range machines {
					GinkgoWriter.Printf("round %d: DELETE Machine %s: %v\n", round+1, m.Name, errs[i])
					got := &clusterv1.Machine{}
					if err := mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), got); err == nil && got.DeletionTimestamp.IsZero() {
						continue
					}
					deleting = append(deleting, m)
				}
				GinkgoWriter.Printf("round %d: reviews answered per replica so far: %v\n", round+1, proxy.spread())
				Expect(len(deleting)).To(BeNumerically("<=", 2), "round %d: at most two of three members may go: %v", round+1, errs)

				By("the admitted deletions finish and quorum holds with the members left")
				for _, m := range deleting {
					c.expectGone(ctx, m)
					if backend == v1alpha1.BackendKubeadm {
						// As in the bulk-delete spec: the gone Machine's kubelet goes with it.
						Expect(c.workload.Kubelet(m.Status.NodeRef.Name).Stop()).To(Succeed())
					}
				}
				c.expectMembers(ctx, len(machines)-len(deleting))
			}
			Expect(proxy.spread()).To(HaveEach(BeNumerically(">", 0)), "both replicas must have answered reviews")
		}, SpecTimeout(15*time.Minute))
	}
})
