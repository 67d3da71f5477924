package kubelet

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Timeouts of the port-forward endpoint, the kubelet's defaults for streaming connections:
// streams must be created within 30 s, and an idle connection lives for 4 h.
const (
	streamCreationTimeout = 30 * time.Second
	streamIdleTimeout     = 4 * time.Hour
	targetDialTimeout     = 5 * time.Second
)

// portForwardPath is the prefix the apiserver uses for pods/portforward:
// /portForward/{namespace}/{pod}[/{uid}] (k8s.io/kubernetes pkg/registry/core/pod/strategy.go).
const portForwardPath = "/portForward/"

// handler serves the kubelet's port-forward endpoint and refuses everything else.
func (k *Kubelet) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc(portForwardPath, k.servePortForward)
	mux.HandleFunc(containerLogsPath, k.serveContainerLogs)
	return mux
}

// servePortForward checks that the Pod exists on this Node, as the kubelet does, and hands
// the connection to the CRI streaming server's port-forward implementation (SPDY, and
// WebSocket v4 when the apiserver passes WebSockets through).
func (k *Kubelet) servePortForward(w http.ResponseWriter, req *http.Request) {
	if k.isBroken() {
		http.Error(w, "kubelet stand-in is broken", http.StatusServiceUnavailable)
		return
	}
	k.recordProtocol(req)
	pod, status, err := k.podFor(req)
	if err != nil {
		http.Error(w, err.Error(), status)
		return
	}
	opts, err := portforward.NewV4Options(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	portforward.ServePortForward(w, req, &forwarder{kubelet: k}, pod.Namespace+"/"+pod.Name, string(pod.UID),
		opts, streamIdleTimeout, streamCreationTimeout, portforward.SupportedProtocols)
}

// podFor returns the Pod named by the request path if it is bound to this Node, or an HTTP
// status and error.
func (k *Kubelet) podFor(req *http.Request) (*corev1.Pod, int, error) {
	parts := strings.Split(strings.TrimPrefix(req.URL.Path, portForwardPath), "/")
	if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
		return nil, http.StatusNotFound, fmt.Errorf("invalid port-forward path %q", req.URL.Path)
	}
	pod := &corev1.Pod{}
	if err := k.client.Get(req.Context(), client.ObjectKey{Namespace: parts[0], Name: parts[1]}, pod); err != nil {
		return nil, http.StatusNotFound, fmt.Errorf("pod does not exist: %w", err)
	}
	if pod.Spec.NodeName != k.opts.NodeName || (len(parts) == 3 && types.UID(parts[2]) != pod.UID) {
		return nil, http.StatusNotFound, fmt.Errorf("pod not found on node %s", k.opts.NodeName)
	}
	return pod, 0, nil
}

// forwarder connects a port-forward stream to the target address of its port.
type forwarder struct{ kubelet *Kubelet }

// PortForward implements portforward.PortForwarder: it copies between stream and a fresh
// connection to the port's target until either side closes.
func (f *forwarder) PortForward(ctx context.Context, _, _ string, port int32, stream io.ReadWriteCloser) error {
	defer func() { _ = stream.Close() }()
	f.kubelet.countPortForward()
	target, ok := f.kubelet.target(port)
	if !ok {
		return fmt.Errorf("port %d is not forwarded by kubelet stand-in %s", port, f.kubelet.opts.NodeName)
	}
	d := net.Dialer{Timeout: targetDialTimeout}
	conn, err := d.DialContext(ctx, "tcp", target)
	if err != nil {
		return fmt.Errorf("failed to connect port %d to %s: %w", port, target, err)
	}
	untrack := f.kubelet.trackForward(conn)
	defer untrack()
	pipe(conn, stream)
	return nil
}

// pipe copies both ways until one direction ends, then closes both ends so that the other
// direction ends too.
func pipe(conn net.Conn, stream io.ReadWriteCloser) {
	var once sync.Once
	closeBoth := func() { once.Do(func() { _ = conn.Close(); _ = stream.Close() }) }
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(conn, stream); closeBoth(); done <- struct{}{} }()
	go func() { _, _ = io.Copy(stream, conn); closeBoth(); done <- struct{}{} }()
	<-done
	<-done
}
