package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
	"github.com/etcd-adapter/etcd-adapter/test/env/k3ssim"
	"github.com/etcd-adapter/etcd-adapter/test/env/kubelet"
	"github.com/etcd-adapter/etcd-adapter/test/env/workload"
)

const (
	// reconcileTimeout bounds ordinary reconciles and watch round trips.
	reconcileTimeout = time.Minute
	// deletionTimeout covers Cluster API's drain (it re-checks evicted Pods every 20 s), the
	// member removal and the deletion of the infrastructure Machine and Node.
	deletionTimeout = 3 * time.Minute
)

// testCluster is a workload cluster of either flavour registered in the management cluster with
// a ControlPlaneEtcd and one bound control-plane Machine per Node.
type testCluster struct {
	workload workloadParts
	cluster  *clusterv1.Cluster
	cpe      *v1alpha1.ControlPlaneEtcd
	machines map[string]*clusterv1.Machine // by Node name
}

// k3sOptions shape a test's K3s cluster.
type k3sOptions struct {
	// version is the simulated K3s version; members the number of servers (default 3).
	version string
	members int
}

// observationInterval is the ControlPlaneEtcds' spec.observationInterval in this suite: short,
// so that status tests see many periodic passes.
const observationInterval = time.Second

// startK3sCluster starts a K3s workload cluster, registers it, creates its ControlPlaneEtcd and a
// control-plane Machine per Node, and waits until Cluster API bound them and etcd-adapter put its
// hook on every Machine.
func startK3sCluster(ctx context.Context, opts k3sOptions) *testCluster {
	wl, err := workload.StartK3s(ctx, workload.K3sOptions{Version: opts.version, Members: opts.members, Tick: 200 * time.Millisecond})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(wl.Close)
	return registerTestCluster(ctx, workloadParts{APIServer: wl.APIServer, Etcd: wl.Etcd, Nodes: wl.Nodes, Kubelet: wl.Kubelet, Simulator: wl.Simulator, K3s: wl}, v1alpha1.BackendK3s, v1alpha1.ModeManage)
}

// startKubeadmCluster starts a kubeadm workload cluster of the given size, registers it, creates
// its ControlPlaneEtcd in the given mode and a control-plane Machine per Node, and in Manage mode
// waits for etcd-adapter's hook on every Machine.
func startKubeadmCluster(ctx context.Context, members int, mode v1alpha1.Mode) *testCluster {
	return startKubeadmClusterWith(ctx, workload.KubeadmOptions{Members: members}, mode)
}

// startKubeadmClusterWith is startKubeadmCluster for a workload cluster started with opts.
func startKubeadmClusterWith(ctx context.Context, opts workload.KubeadmOptions, mode v1alpha1.Mode) *testCluster {
	wl, err := workload.StartKubeadm(ctx, opts)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(wl.Close)
	return registerTestCluster(ctx, workloadParts{APIServer: wl.APIServer, Etcd: wl.Etcd, Nodes: wl.Nodes, Kubelet: wl.Kubelet, Kubeadm: wl}, v1alpha1.BackendKubeadm, mode)
}

// workloadParts are what the tests use of either flavour's workload cluster.
type workloadParts struct {
	APIServer *env.APIServer
	Etcd      *etcdcluster.Cluster
	Nodes     []string
	Kubelet   func(node string) *kubelet.Kubelet
	// Simulator is the K3s simulator of a K3s cluster; Kubeadm the kubeadm cluster itself.
	Simulator *k3ssim.Simulator
	Kubeadm   *workload.Kubeadm
	// K3s is a K3s cluster itself (to join servers).
	K3s *workload.K3s
}

// registerTestCluster registers the workload cluster (with its etcd CA, as KCP keeps it),
// creates its ControlPlaneEtcd with the given backend and mode and a bound Machine per Node, and
// in Manage mode waits for the hooks.
func registerTestCluster(ctx context.Context, wl workloadParts, backend v1alpha1.Backend, mode v1alpha1.Mode) *testCluster {
	c := &testCluster{workload: wl, machines: map[string]*clusterv1.Machine{}}
	ns := createNamespace(ctx)
	name := string(backend)
	var err error
	c.cluster, err = env.RegisterCluster(ctx, mgmt.Client, env.ClusterInput{Namespace: ns, Name: name, Workload: wl.APIServer.Config,
		EtcdCACert: wl.Etcd.CA().CertPEM(), EtcdCAKey: wl.Etcd.CA().KeyPEM()})
	Expect(err).NotTo(HaveOccurred())
	c.cpe = &v1alpha1.ControlPlaneEtcd{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: v1alpha1.ControlPlaneEtcdSpec{ClusterName: name, Backend: backend, Mode: mode,
			ObservationInterval: &metav1.Duration{Duration: observationInterval}},
	}
	// Note: the Machines are bound before the ControlPlaneEtcd exists, so etcd-adapter's first
	// pass already finds every member on its Machine's Node (a ControlPlaneEtcd created first
	// once led etcd-adapter to remove a live member whose Machine did not exist yet).
	for _, node := range wl.Nodes {
		c.machines[node] = bindMachine(ctx, c.cluster, wl.APIServer.Client, node)
	}
	Expect(mgmt.Client.Create(ctx, c.cpe)).To(Succeed())
	if mode == v1alpha1.ModeManage {
		c.waitForHooks(ctx)
	}
	return c
}

// bindMachine gives the Node a providerID and creates a control-plane Machine reporting it;
// Cluster API's Machine controller then binds them (status.nodeRef).
func bindMachine(ctx context.Context, cluster *clusterv1.Cluster, wl client.Client, node string) *clusterv1.Machine {
	setProviderID(ctx, wl, node, providerIDOf(cluster, node))
	m := createMachine(ctx, cluster, node)
	waitForNodeRef(ctx, m, node)
	return m
}

// createMachine creates the control-plane Machine for the Node, before the Node exists, as
// Cluster API creates a Machine before its Node joins; it is provisioning until bindNode.
func createMachine(ctx context.Context, cluster *clusterv1.Cluster, node string) *clusterv1.Machine {
	m, err := env.CreateControlPlaneMachine(ctx, mgmt.Client, env.MachineInput{Cluster: cluster, Name: "m-" + node, ProviderID: providerIDOf(cluster, node)})
	Expect(err).NotTo(HaveOccurred())
	return m
}

func providerIDOf(cluster *clusterv1.Cluster, node string) string {
	return fmt.Sprintf("test://%s/%s", cluster.Namespace, node)
}

func setProviderID(ctx context.Context, wl client.Client, node, providerID string) {
	n := &corev1.Node{}
	Expect(wl.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
	before := n.DeepCopy()
	n.Spec.ProviderID = providerID
	Expect(wl.Patch(ctx, n, client.MergeFrom(before))).To(Succeed())
}

func waitForNodeRef(ctx context.Context, m *clusterv1.Machine, node string) {
	Eventually(func(g Gomega) {
		g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), m)).To(Succeed())
		g.Expect(m.Status.NodeRef.Name).To(Equal(node))
	}, reconcileTimeout).Should(Succeed(), "Cluster API must bind Machine %s to Node %s", m.Name, node)
}

func (c *testCluster) waitForHooks(ctx context.Context) {
	Eventually(func(g Gomega) {
		for _, m := range c.machines {
			got := &clusterv1.Machine{}
			g.Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), got)).To(Succeed())
			g.Expect(got.Annotations).To(HaveKeyWithValue(v1alpha1.PreTerminateHookAnnotation, v1alpha1.PreTerminateHookValue))
		}
	}, reconcileTimeout).Should(Succeed(), "etcd-adapter must hold every control-plane Machine with its hook")
}

// status reads the ControlPlaneEtcd.
func (c *testCluster) status(ctx context.Context) *v1alpha1.ControlPlaneEtcd {
	got := &v1alpha1.ControlPlaneEtcd{}
	Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(c.cpe), got)).To(Succeed())
	return got
}

func createNamespace(ctx context.Context) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "e2e-"}}
	Expect(mgmt.Client.Create(ctx, ns)).To(Succeed())
	return ns.Name
}

// createPod binds a Pod to the Node; Cluster API's drain evicts it and the kubelet stand-in
// finishes its deletion.
func createPod(ctx context.Context, wl client.Client, node string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "app-" + node},
		Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app"}}},
	}
	Expect(wl.Create(ctx, pod)).To(Succeed())
	return pod
}

func conditionStatus(cpe *v1alpha1.ControlPlaneEtcd, t string) metav1.ConditionStatus {
	for _, c := range cpe.Status.Conditions {
		if c.Type == t {
			return c.Status
		}
	}
	return ""
}

func patchAnnotation(ctx context.Context, m *clusterv1.Machine, key, value string) {
	Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), m)).To(Succeed())
	before := m.DeepCopy()
	if m.Annotations == nil {
		m.Annotations = map[string]string{}
	}
	m.Annotations[key] = value
	Expect(mgmt.Client.Patch(ctx, m, client.MergeFrom(before))).To(Succeed())
}

func patchFinalizer(ctx context.Context, cluster *clusterv1.Cluster, f string) {
	Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)).To(Succeed())
	before := cluster.DeepCopy()
	cluster.Finalizers = append(cluster.Finalizers, f)
	Expect(mgmt.Client.Patch(ctx, cluster, client.MergeFrom(before))).To(Succeed())
}

func removeFinalizer(ctx context.Context, cluster *clusterv1.Cluster, f string) {
	Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)).To(Succeed())
	before := cluster.DeepCopy()
	var keep []string
	for _, x := range cluster.Finalizers {
		if x != f {
			keep = append(keep, x)
		}
	}
	cluster.Finalizers = keep
	Expect(mgmt.Client.Patch(ctx, cluster, client.MergeFrom(before))).To(Succeed())
}

func setPaused(ctx context.Context, cluster *clusterv1.Cluster, paused bool) {
	Expect(mgmt.Client.Get(ctx, client.ObjectKeyFromObject(cluster), cluster)).To(Succeed())
	before := cluster.DeepCopy()
	cluster.Spec.Paused = &paused
	Expect(mgmt.Client.Patch(ctx, cluster, client.MergeFrom(before))).To(Succeed())
}
