package env

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/test/env/infra"
	"github.com/etcd-adapter/etcd-adapter/test/env/kubelet"
	"github.com/etcd-adapter/etcd-adapter/test/env/pki"
)

const (
	// testHook is the pre-terminate hook this test holds the Machine with.
	testHook = clusterv1.PreTerminateDeleteHookAnnotationPrefix + "/test-env"

	// drainTimeout covers Cluster API's 20s drain re-check interval (drainRetryInterval) plus
	// slack for a busy machine.
	drainTimeout = 50 * time.Second

	// reconcileTimeout bounds ordinary reconciles and watch round trips.
	reconcileTimeout = 20 * time.Second
)

// TestMachineDeletion_drainsThenWaitsForPreTerminateHook runs Cluster API's own Machine
// controller against a real workload apiserver: deleting a control-plane Machine evicts the Pod
// on its Node, then waits on the pre-terminate hook (Deleting reason WaitingForPreTerminateHook)
// with the TestMachine and the Node still there, and only once the hook is gone deletes both.
// Each Node has a kubelet stand-in, which keeps it Ready and finishes the Pod's graceful deletion
// after the eviction.
func TestMachineDeletion_drainsThenWaitsForPreTerminateHook(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	p := sharedPair(t)
	cluster := registerTestCluster(ctx, t, p)
	wl := p.workload.Client

	doomed := createBoundMachine(ctx, t, p, cluster, "cp-0", map[string]string{testHook: "test-env"})
	kept := createBoundMachine(ctx, t, p, cluster, "cp-1", nil)
	doomedNode := client.ObjectKey{Name: doomed.Status.NodeRef.Name}
	pod := createPod(ctx, t, wl, doomedNode.Name)

	g.Expect(p.mgmt.Client.Delete(ctx, doomed)).To(Succeed())

	t.Log("Waiting for the drain to evict the Pod and the Machine to wait on the pre-terminate hook")
	g.Eventually(func() error {
		return wl.Get(ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
	}, drainTimeout).Should(Satisfy(apierrors.IsNotFound))
	g.Eventually(func() string {
		return deletingReason(ctx, p.mgmt.Client, doomed)
	}, drainTimeout).Should(Equal(clusterv1.MachineDeletingWaitingForPreTerminateHookReason))
	node := &corev1.Node{}
	g.Expect(wl.Get(ctx, doomedNode, node)).To(Succeed())
	g.Expect(node.Spec.Unschedulable).To(BeTrue(), "the drained Node must be cordoned")
	g.Consistently(func() error {
		return p.mgmt.Client.Get(ctx, client.ObjectKeyFromObject(doomed), infra.NewMachine("", "", ""))
	}, 2*time.Second).Should(Succeed(), "the TestMachine must stay while the hook is there")

	t.Log("Removing the hook; the Machine controller must delete the TestMachine, the Node and the Machine")
	removeAnnotation(ctx, t, p.mgmt.Client, doomed, testHook)
	g.Eventually(func() error {
		return p.mgmt.Client.Get(ctx, client.ObjectKeyFromObject(doomed), infra.NewMachine("", "", ""))
	}, reconcileTimeout).Should(Satisfy(apierrors.IsNotFound))
	g.Eventually(func() error {
		return wl.Get(ctx, doomedNode, &corev1.Node{})
	}, reconcileTimeout).Should(Satisfy(apierrors.IsNotFound))
	g.Eventually(func() error {
		return p.mgmt.Client.Get(ctx, client.ObjectKeyFromObject(doomed), &clusterv1.Machine{})
	}, reconcileTimeout).Should(Satisfy(apierrors.IsNotFound))
	g.Expect(wl.Get(ctx, client.ObjectKey{Name: kept.Status.NodeRef.Name}, &corev1.Node{})).To(Succeed())
}

// registerTestCluster registers the workload apiserver as Cluster "workload" with a fresh etcd CA
// and checks the Secrets Cluster API and KCP read.
func registerTestCluster(ctx context.Context, t *testing.T, p pair) *clusterv1.Cluster {
	t.Helper()
	g := NewWithT(t)
	ca, err := pki.NewCA()
	g.Expect(err).NotTo(HaveOccurred())
	cluster, err := RegisterCluster(ctx, p.mgmt.Client, ClusterInput{
		Namespace:  createNamespace(ctx, t, p.mgmt),
		Name:       "workload",
		Workload:   p.workload.Config,
		EtcdCACert: ca.CertPEM(),
		EtcdCAKey:  ca.KeyPEM(),
	})
	g.Expect(err).NotTo(HaveOccurred())
	etcd := &corev1.Secret{}
	g.Expect(p.mgmt.Client.Get(ctx, client.ObjectKey{Namespace: cluster.Namespace, Name: "workload-etcd"}, etcd)).To(Succeed())
	g.Expect(etcd.Type).To(Equal(clusterv1.ClusterSecretType))
	g.Expect(etcd.Labels).To(HaveKeyWithValue(clusterv1.ClusterNameLabel, "workload"))
	fromSecret, err := pki.CAFromSecret(etcd)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fromSecret.Certificate().Equal(ca.Certificate())).To(BeTrue())
	g.Eventually(func() error {
		_, err := p.mgmt.ClusterCache.GetClient(ctx, client.ObjectKeyFromObject(cluster))
		return err
	}, reconcileTimeout).Should(Succeed(), "the ClusterCache must connect through the kubeconfig Secret")
	return cluster
}

// createBoundMachine starts a kubelet stand-in that registers a workload Node, creates a
// control-plane Machine for it, and waits until Cluster API has bound them (status.nodeRef).
// The Node is named <namespace>-<name>, unique in the shared workload apiserver.
func createBoundMachine(ctx context.Context, t *testing.T, p pair, cluster *clusterv1.Cluster, name string, annotations map[string]string) *clusterv1.Machine {
	t.Helper()
	g := NewWithT(t)
	nodeName := cluster.Namespace + "-" + name
	providerID := "test://" + nodeName
	k, err := kubelet.Start(ctx, kubelet.Options{NodeName: nodeName, Config: p.workload.Config, ProviderID: providerID})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(k.Stop()).To(Succeed()) })
	m, err := CreateControlPlaneMachine(ctx, p.mgmt.Client, MachineInput{
		Cluster: cluster, Name: name, ProviderID: providerID, Annotations: annotations,
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		g.Expect(p.mgmt.Client.Get(ctx, client.ObjectKeyFromObject(m), m)).To(Succeed())
		g.Expect(m.Status.NodeRef.Name).To(Equal(nodeName))
	}, reconcileTimeout).Should(Succeed())
	return m
}

// createPod binds a Pod with the default 30s grace period to the Node: after the eviction only
// the kubelet stand-in finishing the graceful deletion makes it go away.
func createPod(ctx context.Context, t *testing.T, c client.Client, nodeName string) *corev1.Pod {
	t.Helper()
	g := NewWithT(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: "evict-me-" + nodeName},
		Spec: corev1.PodSpec{
			NodeName:   nodeName,
			Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app"}},
		},
	}
	g.Expect(c.Create(ctx, pod)).To(Succeed())
	return pod
}

func deletingReason(ctx context.Context, c client.Client, m *clusterv1.Machine) string {
	got := &clusterv1.Machine{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(m), got); err != nil {
		return err.Error()
	}
	if cond := conditions.Get(got, clusterv1.MachineDeletingCondition); cond != nil {
		return cond.Reason
	}
	return ""
}

func removeAnnotation(ctx context.Context, t *testing.T, c client.Client, m *clusterv1.Machine, key string) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(c.Get(ctx, client.ObjectKeyFromObject(m), m)).To(Succeed())
	before := m.DeepCopy()
	delete(m.Annotations, key)
	g.Expect(c.Patch(ctx, m, client.MergeFrom(before))).To(Succeed())
}
