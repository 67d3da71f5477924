package kubelet_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/streaming/pkg/httpstream"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
	"github.com/etcd-adapter/etcd-adapter/test/env/kubelet"
)

// protocol is how client-go's port-forward talks to the apiserver.
type protocol string

const (
	spdyProtocol      protocol = "SPDY"
	websocketProtocol protocol = "WebSocket"
)

// node is one Node of a test: its etcd member and its kubelet stand-in.
type node struct {
	member  *etcdcluster.Member
	kubelet *kubelet.Kubelet
}

// startNodes starts an etcd cluster of n members and, for each member, a kubelet stand-in for
// its Node forwarding 2379 to the member, plus the Node's etcd Pod. Everything is stopped when
// the test ends.
func startNodes(t *testing.T, prefix string, n int) (*etcdcluster.Cluster, []node) {
	t.Helper()
	g := NewWithT(t)
	prefix = uniqueName(prefix)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	start := time.Now()
	cluster, err := etcdcluster.Start(ctx, etcdcluster.Options{Members: etcdcluster.Nodes(prefix, n)})
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("%d-member etcd cluster ready in %v", n, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() { g.Expect(cluster.Close()).To(Succeed()) })

	var nodes []node
	for _, m := range cluster.Members() {
		k := startKubelet(t, m.NodeName(), map[int32]string{kubelet.EtcdPort: m.ClientAddress()})
		pod, err := kubelet.CreateEtcdPod(ctx, apiServer.Client, m.NodeName())
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { deleteNow(t, pod) })
		nodes = append(nodes, node{member: m, kubelet: k})
	}
	return cluster, nodes
}

// startKubelet starts a kubelet stand-in with a fast heartbeat and stops it when the test ends.
func startKubelet(t *testing.T, nodeName string, targets map[int32]string) *kubelet.Kubelet {
	t.Helper()
	g := NewWithT(t)
	k, err := kubelet.Start(t.Context(), kubelet.Options{
		NodeName: nodeName, Config: apiServer.Config, Targets: targets,
		HeartbeatInterval: 500 * time.Millisecond, PodSyncInterval: 200 * time.Millisecond,
	})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		g.Expect(k.Stop()).To(Succeed())
		deleteNow(t, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: nodeName}})
	})
	return k
}

// uniqueName appends a random suffix, so that tests repeated against one apiserver
// (go test -count) do not meet the objects of earlier runs.
func uniqueName(prefix string) string {
	return prefix + "-" + strings.ToLower(rand.Text()[:5])
}

// deleteNow deletes obj without grace period; it may be gone already.
func deleteNow(t *testing.T, obj client.Object) {
	t.Helper()
	err := apiServer.Client.Delete(context.WithoutCancel(t.Context()), obj, client.GracePeriodSeconds(0))
	NewWithT(t).Expect(client.IgnoreNotFound(err)).To(Succeed())
}

// forward port-forwards a local port to port 2379 of the Pod through the apiserver, as KCP
// does, and returns the local address. The forward ends with the test.
func forward(t *testing.T, p protocol, namespace, pod string) (string, error) {
	t.Helper()
	dialer, err := dialerFor(p, apiServer.Config, namespace, pod)
	if err != nil {
		return "", err
	}
	stop, ready := make(chan struct{}), make(chan struct{})
	pf, err := portforward.NewOnAddressesForStreaming(dialer, []string{"127.0.0.1"}, []string{"0:" + strconv.Itoa(kubelet.EtcdPort)}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		return "", err
	}
	errCh := make(chan error, 1)
	go func() { errCh <- pf.ForwardPorts() }()
	select {
	case err := <-errCh:
		return "", fmt.Errorf("port-forward failed: %w", err)
	case <-ready:
	}
	t.Cleanup(func() {
		close(stop)
		if err := <-errCh; err != nil {
			t.Logf("Port-forward to %s/%s ended: %v", namespace, pod, err)
		}
	})
	ports, err := pf.GetPorts()
	if err != nil {
		return "", err
	}
	return "127.0.0.1:" + strconv.Itoa(int(ports[0].Local)), nil
}

// dialerFor returns client-go's dialer for pods/<pod>/portforward with the given protocol.
func dialerFor(p protocol, cfg *rest.Config, namespace, pod string) (httpstream.Dialer, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	u := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("portforward").URL()
	if p == websocketProtocol {
		return portforward.NewSPDYOverWebsocketDialerForStreaming(u, cfg)
	}
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, err
	}
	return spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: transport}, http.MethodPost, u), nil
}

// memberListVia lists etcd members through addr, verifying the server certificate against
// the cluster CA for serverName, as a client that port-forwards to a Node's etcd does.
func memberListVia(ctx context.Context, c *etcdcluster.Cluster, addr, serverName string) (*clientv3.MemberListResponse, error) {
	cfg, err := c.ClientConfig(addr)
	if err != nil {
		return nil, err
	}
	cfg = etcdcluster.WithServerName(cfg, serverName)
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	cfg.Context = ctx
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, err
	}
	defer func() { _ = cli.Close() }()
	return cli.MemberList(ctx)
}
