package workload

import (
	"context"
	"net/url"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
	"github.com/etcd-adapter/etcd-adapter/test/env/kubelet"
)

// TestKubeadm_Join plays a control-plane join in both of kubeadm's orders and checks what the
// workload cluster shows after each step: whether the Node exists (with the member's address),
// and how etcd lists the learner.
func TestKubeadm_Join(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	k, err := StartKubeadm(ctx, KubeadmOptions{Members: 1})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(k.Close()).To(Succeed()) })

	tests := []struct {
		order JoinOrder
		node  string
		ip    string
		want  map[JoinStep]joinView
	}{
		{JoinNodeFirst, "cp-nf", "127.0.0.21", map[JoinStep]joinView{
			JoinNodeRegistered: {node: true},
			JoinLearnerAdded:   {node: true, learner: true},
			JoinEtcdStarted:    {node: true, learner: true, named: true, pod: true},
			JoinPromoted:       {node: true, named: true, pod: true},
		}},
		{JoinEtcdFirst, "cp-ef", "127.0.0.22", map[JoinStep]joinView{
			JoinLearnerAdded:   {learner: true},
			JoinEtcdStarted:    {learner: true, named: true},
			JoinPromoted:       {named: true},
			JoinNodeRegistered: {node: true, named: true, pod: true},
		}},
	}
	for _, tt := range tests {
		j := k.NewJoin(JoinOptions{Member: etcdcluster.MemberSpec{NodeName: tt.node, IP: tt.ip}, Order: tt.order, ProviderID: "test://" + tt.node})
		for _, step := range tt.order.Steps() {
			g.Expect(j.RunUntil(ctx, step)).To(Succeed(), "%s: %s", tt.order, step)
			g.Expect(observeJoin(ctx, g, k, tt.node, tt.ip)).To(Equal(tt.want[step]), "%s after %s", tt.order, step)
		}
	}
}

// joinView is what the workload cluster shows of a joining Node and its member: the Node
// exists, its etcd mirror Pod exists, and etcd lists a member on the Node's address, named (it
// started) and a learner.
type joinView struct{ node, named, learner, pod bool }

// observeJoin reports what the workload cluster shows of the joining Node and its member.
func observeJoin(ctx context.Context, g Gomega, k *Kubeadm, node, ip string) (out joinView) {
	n := &corev1.Node{}
	err := k.APIServer.Client.Get(ctx, client.ObjectKey{Name: node}, n)
	g.Expect(client.IgnoreNotFound(err)).To(Succeed())
	if out.node = err == nil; out.node {
		g.Expect(n.Status.Addresses).To(ContainElement(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip}))
		g.Expect(n.Spec.ProviderID).To(Equal("test://" + node))
	}
	err = k.APIServer.Client.Get(ctx, client.ObjectKey{Namespace: metav1.NamespaceSystem, Name: kubelet.EtcdPodName(node)}, &corev1.Pod{})
	g.Expect(err == nil || apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
	out.pod = err == nil
	cli, err := k.Etcd.Members()[0].NewClient(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = cli.Close() }()
	resp, err := cli.MemberList(ctx, clientv3.WithSerializable())
	g.Expect(err).NotTo(HaveOccurred())
	for _, m := range resp.Members {
		u, err := url.Parse(m.PeerURLs[0])
		g.Expect(err).NotTo(HaveOccurred())
		if u.Hostname() == ip {
			out.named, out.learner = m.Name != "", m.IsLearner
		}
	}
	return out
}
