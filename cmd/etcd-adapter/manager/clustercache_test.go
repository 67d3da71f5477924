package manager

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	ctrl "sigs.k8s.io/controller-runtime"
	ctrlcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/etcd-adapter/etcd-adapter/test/env"
)

// TestClusterCache_cachesEtcdNodesOnly registers a workload cluster (a real apiserver) that has
// a K3s server, a K3s etcd-only server, a kubeadm control-plane Node and worker Nodes, and reads
// the manager's ClusterCache: it holds the two etcd Nodes only, with their labels, annotations,
// conditions and kubelet version, and without managed fields, images or capacity.
func TestClusterCache_cachesEtcdNodesOnly(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := createNamespace(ctx, g)
	workload, err := env.StartAPIServer(env.APIServerOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(workload.Stop()).To(Succeed()) })

	nodes := []struct {
		name   string
		labels map[string]string
	}{
		{"server", map[string]string{"node-role.kubernetes.io/control-plane": "true", "node-role.kubernetes.io/etcd": "true"}},
		{"etcd-only", map[string]string{"node-role.kubernetes.io/etcd": "true"}},
		{"kubeadm-cp", map[string]string{"node-role.kubernetes.io/control-plane": ""}},
		{"worker-0", map[string]string{"kubernetes.io/os": "linux"}},
		{"worker-1", nil},
	}
	for _, n := range nodes {
		createNode(ctx, g, workload.Client, n.name, n.labels)
	}

	cc := startClusterCache(ctx, t, g)
	cluster, err := env.RegisterCluster(ctx, mgmt.Client, env.ClusterInput{Namespace: ns, Name: "fleet", Workload: workload.Config})
	g.Expect(err).NotTo(HaveOccurred())

	list := &corev1.NodeList{}
	g.Eventually(func() error {
		r, err := cc.GetReader(ctx, client.ObjectKeyFromObject(cluster))
		if err != nil {
			return err
		}
		return r.List(ctx, list)
	}).WithTimeout(time.Minute).Should(Succeed())
	var names []string
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	slices.Sort(names)
	g.Expect(names).To(Equal([]string{"etcd-only", "server"}), "the cache holds the etcd Nodes and no other")

	for _, n := range list.Items {
		g.Expect(n.Labels).To(HaveKeyWithValue("node-role.kubernetes.io/etcd", "true"))
		g.Expect(n.Annotations).To(HaveKeyWithValue("etcd.k3s.cattle.io/node-name", n.Name+"-0a1b2c3d"))
		g.Expect(n.Status.NodeInfo.KubeletVersion).To(Equal("v1.34.2+k3s1"))
		g.Expect(n.Status.Conditions).To(ContainElement(HaveField("Type", corev1.NodeReady)))
		g.Expect(n.Spec.Unschedulable).To(BeTrue())
		g.Expect(n.ManagedFields).To(BeEmpty(), "Node %s", n.Name)
		g.Expect(n.Status.Images).To(BeEmpty(), "Node %s", n.Name)
		g.Expect(n.Status.Capacity).To(BeEmpty(), "Node %s", n.Name)
		g.Expect(n.Status.NodeInfo.OSImage).To(BeEmpty(), "Node %s", n.Name)
	}
}

// TestClusterCache_connectsWithoutInformers connects the manager's ClusterCache to a workload
// cluster (a real apiserver) and looks into the workload cache afterwards: it has no Node
// informer yet. A kubeadm Cluster never reads the workload cache, so an informer started at
// connect (Cluster API's Node provider-ID index does that) would be a watch and its goroutines
// held for nothing. The probe is a watcher that asks the cache for its Node informer: one that
// existed has listed already, one the probe starts has not.
func TestClusterCache_connectsWithoutInformers(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ns := createNamespace(ctx, g)
	workload, err := env.StartAPIServer(env.APIServerOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(workload.Stop()).To(Succeed()) })
	createNode(ctx, g, workload.Client, "cp-0", map[string]string{"node-role.kubernetes.io/etcd": "true"})

	cc := startClusterCache(ctx, t, g)
	cluster, err := env.RegisterCluster(ctx, mgmt.Client, env.ClusterInput{Namespace: ns, Name: "w", Workload: workload.Config})
	g.Expect(err).NotTo(HaveOccurred())
	key := client.ObjectKeyFromObject(cluster)
	g.Eventually(func() error {
		_, err := cc.GetRESTConfig(ctx, key)
		return err
	}).WithTimeout(time.Minute).Should(Succeed())

	probe := &nodeInformerProbe{}
	g.Expect(cc.Watch(ctx, key, probe)).To(Succeed())
	g.Expect(probe.existed).To(BeFalse(), "connecting to the workload cluster started its Node informer")
	// The measure sees an informer that exists: the one the probe started, once it listed.
	attempt := 0
	g.Eventually(func() (bool, error) {
		// Note: the ClusterCache calls a watcher once per name.
		attempt++
		again := &nodeInformerProbe{name: strconv.Itoa(attempt)}
		err := cc.Watch(ctx, key, again)
		return again.existed, err
	}).WithTimeout(30 * time.Second).Should(BeTrue())
}

// nodeInformerProbe is a ClusterCache watcher that gets the workload cache's Node informer, as
// the K3s backend's watcher does, and records whether it had listed already (existed before).
type nodeInformerProbe struct {
	name    string
	existed bool
}

func (p *nodeInformerProbe) Name() string          { return "test-nodes-probe" + p.name }
func (p *nodeInformerProbe) Object() client.Object { return &corev1.Node{} }
func (p *nodeInformerProbe) Watch(c ctrlcache.Cache) error {
	informer, err := c.GetInformer(context.Background(), &corev1.Node{}, ctrlcache.BlockUntilSynced(false))
	if err != nil {
		return err
	}
	p.existed = informer.HasSynced()
	return nil
}

// startClusterCache runs a manager with the ClusterCache the manager binary sets up (its
// options), until the test ends.
func startClusterCache(ctx context.Context, t *testing.T, g *WithT) clustercache.ClusterCache {
	o, _, _ := testOptions(g)
	mgr, err := ctrl.NewManager(mgmt.Config, ctrl.Options{
		Scheme:     Scheme(),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	g.Expect(err).NotTo(HaveOccurred())
	cc, err := setupClusterCache(ctx, mgr, o)
	g.Expect(err).NotTo(HaveOccurred())
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(runCtx) }()
	t.Cleanup(func() {
		stop()
		g.Expect(<-done).To(Succeed())
	})
	return cc
}

// createNode creates a Node with the given labels, a K3s member annotation, spec.unschedulable,
// and a status as a kubelet writes it (images, capacity, node info, Ready).
func createNode(ctx context.Context, g Gomega, c client.Client, name string, labels map[string]string) {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels,
			Annotations: map[string]string{"etcd.k3s.cattle.io/node-name": name + "-0a1b2c3d"}},
		Spec: corev1.NodeSpec{Unschedulable: true},
	}
	g.Expect(c.Create(ctx, n)).To(Succeed())
	n.Status = corev1.NodeStatus{
		Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")},
		Images: []corev1.ContainerImage{{
			Names: []string{"registry.k8s.io/pause:3.10", strings.Repeat("a", 64)}, SizeBytes: 1 << 20,
		}},
		NodeInfo:   corev1.NodeSystemInfo{KubeletVersion: "v1.34.2+k3s1", OSImage: "K3s"},
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}},
	}
	g.Expect(c.Status().Update(ctx, n)).To(Succeed())
}
