package kubelet_test

import (
	"net"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/test/env/kubelet"
)

func TestPortForward(t *testing.T) {
	c, nodes := startNodes(t, "pf", 3)
	for _, p := range []protocol{spdyProtocol, websocketProtocol} {
		t.Run(string(p)+" reaches each Node's member with server verification", func(t *testing.T) {
			for _, n := range nodes {
				g := NewWithT(t)
				addr, err := forward(t, p, metav1.NamespaceSystem, kubelet.EtcdPodName(n.member.NodeName()))
				g.Expect(err).NotTo(HaveOccurred())
				resp, err := memberListVia(t.Context(), c, addr, n.member.NodeName())
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(resp.Header.MemberId).To(Equal(n.member.ID()))
				g.Expect(resp.Members).To(HaveLen(3))
			}
		})
	}
	t.Run("server verification fails for another Node's name", func(t *testing.T) {
		g := NewWithT(t)
		addr, err := forward(t, spdyProtocol, metav1.NamespaceSystem, kubelet.EtcdPodName(nodes[0].member.NodeName()))
		g.Expect(err).NotTo(HaveOccurred())
		_, err = memberListVia(t.Context(), c, addr, nodes[1].member.NodeName())
		g.Expect(err).To(HaveOccurred())
	})
}

func TestKubelet_Retarget(t *testing.T) {
	g := NewWithT(t)
	c, nodes := startNodes(t, "split", 3)
	n := nodes[0]
	separate, err := c.StartSeparate(t.Context(), n.member.NodeName())
	g.Expect(err).NotTo(HaveOccurred())
	separateID, err := separate.ClusterID(t.Context())
	g.Expect(err).NotTo(HaveOccurred())

	n.kubelet.Retarget(kubelet.EtcdPort, separate.Members()[0].ClientAddress())
	for _, p := range []protocol{spdyProtocol, websocketProtocol} {
		addr, err := forward(t, p, metav1.NamespaceSystem, kubelet.EtcdPodName(n.member.NodeName()))
		g.Expect(err).NotTo(HaveOccurred())
		resp, err := memberListVia(t.Context(), c, addr, n.member.NodeName())
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(resp.Header.ClusterId).To(Equal(separateID), string(p))
		g.Expect(resp.Members).To(HaveLen(1))
	}
}

func TestKubelet_Break(t *testing.T) {
	g := NewWithT(t)
	c, nodes := startNodes(t, "broken", 1)
	n := nodes[0]
	pod := kubelet.EtcdPodName(n.member.NodeName())

	n.kubelet.Break()
	for _, p := range []protocol{spdyProtocol, websocketProtocol} {
		_, err := forward(t, p, metav1.NamespaceSystem, pod)
		g.Expect(err).To(HaveOccurred(), string(p))
	}
	node := &corev1.Node{}
	g.Expect(apiServer.Client.Get(t.Context(), client.ObjectKey{Name: n.member.NodeName()}, node)).To(Succeed())
	g.Expect(readyStatus(node)).To(Equal(corev1.ConditionTrue), "a broken kubelet still reports Ready")

	n.kubelet.Repair()
	addr, err := forward(t, spdyProtocol, metav1.NamespaceSystem, pod)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = memberListVia(t.Context(), c, addr, n.member.NodeName())
	g.Expect(err).NotTo(HaveOccurred())
}

func TestKubelet_node(t *testing.T) {
	g := NewWithT(t)
	k := startKubelet(t, uniqueName("heartbeat"), nil)

	node := getNode(t, k.NodeName())
	g.Expect(node.Status.Addresses).To(ConsistOf(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}))
	g.Expect(node.Status.DaemonEndpoints.KubeletEndpoint.Port).To(Equal(k.Port()))
	g.Expect(readyStatus(node)).To(Equal(corev1.ConditionTrue))

	t.Run("heartbeats keep Ready fresh", func(t *testing.T) {
		g := NewWithT(t)
		first := heartbeat(getNode(t, k.NodeName()))
		g.Eventually(func() time.Time { return heartbeat(getNode(t, k.NodeName())) }, 5*time.Second).Should(BeTemporally(">", first))
	})
	t.Run("SetNotReady and SetReady", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(k.SetNotReady(t.Context(), corev1.ConditionUnknown, "NodeStatusUnknown")).To(Succeed())
		g.Expect(readyStatus(getNode(t, k.NodeName()))).To(Equal(corev1.ConditionUnknown))
		g.Consistently(func() corev1.ConditionStatus { return readyStatus(getNode(t, k.NodeName())) }, 2*time.Second).
			Should(Equal(corev1.ConditionUnknown), "heartbeats keep the override")
		g.Expect(k.SetReady(t.Context())).To(Succeed())
		g.Expect(readyStatus(getNode(t, k.NodeName()))).To(Equal(corev1.ConditionTrue))
	})
}

func TestKubelet_pods(t *testing.T) {
	g := NewWithT(t)
	k := startKubelet(t, uniqueName("pods"), nil)

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, GenerateName: "workload-"},
		Spec: corev1.PodSpec{
			NodeName:   k.NodeName(),
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}},
		},
	}
	g.Expect(apiServer.Client.Create(t.Context(), pod)).To(Succeed())
	key := client.ObjectKeyFromObject(pod)

	t.Run("marks Pods on its Node Running and Ready", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func(g Gomega) {
			g.Expect(apiServer.Client.Get(t.Context(), key, pod)).To(Succeed())
			g.Expect(pod.Status.Phase).To(Equal(corev1.PodRunning))
			g.Expect(pod.Status.Conditions).To(ContainElement(And(
				HaveField("Type", corev1.PodReady), HaveField("Status", corev1.ConditionTrue))))
		}, 5*time.Second).Should(Succeed())
	})
	t.Run("finishes graceful deletion", func(t *testing.T) {
		g := NewWithT(t)
		g.Expect(apiServer.Client.Delete(t.Context(), pod, client.GracePeriodSeconds(30))).To(Succeed())
		g.Eventually(func() error { return apiServer.Client.Get(t.Context(), key, &corev1.Pod{}) }, 5*time.Second).
			Should(MatchError(ContainSubstring("not found")))
	})
}

func TestKubelet_Stop(t *testing.T) {
	g := NewWithT(t)
	_, nodes := startNodes(t, "stop", 1)
	k := nodes[0].kubelet
	pod := &corev1.Pod{}
	key := client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: kubelet.EtcdPodName(k.NodeName())}
	g.Expect(apiServer.Client.Get(t.Context(), key, pod)).To(Succeed())

	g.Expect(k.Stop()).To(Succeed())
	g.Expect(k.Stop()).To(Succeed(), "Stop is idempotent")
	last := heartbeat(getNode(t, k.NodeName()))
	g.Consistently(func() time.Time { return heartbeat(getNode(t, k.NodeName())) }, 2*time.Second).Should(Equal(last))

	_, err := forward(t, spdyProtocol, metav1.NamespaceSystem, key.Name)
	g.Expect(err).To(HaveOccurred(), "a stopped kubelet refuses port-forward")
	_, err = net.Dial("tcp", net.JoinHostPort(kubelet.NodeIP, strconv.Itoa(int(k.Port()))))
	g.Expect(err).To(HaveOccurred(), "nothing listens on the kubelet port")

	g.Expect(apiServer.Client.Delete(t.Context(), pod, client.GracePeriodSeconds(30))).To(Succeed())
	g.Consistently(func() error { return apiServer.Client.Get(t.Context(), key, &corev1.Pod{}) }, time.Second).
		Should(Succeed(), "nobody finishes the graceful deletion")
}

// getNode reads the Node.
func getNode(t *testing.T, name string) *corev1.Node {
	t.Helper()
	node := &corev1.Node{}
	NewWithT(t).Expect(apiServer.Client.Get(t.Context(), client.ObjectKey{Name: name}, node)).To(Succeed())
	return node
}

// TestKubelet_SetNotReady_duringHeartbeats sets and clears the override while heartbeats run
// back to back: when SetNotReady or SetReady returns, the Node must show it, also when a
// heartbeat that read the old state was on its way (it must not land afterwards).
func TestKubelet_SetNotReady_duringHeartbeats(t *testing.T) {
	g := NewWithT(t)
	name := uniqueName("busy")
	k, err := kubelet.Start(t.Context(), kubelet.Options{
		NodeName: name, Config: apiServer.Config, HeartbeatInterval: time.Millisecond,
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		g.Expect(k.Stop()).To(Succeed())
		deleteNow(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}})
	})
	for i := range 50 {
		g.Expect(k.SetNotReady(t.Context(), corev1.ConditionFalse, "KubeletNotReady")).To(Succeed())
		g.Expect(readyStatus(getNode(t, name))).To(Equal(corev1.ConditionFalse), "after SetNotReady %d", i)
		g.Expect(k.SetReady(t.Context())).To(Succeed())
		g.Expect(readyStatus(getNode(t, name))).To(Equal(corev1.ConditionTrue), "after SetReady %d", i)
	}
}

// readyStatus returns the status of the Node's Ready condition, empty if it has none.
func readyStatus(node *corev1.Node) corev1.ConditionStatus {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

// heartbeat returns the Ready condition's last heartbeat time.
func heartbeat(node *corev1.Node) time.Time {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.LastHeartbeatTime.Time
		}
	}
	return time.Time{}
}
