package kubeadm

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/test/env/etcdcluster"
)

// spdyOnlyServer stands in for an apiserver without WebSocket port-forward (before Kubernetes
// 1.31): it refuses WebSocket upgrades and serves SPDY port-forward to target itself.
func spdyOnlyServer(t *testing.T, target string) (*httptest.Server, *sync.Map) {
	t.Helper()
	seen := &sync.Map{}
	s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if strings.EqualFold(req.Header.Get("Upgrade"), "websocket") {
			seen.Store("websocket", true)
			http.Error(w, "websocket port-forward not supported", http.StatusBadRequest)
			return
		}
		seen.Store("spdy", req.URL.Path)
		portforward.ServePortForward(w, req, forwardTo(target), "etcd", "", nil, time.Minute, 10*time.Second, portforward.SupportedProtocols)
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

	d := &dialer{cfg: Config{
		DialTimeout: 10 * time.Second,
		RESTConfig:  StaticRESTConfig(&rest.Config{Host: server.URL, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}),
	}}
	conn, err := d.dial(ctx, m.NodeName(), creds)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { g.Expect(conn.Close()).To(Succeed()) }()
	_, tried := seen.Load("websocket")
	g.Expect(tried).To(BeTrue(), "WebSocket is tried first")
	path, ok := seen.Load("spdy")
	g.Expect(ok).To(BeTrue(), "SPDY is the fallback")
	g.Expect(path).To(Equal("/api/v1/namespaces/kube-system/pods/etcd-spdy-0/portforward"))
}
