package kubeadm

import (
	"context"
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/kubeadm/internal/portforward"
	"github.com/etcd-adapter/etcd-adapter/pkg/kubeadm/internal/portforward/portforwardtest"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
)

func Test_dialer_usesTheKubeletWebSocketProtocol(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ec, err := etcdcluster.Start(ctx, etcdcluster.Options{Members: etcdcluster.Nodes("ws", 1)})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = ec.Close() })
	m := ec.Members()[0]
	server, seen := portforwardtest.Server(t, portforwardtest.ForwardTo(m.ClientAddress()), true)
	creds, _, err := sourceFor([]client.Object{ec.CA().Secret(testCluster)}).get(ctx, time.Now())
	g.Expect(err).NotTo(HaveOccurred())

	d := dialerTo(server.URL, 10*time.Second)
	p := newPool(d, time.Minute, nil, logr.Discard())
	defer func() { g.Expect(p.close()).To(Succeed()) }()
	c, err := p.get(ctx, m.NodeName(), creds)
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := c.cluster.MemberList(ctx)
	g.Expect(err).NotTo(HaveOccurred(), "etcd answered through the tunnel")
	g.Expect(resp.Members).To(HaveLen(1))
	g.Expect(resp.Members[0].Name).To(Equal(m.NodeName()))

	ports, ok := seen.Load("websocket:" + portforward.ChannelProtocol)
	g.Expect(ok).To(BeTrue(), "the kubelet's WebSocket protocol is asked for")
	g.Expect(ports).To(Equal("2379"))
	_, spdy := seen.Load("spdy")
	g.Expect(spdy).To(BeFalse(), "no fallback")
}

func Test_dialer_reportsTheKubeletsReason(t *testing.T) {
	for _, p := range portforwardtest.Protocols {
		t.Run(p.Name, func(t *testing.T) {
			g := NewWithT(t)
			// Nothing listens behind the port-forward: the kubelet's connection is refused and
			// it says so on the error stream.
			l, err := net.Listen("tcp", "127.0.0.1:0")
			g.Expect(err).NotTo(HaveOccurred())
			closed := l.Addr().String()
			g.Expect(l.Close()).To(Succeed())
			server, _ := portforwardtest.Server(t, portforwardtest.ForwardTo(closed), p.WebSocket)
			creds, _, err := sourceFor([]client.Object{caSecretFor(g)}).get(t.Context(), time.Now())
			g.Expect(err).NotTo(HaveOccurred())
			d := dialerTo(server.URL, 10*time.Second)
			_, err = d.dial(t.Context(), "n1", creds)
			g.Expect(errors.Is(err, etcd.ErrUnreachable)).To(BeTrue(), "%v", err)
			g.Expect(err.Error()).To(ContainSubstring("connection refused"))
		})
	}
}

// dialerTo is a dialer to the stand-in apiserver at url, whose certificate it does not check.
func dialerTo(url string, timeout time.Duration) *dialer {
	return &dialer{cfg: Config{
		DialTimeout: timeout,
		RESTConfig:  StaticRESTConfig(&rest.Config{Host: url, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}),
	}}
}

// caSecretFor returns a CA Secret for testCluster.
func caSecretFor(g Gomega) *corev1.Secret {
	s, _ := caSecret(g, nil)
	return s
}

// Test_pool_concurrentGetsKeepEachOthersClient gets the client of one member from several
// goroutines at once on an empty pool, as the quorum guard and the controller do on a manager
// that just started: every client handed out must still answer. A pool that kept the newest
// connection closed the ones other callers were using ("grpc: the client connection is
// closing"), which the observation read as a member not answering.
func Test_pool_concurrentGetsKeepEachOthersClient(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ec, err := etcdcluster.Start(ctx, etcdcluster.Options{Members: etcdcluster.Nodes("cg", 1)})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = ec.Close() })
	m := ec.Members()[0]
	server, _ := portforwardtest.Server(t, portforwardtest.ForwardTo(m.ClientAddress()), true)
	creds, _, err := sourceFor([]client.Object{ec.CA().Secret(testCluster)}).get(ctx, time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	p := newPool(dialerTo(server.URL, 10*time.Second), time.Minute, nil, logr.Discard())
	defer func() { g.Expect(p.close()).To(Succeed()) }()

	const callers = 8
	clients := make([]*memberClient, callers)
	errs := make([]error, callers)
	var wg sync.WaitGroup
	for i := range callers {
		wg.Go(func() { clients[i], errs[i] = p.get(ctx, m.NodeName(), creds) })
	}
	wg.Wait()
	for i := range callers {
		g.Expect(errs[i]).NotTo(HaveOccurred())
		_, err := clients[i].cluster.MemberList(ctx)
		g.Expect(err).NotTo(HaveOccurred(), "caller %d's client must still answer", i)
	}
	g.Expect(p.size()).To(Equal(1))
}
