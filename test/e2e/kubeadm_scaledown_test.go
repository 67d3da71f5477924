package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/kubeadm"
)

var _ = Describe("kubeadm scale-down 3→2→1 by a provider using the provider library", func() {
	It("drains each Node before its member is removed, keeps quorum and releases the hooks", func(ctx SpecContext) {
		c := startKubeadmCluster(ctx, 3, v1alpha1.ModeManage)
		wl := c.workload
		key := client.ObjectKeyFromObject(c.cluster)
		backend, err := kubeadm.New(kubeadm.Config{Cluster: key, ClusterUID: c.cluster.UID, RESTConfig: kubeadm.FromClusterCache(mgmt.ClusterCache, key), Client: mgmt.Client})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(backend.Close)
		p := &testProvider{cluster: c.cluster, etcd: backend}

		By("reporting three healthy members")
		c.expectMembers(ctx, 3)
		By("exporting each member's database size, term and evidence age from its etcd Status")
		remaining := slices.Clone(wl.Nodes)
		expectMemberSeries(ctx, c, remaining)
		pods := map[string]*corev1.Pod{}
		for _, node := range wl.Nodes {
			pods[node] = createPod(ctx, wl.APIServer.Client, node)
		}
		for _, want := range []int{2, 1} {
			var doomed *clusterv1.Machine
			Eventually(func() error {
				doomed, err = p.scaleDown(ctx)
				return err
			}, reconcileTimeout).Should(Succeed(), "the provider's preflight and gate must allow the scale-down")
			node := doomed.Status.NodeRef.Name
			By("deleting Machine " + doomed.Name + " on Node " + node)
			order := watchRemovalOrder(ctx, c, wl.Etcd.MemberOnNode(node).ID(), pods[node])

			c.expectGone(ctx, doomed)
			// The machine is gone, and its kubelet with it: the etcd Pod object stays (no Pod
			// garbage collector runs here), and a port-forward through it must not reach the
			// removed member, which etcd v3.6 panics on when asked for Status before it stopped.
			Expect(wl.Kubelet(node).Stop()).To(Succeed())
			var violation string
			Eventually(order, deletionTimeout).Should(Receive(&violation))
			Expect(violation).To(BeEmpty(), "the Node must be drained before its member is removed")
			c.expectMembers(ctx, want)
			c.expectRemoved(ctx, doomed)
			By("deleting the series of the removed member " + node)
			remaining = slices.DeleteFunc(remaining, func(n string) bool { return n == node })
			expectMemberSeries(ctx, c, remaining)
		}
	}, SpecTimeout(6*time.Minute))
})

// watchRemovalOrder polls etcd's member list (linearizable) until the member is gone, then reads
// the Node's Pod from the workload apiserver at once: the eviction is an apiserver write the
// drain finished before the hook flow could start, so a Pod still there, not deleting, when the
// member is already gone means the member was removed before the drain. It sends "" when the
// order held, or what it saw.
func watchRemovalOrder(ctx context.Context, c *testCluster, id uint64, pod *corev1.Pod) <-chan string {
	out := make(chan string, 1)
	cli, err := c.workload.Etcd.NewClient(ctx)
	Expect(err).NotTo(HaveOccurred())
	go func() {
		defer GinkgoRecover()
		defer func() { _ = cli.Close() }()
		for ctx.Err() == nil {
			resp, err := cli.MemberList(ctx)
			if err == nil && !slices.ContainsFunc(resp.Members, func(m *pb.Member) bool { return m.ID == id }) {
				got := &corev1.Pod{}
				err := c.workload.APIServer.Client.Get(ctx, client.ObjectKeyFromObject(pod), got)
				switch {
				case apierrors.IsNotFound(err) || (err == nil && !got.DeletionTimestamp.IsZero()):
					out <- ""
				case err != nil:
					out <- fmt.Sprintf("reading Pod %s after member %x was removed: %v", pod.Name, id, err)
				default:
					out <- fmt.Sprintf("member %x was removed while Pod %s on its Node was neither evicted nor deleting", id, pod.Name)
				}
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	return out
}

// expectMemberSeries waits until the per-member metrics of c's Cluster name exactly the members
// on nodes (kubeadm names a member after its Node), with the figures of a live member: a
// database, a raft term, one leader, and recent evidence.
func expectMemberSeries(ctx context.Context, c *testCluster, nodes []string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		size := memberSeries(g, c, "etcdadapter_member_db_size_bytes")
		g.Expect(slices.Sorted(maps.Keys(size))).To(Equal(slices.Sorted(slices.Values(nodes))))
		for m, v := range size {
			g.Expect(v).To(BeNumerically(">", 0), "member %s", m)
		}
		for m, v := range memberSeries(g, c, "etcdadapter_member_raft_term") {
			g.Expect(v).To(BeNumerically(">", 0), "member %s", m)
		}
		leaders := 0.0
		for _, v := range memberSeries(g, c, "etcdadapter_member_is_leader") {
			leaders += v
		}
		g.Expect(leaders).To(Equal(1.0))
		for m, v := range memberSeries(g, c, "etcdadapter_member_last_observed_timestamp_seconds") {
			g.Expect(time.Since(time.Unix(int64(v), 0))).To(BeNumerically("<", 5*time.Minute), "member %s", m)
		}
	}, reconcileTimeout).WithContext(ctx).Should(Succeed())
}

// memberSeries reads the named metric's series of c's Cluster from the manager's registry (the
// adapter runs in this process), by member.
func memberSeries(g Gomega, c *testCluster, name string) map[string]float64 {
	fams, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, lp := range m.GetLabel() {
				l[lp.GetName()] = lp.GetValue()
			}
			if l["namespace"] == c.cluster.Namespace && l["cluster"] == c.cluster.Name {
				out[l["member"]] = m.GetGauge().GetValue()
			}
		}
	}
	return out
}
