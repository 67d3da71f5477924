package kubeadm

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/streaming/pkg/httpstream"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// etcdPort is the etcd client port of kubeadm's etcd static Pod.
const etcdPort = 2379

// podName is kubeadm's etcd static Pod on nodeName.
func podName(nodeName string) string { return "etcd-" + nodeName }

// podRef names kubeadm's etcd static Pod on nodeName with its namespace, for messages.
func podRef(nodeName string) string { return metav1.NamespaceSystem + "/" + podName(nodeName) }

// dialer opens TLS connections to one member through the workload apiserver.
type dialer struct {
	cfg Config
}

// dial opens a port-forward to etcd-<node>:2379 and completes a verified TLS handshake over
// it, bounded by DialTimeout. Errors wrap etcd.ErrUnreachable, or etcd.ErrInvalidInput when
// the member's certificate is not trusted (retrying will not help).
func (d *dialer) dial(ctx context.Context, node string, creds *credentials) (net.Conn, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, d.cfg.DialTimeout, fmt.Errorf("dial timeout %s expired", d.cfg.DialTimeout))
	defer cancel()
	t, err := d.openTunnel(ctx, node)
	if err != nil {
		return nil, err
	}
	conn := tls.Client(t, creds.tlsConfig(node))
	if err := conn.HandshakeContext(ctx); err != nil {
		_ = t.Close()
		return nil, handshakeError(ctx, t, node, err)
	}
	return conn, nil
}

// handshakeError explains a failed handshake: an untrusted or misnamed certificate, or the
// kubelet's reason why nothing answered on the Pod's port.
func handshakeError(ctx context.Context, t *tunnel, node string, err error) error {
	var certErr *tls.CertificateVerificationError
	if errors.As(err, &certErr) {
		return fmt.Errorf("%w: etcd on Node %s presented a certificate that does not chain to the etcd CA or does not name the Node: %w", etcd.ErrInvalidInput, node, err)
	}
	if msg := t.remoteError(); msg != "" {
		return fmt.Errorf("%w: etcd on Node %s: %s", etcd.ErrUnreachable, node, msg)
	}
	if cause := context.Cause(ctx); cause != nil {
		err = fmt.Errorf("%w: %w", err, cause)
	}
	return fmt.Errorf("%w: TLS handshake with etcd on Node %s failed: %w", etcd.ErrUnreachable, node, err)
}

// openTunnel upgrades a port-forward request for etcd-<node> (WebSocket first, SPDY when the
// upgrade is refused) and creates its error and data streams.
func (d *dialer) openTunnel(ctx context.Context, node string) (*tunnel, error) {
	restCfg, err := d.cfg.RESTConfig(ctx)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", etcd.ErrUnreachable, err)
	}
	// Note: the upgrade takes no context; the config's timeout bounds its HTTP exchange.
	restCfg = rest.CopyConfig(restCfg)
	restCfg.Timeout = d.cfg.DialTimeout
	upgrader, err := portForwardDialer(restCfg, node)
	if err != nil {
		return nil, fmt.Errorf("failed to build the port-forward dialer for Node %s: %w", node, err)
	}
	conn, err := dialWithContext(ctx, upgrader)
	if err != nil {
		return nil, fmt.Errorf("%w: failed to port-forward to Pod %s/%s through the workload apiserver: %w", etcd.ErrUnreachable, metav1.NamespaceSystem, podName(node), err)
	}
	t, err := createStreams(conn, node)
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("%w: failed to open port-forward streams to Pod %s/%s: %w", etcd.ErrUnreachable, metav1.NamespaceSystem, podName(node), err)
	}
	return t, nil
}

// portForwardDialer dials pods/etcd-<node>/portforward with SPDY over WebSocket, falling back
// to SPDY when the apiserver refuses the upgrade, as kubectl and KCP do.
func portForwardDialer(cfg *rest.Config, node string) (httpstream.Dialer, error) {
	u, err := portForwardURL(cfg.Host, node)
	if err != nil {
		return nil, err
	}
	ws, err := portforward.NewSPDYOverWebsocketDialerForStreaming(u, cfg)
	if err != nil {
		return nil, err
	}
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, err
	}
	sp := spdy.NewDialerForStreaming(upgrader, &http.Client{Transport: transport}, http.MethodPost, u)
	return portforward.NewFallbackDialerForStreaming(ws, sp, func(err error) bool {
		return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err)
	}), nil
}

// portForwardURL is the pods/portforward subresource of etcd-<node> on the apiserver at host.
func portForwardURL(host, node string) (*url.URL, error) {
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	u, err := url.Parse(host)
	if err != nil {
		return nil, fmt.Errorf("invalid apiserver URL %q: %w", host, err)
	}
	u.Path = path.Join(u.Path, "/api/v1/namespaces", metav1.NamespaceSystem, "pods", podName(node), "portforward")
	return u, nil
}

// dialWithContext runs the upgrade, which takes no context, and gives up when ctx ends; a
// connection that arrives later is closed.
func dialWithContext(ctx context.Context, d httpstream.Dialer) (httpstream.Connection, error) {
	type result struct {
		conn httpstream.Connection
		err  error
	}
	done := make(chan result, 1)
	go func() {
		conn, _, err := d.Dial(portforward.PortForwardProtocolV1Name)
		done <- result{conn, err}
	}()
	select {
	case r := <-done:
		return r.conn, r.err
	case <-ctx.Done():
		go func() {
			if r := <-done; r.conn != nil {
				_ = r.conn.Close()
			}
		}()
		return nil, context.Cause(ctx)
	}
}

// createStreams creates the error and data streams of request 0 for port 2379.
func createStreams(conn httpstream.Connection, node string) (*tunnel, error) {
	headers := http.Header{}
	headers.Set(corev1.PortHeader, strconv.Itoa(etcdPort))
	headers.Set(corev1.PortForwardRequestIDHeader, "0")
	headers.Set(corev1.StreamType, corev1.StreamTypeError)
	errStream, err := conn.CreateStream(headers)
	if err != nil {
		return nil, err
	}
	// We only read the error stream.
	if err := errStream.Close(); err != nil {
		return nil, err
	}
	headers.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := conn.CreateStream(headers)
	if err != nil {
		return nil, err
	}
	return newTunnel(conn, data, errStream, node), nil
}
