package workload

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/test/env/k3ssim"
	"github.com/etcd-adapter/etcd-adapter/test/env/kubelet"
)

// TestStartKubeadm starts a 3-member kubeadm-flavoured cluster on its own apiserver and prints
// how long it took from nothing to every member answering.
func TestStartKubeadm(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	start := time.Now()
	k, err := StartKubeadm(ctx, KubeadmOptions{Members: 3})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(k.Close()).To(Succeed()) })
	g.Eventually(func(g Gomega) { kubeadmReady(ctx, g, k) }).WithTimeout(time.Minute).WithPolling(50 * time.Millisecond).Should(Succeed())
	fmt.Printf("3-member kubeadm workload cluster (apiserver, etcd, kubelets, etcd Pods) ready in %v\n", time.Since(start).Round(time.Millisecond))
}

func kubeadmReady(ctx context.Context, g Gomega, k *Kubeadm) {
	g.Expect(k.Nodes).To(HaveLen(3))
	for _, node := range k.Nodes {
		n := &corev1.Node{}
		g.Expect(k.APIServer.Client.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
		g.Expect(readyStatus(n)).To(Equal(corev1.ConditionTrue))
		pod := &corev1.Pod{}
		g.Expect(k.APIServer.Client.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: kubelet.EtcdPodName(node)}, pod)).To(Succeed())
		g.Expect(pod.Spec.NodeName).To(Equal(node))
		g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
	}
	for _, m := range k.Etcd.Members() {
		cli, err := m.NewClient(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		resp, err := cli.MemberList(ctx)
		_ = cli.Close()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.Members).To(HaveLen(3))
	}
}

// TestStartK3s starts a 3-server K3s-flavoured cluster per removal generation and prints how
// long each took from nothing to every Node annotated with a voter condition.
func TestStartK3s(t *testing.T) {
	for _, version := range []string{"v1.27.10+k3s1", "v1.33.4+k3s1", "v1.34.2+k3s1"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			g := NewWithT(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()

			start := time.Now()
			k, err := StartK3s(ctx, K3sOptions{Version: version, Members: 3, Tick: 200 * time.Millisecond})
			g.Expect(err).NotTo(HaveOccurred())
			t.Cleanup(func() { g.Expect(k.Close()).To(Succeed()) })
			fmt.Printf("3-server K3s %s workload cluster (apiserver, etcd, kubelets, simulator) ready in %v\n", version, time.Since(start).Round(time.Millisecond))

			keys := k.Simulator.Profile().Keys
			for _, node := range k.Nodes {
				n := &corev1.Node{}
				g.Expect(k.APIServer.Client.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
				g.Expect(n.Annotations[keys.NodeName]).To(MatchRegexp("^" + regexp.QuoteMeta(node) + "-[0-9a-f]{8}$"))
				g.Expect(n.Labels).To(HaveKeyWithValue("node-role.kubernetes.io/etcd", "true"))
				g.Expect(n.Status.NodeInfo.KubeletVersion).To(Equal(version))
				g.Expect(readyStatus(n)).To(Equal(corev1.ConditionTrue))
				g.Eventually(func(g Gomega) {
					g.Expect(k.APIServer.Client.Get(ctx, client.ObjectKey{Name: node}, n)).To(Succeed())
					c := condition(n, k3ssim.EtcdIsVoterCondition)
					g.Expect(c).NotTo(BeNil())
					g.Expect(c.Status).To(Equal(corev1.ConditionTrue))
				}).WithTimeout(30 * time.Second).Should(Succeed())
			}
		})
	}
}

func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	if c := condition(n, corev1.NodeReady); c != nil {
		return c.Status
	}
	return corev1.ConditionUnknown
}

func condition(n *corev1.Node, t corev1.NodeConditionType) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == t {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}
