package fleetbench

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/k3s"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/managerproc"
)

// A hostile K3s workload cluster: its admins labelled thousands of Nodes etcd servers, each with
// a large annotation (about 45 MiB of Nodes in all).
const (
	hostileK3sNodes        = 1500
	hostileAnnotationBytes = 30 << 10
	// hostileObservation is the manager's observation interval here: short, so that the hostile
	// Cluster is observed many times while the test runs.
	hostileObservation = 3 * time.Second
	// hostileHeapGrowth bounds how much the manager's heap in use may grow for a hostile Cluster
	// beside a good one; unbounded, the hostile Nodes alone would be about 45 MiB.
	hostileHeapGrowth = 16 << 20
)

// TestManagerBesideHostileTenants runs the manager binary, as it is deployed, for a good K3s
// Cluster and a hostile one: the hostile Cluster's ControlPlaneEtcd says InputTooLarge, the good
// Cluster's status keeps following its etcd (a member stops and comes back), and the manager's
// heap in use stays flat.
func TestManagerBesideHostileTenants(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	mgmt := startManagement(ctx, t)
	dir := t.TempDir()
	bin, err := managerproc.Build(ctx, dir, mgmt.Config)
	g.Expect(err).NotTo(HaveOccurred())

	f := &fleet{mgmt: mgmt, ns: "hostile", backend: v1alpha1.BackendK3s, share: 1}
	g.Expect(mgmt.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: f.ns}})).To(Succeed())
	t.Cleanup(func() { _ = f.close() })
	proc, err := startManagerProcess(ctx, bin, dir, "all", "--observation-interval="+hostileObservation.String())
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = proc.Stop() })
	g.Expect(f.grow(ctx, 1)).To(Succeed())
	good := client.ObjectKey{Namespace: f.ns, Name: f.name(0)}

	hostile := startHostileK3s(ctx, t, g)
	g.Expect(sleep(ctx, settle)).To(Succeed())
	before, err := proc.sample()
	g.Expect(err).NotTo(HaveOccurred())

	_, err = env.RegisterCluster(ctx, mgmt.Client, env.ClusterInput{Namespace: f.ns, Name: "hostile-k3s", Workload: hostile.Config})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(mgmt.Client.Create(ctx, &v1alpha1.ControlPlaneEtcd{
		ObjectMeta: metav1.ObjectMeta{Namespace: f.ns, Name: "hostile-k3s"},
		Spec:       v1alpha1.ControlPlaneEtcdSpec{ClusterName: "hostile-k3s", Backend: v1alpha1.BackendK3s, Mode: v1alpha1.ModeObserve},
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		cpe := &v1alpha1.ControlPlaneEtcd{}
		g.Expect(mgmt.Client.Get(ctx, client.ObjectKey{Namespace: f.ns, Name: "hostile-k3s"}, cpe)).To(Succeed())
		c := conditions.Get(cpe, v1alpha1.EtcdClusterHealthyCondition)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(v1alpha1.EtcdClusterInputTooLargeReason), c.Message)
	}, 3*time.Minute, time.Second).Should(Succeed(), "the hostile Cluster must say its input is too large")

	t.Log("the good Cluster's member on cp-2 stops: its status must say so while the hostile Cluster is observed every few seconds")
	g.Expect(f.workloads[0].fail(ctx, "cp-2")).To(Succeed())
	g.Eventually(func(g Gomega) {
		cpe := &v1alpha1.ControlPlaneEtcd{}
		g.Expect(mgmt.Client.Get(ctx, good, cpe)).To(Succeed())
		g.Expect(cpe.Status.Members).To(ContainElement(SatisfyAll(
			HaveField("NodeName", "cp-2"), HaveField("Health", Not(Equal(v1alpha1.MemberHealthy))))))
	}, 3*time.Minute, time.Second).Should(Succeed())
	g.Expect(f.workloads[0].recover(ctx, "cp-2")).To(Succeed())
	g.Eventually(func(g Gomega) {
		cpe := &v1alpha1.ControlPlaneEtcd{}
		g.Expect(mgmt.Client.Get(ctx, good, cpe)).To(Succeed())
		g.Expect(healthy(cpe)).To(BeTrue(), "members: %+v", cpe.Status.Members)
	}, 3*time.Minute, time.Second).Should(Succeed(), "the good Cluster's status must follow its etcd back")

	// Many observations of the hostile Cluster later.
	g.Expect(sleep(ctx, 10*hostileObservation)).To(Succeed())
	after, err := proc.sample()
	g.Expect(err).NotTo(HaveOccurred())
	grown := (after.heapMiB - before.heapMiB) * (1 << 20)
	t.Logf("manager heap in use: %.1f MiB with the good Cluster, %.1f MiB with the hostile one beside it (%+.1f MiB; %d etcd Nodes of %d KiB annotations, observed every %v); RSS %.1f → %.1f MiB",
		before.heapMiB, after.heapMiB, grown/(1<<20), hostileK3sNodes, hostileAnnotationBytes>>10, hostileObservation, before.rssMiB, after.rssMiB)
	g.Expect(grown).To(BeNumerically("<", hostileHeapGrowth), "the manager's heap grew by %.1f MiB", grown/(1<<20))
}

// startHostileK3s starts a workload apiserver with hostileK3sNodes etcd-labelled Nodes, each with
// a large annotation.
func startHostileK3s(ctx context.Context, t *testing.T, g Gomega) *env.APIServer {
	api, err := env.StartAPIServer(env.APIServerOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = api.Stop() })
	big := strings.Repeat("x", hostileAnnotationBytes)
	g.Expect(env.CreateEach(ctx, hostileK3sNodes, func(ctx context.Context, i int) error {
		return api.Client.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:        fmt.Sprintf("hostile-%04d", i),
			Labels:      map[string]string{k3s.EtcdRoleLabel: "true"},
			Annotations: map[string]string{"hostile.example.com/blob": big, k3s.KeysFor("k3s").NodeName: fmt.Sprintf("hostile-%04d-0123abcd", i)},
		}})
	})).To(Succeed())
	return api
}
