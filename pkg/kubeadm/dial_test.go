package kubeadm

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	. "github.com/onsi/gomega"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
)

// spdyOnlyServer stands in for an apiserver, or a proxy in front of it, that refuses WebSocket
// upgrades: it serves SPDY port-forward to target itself.
func spdyOnlyServer(t *testing.T, target string) (*httptest.Server, *sync.Map) {
	return portForwardServer(t, target, false)
}

// portForwardServer serves port-forward to target with the kubelet's own streaming code, as
// the apiserver proxies it: the kubelet's WebSocket protocol when webSocket is set (WebSocket
// upgrades are refused otherwise), SPDY always. It records the protocols asked for.
func portForwardServer(t *testing.T, target string, webSocket bool) (*httptest.Server, *sync.Map) {
	t.Helper()
	return portForwardServerTo(t, forwardTo(target), webSocket)
}

// portForwardServerWith serves port-forward with forwarder, as portForwardServer does.
func portForwardServerWith(t *testing.T, forwarder portforward.PortForwarder, webSocket bool) *httptest.Server {
	t.Helper()
	s, _ := portForwardServerTo(t, forwarder, webSocket)
	return s
}

func portForwardServerTo(t *testing.T, forwarder portforward.PortForwarder, webSocket bool) (*httptest.Server, *sync.Map) {
	t.Helper()
	seen := &sync.Map{}
	s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.EqualFold(req.Header.Get("Upgrade"), "websocket") {
			seen.Store("websocket:"+req.Header.Get("Sec-WebSocket-Protocol"), req.URL.Query().Get("ports"))
			if !webSocket {
				http.Error(w, "websocket port-forward not supported", http.StatusBadRequest)
				return
			}
		} else {
			seen.Store("spdy", req.URL.Path)
		}
		// The apiserver takes the ports as "ports" and asks the kubelet for them as "port".
		q := req.URL.Query()
		q["port"] = q["ports"]
		req.URL.RawQuery = q.Encode()
		opts, err := portforward.NewV4Options(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		portforward.ServePortForward(w, req, forwarder, "etcd", "", opts, time.Minute, 10*time.Second, portforward.SupportedProtocols)
	}))
	t.Cleanup(s.Close)
	return s, seen
}

// forwardTo is a portforward.PortForwarder that connects every stream to addr.
type forwardTo string

func (f forwardTo) PortForward(ctx context.Context, _, _ string, _ int32, stream io.ReadWriteCloser) error {
	defer func() { _ = stream.Close() }()
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", string(f))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(conn, stream); done <- struct{}{} }()
	go func() { _, _ = io.Copy(stream, conn); done <- struct{}{} }()
	<-done
	return nil
}

func Test_dialer_fallsBackToSPDY(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ec, err := etcdcluster.Start(ctx, etcdcluster.Options{Members: etcdcluster.Nodes("spdy", 1)})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = ec.Close() })
	m := ec.Members()[0]
	server, seen := spdyOnlyServer(t, m.ClientAddress())

	creds, _, err := sourceFor([]client.Object{ec.CA().Secret(testCluster)}).get(ctx, time.Now())
	g.Expect(err).NotTo(HaveOccurred())

	d := dialerTo(server.URL, 10*time.Second)
	conn, err := d.dial(ctx, m.NodeName(), creds)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(conn.Close()).To(Succeed()) }()
	_, tried := seen.Load("websocket:" + channelProtocol)
	g.Expect(tried).To(BeTrue(), "the kubelet's WebSocket protocol is tried first")
	path, ok := seen.Load("spdy")
	g.Expect(ok).To(BeTrue(), "SPDY is the fallback")
	g.Expect(path).To(Equal("/api/v1/namespaces/kube-system/pods/etcd-spdy-0/portforward"))
}

// hangingServer stands in for an apiserver that accepts port-forward requests and never
// answers them; it counts the requests whose client went away.
func hangingServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	gone := &atomic.Int32{}
	s := httptest.NewTLSServer(http.HandlerFunc(func(_ http.ResponseWriter, req *http.Request) {
		<-req.Context().Done()
		gone.Add(1)
	}))
	t.Cleanup(s.Close)
	return s, gone
}

func Test_dialer_upgradeEndsWithTheContext(t *testing.T) {
	g := NewWithT(t)
	leakOpts := []goleak.Option{goleak.IgnoreCurrent()}
	server, gone := hangingServer(t)
	creds, _, err := sourceFor([]client.Object{caSecretFor(g)}).get(t.Context(), time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	d := dialerTo(server.URL, 300*time.Millisecond)
	_, err = d.dial(t.Context(), "n1", creds)
	g.Expect(errors.Is(err, etcd.ErrUnreachable)).To(BeTrue(), "%v", err)
	// The upgrade request's connection is closed, not left to the apiserver ...
	g.Eventually(gone.Load).WithTimeout(10 * time.Second).Should(BeNumerically(">=", 1))
	// ... and no goroutine of the dial outlives it.
	g.Eventually(func() []string { return clientLeaks(goleak.Find(leakOpts...)) }).
		WithTimeout(10 * time.Second).WithPolling(100 * time.Millisecond).Should(BeEmpty())
}

func Test_dialer_forbiddenIsNotUnreachable(t *testing.T) {
	g := NewWithT(t)
	s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"pods \"etcd-n1\" is forbidden: User \"capi\" cannot create resource \"pods/portforward\"","reason":"Forbidden","code":403}`))
	}))
	t.Cleanup(s.Close)
	creds, _, err := sourceFor([]client.Object{caSecretFor(g)}).get(t.Context(), time.Now())
	g.Expect(err).NotTo(HaveOccurred())
	d := dialerTo(s.URL, 10*time.Second)
	_, err = d.dial(t.Context(), "n1", creds)
	g.Expect(errors.Is(err, etcd.ErrInvalidInput)).To(BeTrue(), "%v", err)
	g.Expect(errors.Is(err, etcd.ErrUnreachable)).To(BeFalse(), "%v", err)
}

// protocols are the two ways a port-forward server may answer: with the kubelet's own
// WebSocket protocol, or with SPDY only.
var protocols = []struct {
	name      string
	webSocket bool
}{
	{"kubelet WebSocket protocol", true},
	{"SPDY", false},
}

func Test_dialer_usesTheKubeletWebSocketProtocol(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ec, err := etcdcluster.Start(ctx, etcdcluster.Options{Members: etcdcluster.Nodes("ws", 1)})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = ec.Close() })
	m := ec.Members()[0]
	server, seen := portForwardServer(t, m.ClientAddress(), true)
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

	ports, ok := seen.Load("websocket:" + channelProtocol)
	g.Expect(ok).To(BeTrue(), "the kubelet's WebSocket protocol is asked for")
	g.Expect(ports).To(Equal("2379"))
	_, spdy := seen.Load("spdy")
	g.Expect(spdy).To(BeFalse(), "no fallback")
}

func Test_dialer_reportsTheKubeletsReason(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			g := NewWithT(t)
			// Nothing listens behind the port-forward: the kubelet's connection is refused and
			// it says so on the error stream.
			l, err := net.Listen("tcp", "127.0.0.1:0")
			g.Expect(err).NotTo(HaveOccurred())
			closed := l.Addr().String()
			g.Expect(l.Close()).To(Succeed())
			server, _ := portForwardServer(t, closed, p.webSocket)
			creds, _, err := sourceFor([]client.Object{caSecretFor(g)}).get(t.Context(), time.Now())
			g.Expect(err).NotTo(HaveOccurred())
			d := dialerTo(server.URL, 10*time.Second)
			_, err = d.dial(t.Context(), "n1", creds)
			g.Expect(errors.Is(err, etcd.ErrUnreachable)).To(BeTrue(), "%v", err)
			g.Expect(err.Error()).To(ContainSubstring("connection refused"))
		})
	}
}

func Test_tunnel_honoursDeadlines(t *testing.T) {
	for _, p := range protocols {
		t.Run(p.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			// Behind the port-forward, a peer that accepts and then neither writes nor closes:
			// only the deadline can end a Read.
			silent, err := net.Listen("tcp", "127.0.0.1:0")
			g.Expect(err).NotTo(HaveOccurred())
			t.Cleanup(func() { _ = silent.Close() })
			go func() {
				for {
					c, err := silent.Accept()
					if err != nil {
						return
					}
					t.Cleanup(func() { _ = c.Close() })
				}
			}()
			server, _ := portForwardServer(t, silent.Addr().String(), p.webSocket)
			d := dialerTo(server.URL, 10*time.Second)
			tn, err := d.openTunnel(ctx, "silent")
			g.Expect(err).NotTo(HaveOccurred())
			defer func() { _ = tn.Close() }()
			g.Expect(tn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))).To(Succeed())
			done := make(chan error, 1)
			go func() { _, err := tn.Read(make([]byte, 1)); done <- err }()
			g.Eventually(done).WithTimeout(30*time.Second).Should(Receive(HaveOccurred()), "a Read past its deadline returns")
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
	server, _ := portForwardServer(t, m.ClientAddress(), true)
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
