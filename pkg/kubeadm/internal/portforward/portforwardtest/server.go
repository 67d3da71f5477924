// Package portforwardtest is a stand-in for a workload apiserver serving pods/portforward with
// the kubelet's own streaming code, for the tests of pkg/kubeadm and its port-forward transport.
package portforwardtest

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

	"k8s.io/cri-streaming/pkg/streaming/portforward"
)

// Server serves port-forward with forwarder, with the kubelet's own streaming code, as the
// apiserver proxies it: the kubelet's WebSocket protocol when webSocket is set (WebSocket
// upgrades are refused otherwise), SPDY always. It records the protocols asked for: the key
// "websocket:<subprotocol>" holds the ports asked, the key "spdy" the request path.
func Server(t *testing.T, forwarder portforward.PortForwarder, webSocket bool) (*httptest.Server, *sync.Map) {
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

// ForwardTo is a portforward.PortForwarder that connects every stream to the address it holds.
type ForwardTo string

// PortForward copies between stream and a new connection to f until either end closes.
func (f ForwardTo) PortForward(ctx context.Context, _, _ string, _ int32, stream io.ReadWriteCloser) error {
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

// Protocols are the two ways a port-forward server may answer: with the kubelet's own
// WebSocket protocol, or with SPDY only.
var Protocols = []struct {
	Name      string
	WebSocket bool
}{
	{"kubelet WebSocket protocol", true},
	{"SPDY", false},
}
