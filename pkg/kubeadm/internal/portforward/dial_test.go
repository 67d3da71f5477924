package portforward

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"go.uber.org/goleak"
	"k8s.io/client-go/rest"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/kubeadm/internal/portforward/portforwardtest"
	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
)

// restConfigTo is a REST config for the stand-in apiserver at url, whose certificate it does
// not check, with timeout as pkg/kubeadm sets its dial timeout.
func restConfigTo(url string, timeout time.Duration) *rest.Config {
	return &rest.Config{Host: url, Timeout: timeout, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
}

func TestDialer_fallsBackToSPDY(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	ec, err := etcdcluster.Start(ctx, etcdcluster.Options{Members: etcdcluster.Nodes("spdy", 1)})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = ec.Close() })
	m := ec.Members()[0]
	// An apiserver, or a proxy in front of it, that refuses WebSocket upgrades.
	server, seen := portforwardtest.Server(t, portforwardtest.ForwardTo(m.ClientAddress()), false)

	var d Dialer
	conn, err := d.Open(ctx, restConfigTo(server.URL, 10*time.Second), m.NodeName())
	g.Expect(err).NotTo(HaveOccurred())
	tlsCfg, err := ec.ClientTLSConfig(m.NodeName())
	g.Expect(err).NotTo(HaveOccurred())
	tlsConn := tls.Client(conn, tlsCfg)
	defer func() { g.Expect(tlsConn.Close()).To(Succeed()) }()
	g.Expect(tlsConn.HandshakeContext(ctx)).To(Succeed(), "etcd answered through the tunnel")
	_, tried := seen.Load("websocket:" + ChannelProtocol)
	g.Expect(tried).To(BeTrue(), "the kubelet's WebSocket protocol is tried first")
	spdyPath, ok := seen.Load("spdy")
	g.Expect(ok).To(BeTrue(), "SPDY is the fallback")
	g.Expect(spdyPath).To(Equal("/api/v1/namespaces/kube-system/pods/etcd-spdy-0/portforward"))
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

// clientMarkers are stack frames only the client side of a port-forward has: this package and
// client-go's port-forward tunnel (the stand-in servers run in this process too).
var clientMarkers = []string{"etcd-adapter/pkg/kubeadm/internal/portforward.", "k8s.io/client-go/tools/portforward."}

// clientLeaks returns the goroutines goleak found that belong to a client.
func clientLeaks(err error) []string {
	if err == nil {
		return nil
	}
	var leaks []string
	for _, g := range strings.Split(err.Error(), "Goroutine ")[1:] {
		for _, m := range clientMarkers {
			if strings.Contains(g, m) {
				leaks = append(leaks, "Goroutine "+g)
				break
			}
		}
	}
	return leaks
}

func TestDialer_upgradeEndsWithTheContext(t *testing.T) {
	g := NewWithT(t)
	leakOpts := []goleak.Option{goleak.IgnoreCurrent()}
	server, gone := hangingServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	var d Dialer
	_, err := d.Open(ctx, restConfigTo(server.URL, 300*time.Millisecond), "n1")
	g.Expect(errors.Is(err, etcd.ErrUnreachable)).To(BeTrue(), "%v", err)
	// The upgrade request's connection is closed, not left to the apiserver ...
	g.Eventually(gone.Load).WithTimeout(10 * time.Second).Should(BeNumerically(">=", 1))
	// ... and no goroutine of the dial outlives it.
	g.Eventually(func() []string { return clientLeaks(goleak.Find(leakOpts...)) }).
		WithTimeout(10 * time.Second).WithPolling(100 * time.Millisecond).Should(BeEmpty())
}

func TestDialer_forbiddenIsNotUnreachable(t *testing.T) {
	g := NewWithT(t)
	s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","message":"pods \"etcd-n1\" is forbidden: User \"capi\" cannot create resource \"pods/portforward\"","reason":"Forbidden","code":403}`))
	}))
	t.Cleanup(s.Close)
	var d Dialer
	_, err := d.Open(t.Context(), restConfigTo(s.URL, 10*time.Second), "n1")
	g.Expect(errors.Is(err, etcd.ErrInvalidInput)).To(BeTrue(), "%v", err)
	g.Expect(errors.Is(err, etcd.ErrUnreachable)).To(BeFalse(), "%v", err)
}

func TestConn_honoursDeadlines(t *testing.T) {
	for _, p := range portforwardtest.Protocols {
		t.Run(p.Name, func(t *testing.T) {
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
			server, _ := portforwardtest.Server(t, portforwardtest.ForwardTo(silent.Addr().String()), p.WebSocket)
			var d Dialer
			tn, err := d.Open(ctx, restConfigTo(server.URL, 10*time.Second), "silent")
			g.Expect(err).NotTo(HaveOccurred())
			defer func() { _ = tn.Close() }()
			g.Expect(tn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))).To(Succeed())
			done := make(chan error, 1)
			go func() { _, err := tn.Read(make([]byte, 1)); done <- err }()
			g.Eventually(done).WithTimeout(30*time.Second).Should(Receive(HaveOccurred()), "a Read past its deadline returns")
		})
	}
}
