package clusterctl

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// serviceNetwork plays the cluster network between kube-apiserver and the Services' backends, as
// kube-proxy does for a ClusterIP: a connection to a Service's ClusterIP and port goes to one of
// its backends (round robin), here the local ports the manager processes listen on.
//
// kube-apiserver reaches it through its egress selector: the "cluster" egress selection (the
// traffic kube-apiserver sends to Services and Pods, k8s.io/apiserver
// pkg/server/egressselector) is an HTTP CONNECT proxy, which this is. kube-apiserver calls a
// webhook by its Service: it resolves the Service's ClusterIP itself (its ClusterIP service
// resolver, k8s.io/apiserver pkg/util/webhook/client.go), verifies the serving certificate for
// <service>.<namespace>.svc against the webhook configuration's caBundle, and only the TCP
// connection to <ClusterIP>:<port> passes through here. A ClusterIP with no backend is refused,
// as kube-proxy rejects a Service without endpoints.
type serviceNetwork struct {
	listener net.Listener
	server   *http.Server

	mu       sync.Mutex
	backends map[string][]string
	ready    map[string]func() bool
	next     map[string]int
	conns    map[net.Conn]struct{}
	// connects counts the CONNECTs that reached a backend, per ClusterIP address.
	connects map[string]*atomic.Int64
}

// startServiceNetwork listens on a Unix socket in dir (kube-apiserver v1.36.3 cannot use an
// HTTP CONNECT proxy over plain TCP: it reads the TLS configuration of a TCP transport also for
// an http:// URL, where validation requires it absent, k8s.io/apiserver
// pkg/server/egressselector/egress_selector.go getTLSConfig); stop it with close.
func startServiceNetwork(dir string) (*serviceNetwork, error) {
	l, err := net.Listen("unix", filepath.Join(dir, "egress.sock"))
	if err != nil {
		return nil, fmt.Errorf("failed to listen for the service network: %w", err)
	}
	n := &serviceNetwork{listener: l, backends: map[string][]string{}, ready: map[string]func() bool{}, next: map[string]int{},
		conns: map[net.Conn]struct{}{}, connects: map[string]*atomic.Int64{}}
	n.server = &http.Server{Handler: http.HandlerFunc(n.connect), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = n.server.Serve(l) }()
	return n, nil
}

// startTestServiceNetwork starts a serviceNetwork for t in a short temporary directory (a Unix
// socket's path is limited to 107 bytes) and returns it with the path of kube-apiserver's
// egress selector configuration that sends the Service traffic to it. Both end with t.
func startTestServiceNetwork(t *testing.T, g Gomega) (*serviceNetwork, string) {
	t.Helper()
	sockets, err := os.MkdirTemp("", "egress-")
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = os.RemoveAll(sockets) })
	n, err := startServiceNetwork(sockets)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = n.close() })
	egress, err := n.egressSelectorConfig(t.TempDir())
	g.Expect(err).NotTo(HaveOccurred())
	return n, egress
}

// egressSelectorConfig writes kube-apiserver's EgressSelectorConfiguration sending the "cluster"
// traffic to n into dir, and returns its path (--egress-selector-config-file).
func (n *serviceNetwork) egressSelectorConfig(dir string) (string, error) {
	path := filepath.Join(dir, "egress-selector.yaml")
	cfg := fmt.Sprintf(`apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
- name: cluster
  connection:
    proxyProtocol: HTTPConnect
    transport:
      uds:
        udsName: %s
`, n.listener.Addr())
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return "", fmt.Errorf("failed to write the egress selector configuration: %w", err)
	}
	return path, nil
}

// route sets the backends of a Service address (ClusterIP:port) and closes the connections open
// through n, so that kube-apiserver's pooled connections do not keep the old route.
func (n *serviceNetwork) route(service string, backends ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.backends[service] = backends
	if n.connects[service] == nil {
		n.connects[service] = &atomic.Int64{}
	}
	for c := range n.conns {
		_ = c.Close()
		delete(n.conns, c)
	}
}

// readiness makes backend an endpoint only while ready reports true: the kubelet marks a Pod
// whose container ended not Ready, and the EndpointSlice controller and kube-proxy then stop
// sending it connections. Here that happens as soon as ready says so; in a cluster it takes a
// second or two, during which a connection to the ended Pod is refused.
func (n *serviceNetwork) readiness(backend string, ready func() bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.ready[backend] = ready
}

// connected returns how many connections to service reached a backend.
func (n *serviceNetwork) connected(service string) int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	if c := n.connects[service]; c != nil {
		return c.Load()
	}
	return 0
}

func (n *serviceNetwork) pick(service string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var b []string
	for _, addr := range n.backends[service] {
		if ready := n.ready[addr]; ready == nil || ready() {
			b = append(b, addr)
		}
	}
	if len(b) == 0 {
		return "", false
	}
	i := n.next[service] % len(b)
	n.next[service] = i + 1
	n.connects[service].Add(1)
	return b[i], true
}

func (n *serviceNetwork) track(c net.Conn, open bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if open {
		n.conns[c] = struct{}{}
	} else {
		delete(n.conns, c)
	}
}

func (n *serviceNetwork) connect(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodConnect {
		http.Error(w, "only CONNECT", http.StatusMethodNotAllowed)
		return
	}
	backend, ok := n.pick(r.Host)
	if !ok {
		http.Error(w, "no backend for "+r.Host, http.StatusServiceUnavailable)
		return
	}
	upstream, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(r.Context(), "tcp", backend)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	client, buf, err := http.NewResponseController(w).Hijack()
	if err != nil {
		_ = upstream.Close()
		return
	}
	n.track(client, true)
	n.track(upstream, true)
	defer func() {
		n.track(client, false)
		n.track(upstream, false)
		_ = client.Close()
		_ = upstream.Close()
	}()
	if _, err := client.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		return
	}
	splice(client, buf.Reader, upstream)
}

// splice copies both ways until either side ends.
func splice(client net.Conn, buffered *bufio.Reader, upstream net.Conn) {
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(upstream, buffered); done <- struct{}{} }()
	go func() { _, _ = io.Copy(client, upstream); done <- struct{}{} }()
	<-done
}

// close stops n and its connections.
func (n *serviceNetwork) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	n.route("")
	err := n.server.Shutdown(ctx)
	if errors.Is(err, context.DeadlineExceeded) {
		return n.server.Close()
	}
	return err
}
