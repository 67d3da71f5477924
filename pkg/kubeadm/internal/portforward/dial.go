package portforward

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

	gwebsocket "github.com/gorilla/websocket"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	portforwardconst "k8s.io/apimachinery/pkg/util/portforward"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/client-go/transport/websocket"
	"k8s.io/streaming/pkg/httpstream"
	spdystream "k8s.io/streaming/pkg/httpstream/spdy"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// EtcdPort is the etcd client port of kubeadm's etcd static Pod.
const EtcdPort = 2379

// PodName is kubeadm's etcd static Pod on nodeName.
func PodName(nodeName string) string { return "etcd-" + nodeName }

// PodRef names kubeadm's etcd static Pod on nodeName with its namespace, for messages.
func PodRef(nodeName string) string { return metav1.NamespaceSystem + "/" + PodName(nodeName) }

// Dialer opens port-forwards to kubeadm's etcd static Pods through a workload apiserver. The
// zero Dialer is ready to use; it is safe for concurrent use.
type Dialer struct {
	// Sessions, when set, resumes TLS sessions with the workload apiserver, so a port-forward
	// after the first skips the apiserver's certificate exchange (client-go's WebSocket round
	// tripper starts a full handshake for every upgrade).
	Sessions tls.ClientSessionCache
}

// Conn is a net.Conn over one port-forward to etcd-<node>:2379 that can tell what the kubelet
// reported on its error stream.
type Conn interface {
	net.Conn
	// RemoteError is what the kubelet reported on the port-forward's error stream (why it could
	// not connect to the Pod's port), sanitized and bounded; empty when it reported nothing.
	RemoteError() string
}

// Open opens a port-forward to etcd-<node>:2379 through the apiserver restCfg names: over the
// kubelet's own WebSocket protocol first, then SPDY over WebSocket, then SPDY, each tried when
// the previous upgrade is refused. The upgrade runs under ctx, so nothing of it (goroutine or
// socket) outlives ctx. Errors wrap etcd.ErrUnreachable, or etcd.ErrInvalidInput when the
// apiserver refuses the caller's credentials (401, 403) or its URL is invalid.
func (d *Dialer) Open(ctx context.Context, restCfg *rest.Config, node string) (Conn, error) {
	u, err := portForwardURL(restCfg.Host, node)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", etcd.ErrInvalidInput, err)
	}
	t, err := d.openChannelTunnel(ctx, restCfg, u, node)
	if err == nil || !isUpgradeRefused(err) {
		return t, err
	}
	conn, err := d.upgrade(ctx, restCfg, u)
	if err != nil {
		return nil, upgradeError(ctx, node, err)
	}
	st, err := createStreams(conn, node)
	if err != nil {
		_ = conn.Close()
		return nil, fmt.Errorf("%w: failed to open port-forward streams to Pod %s: %w", etcd.ErrUnreachable, PodRef(node), err)
	}
	return st, nil
}

// isUpgradeRefused tells an upgrade the other end refused for its protocol (another protocol
// may work) from a failure to reach it and from a refusal of the caller's credentials (401,
// 403), which no other protocol changes.
func isUpgradeRefused(err error) bool {
	var upgrade *httpstream.UpgradeFailureError
	if errors.As(err, &upgrade) {
		return !apierrors.IsForbidden(upgrade.Cause) && !apierrors.IsUnauthorized(upgrade.Cause)
	}
	return httpstream.IsHTTPSProxyError(err)
}

// openChannelTunnel opens a port-forward over the kubelet's own WebSocket protocol, with the
// port in the query as that protocol asks. A refused upgrade is returned as is (the caller
// falls back); other errors are classified.
func (d *Dialer) openChannelTunnel(ctx context.Context, cfg *rest.Config, u *url.URL, node string) (Conn, error) {
	cu := *u
	cu.RawQuery = url.Values{"ports": []string{strconv.Itoa(EtcdPort)}}.Encode()
	ws, err := d.negotiateWebSocket(ctx, cfg, &cu, ChannelProtocol)
	if err != nil {
		if isUpgradeRefused(err) {
			return nil, err
		}
		return nil, upgradeError(ctx, node, err)
	}
	deadline, _ := ctx.Deadline()
	t, err := newChannelTunnel(ws, node, deadline)
	if err != nil {
		_ = ws.Close()
		return nil, fmt.Errorf("%w: port-forward to Pod %s did not start: %w", etcd.ErrUnreachable, PodRef(node), err)
	}
	return t, nil
}

// upgradeError keeps the class of a failed upgrade: the apiserver refusing the controller's
// credentials (401, 403) is a configuration problem, not an unreachable member.
func upgradeError(ctx context.Context, node string, err error) error {
	if cause := context.Cause(ctx); cause != nil {
		err = fmt.Errorf("%w: %w", err, cause)
	}
	msg := err.Error()
	if strings.Contains(msg, "403 Forbidden") || strings.Contains(msg, "401 Unauthorized") ||
		strings.Contains(msg, "is forbidden") || strings.Contains(msg, "Unauthorized") {
		return fmt.Errorf("%w: the workload apiserver refused to port-forward to Pod %s: %w", etcd.ErrInvalidInput, PodRef(node), err)
	}
	return fmt.Errorf("%w: failed to port-forward to Pod %s through the workload apiserver: %w", etcd.ErrUnreachable, PodRef(node), err)
}

// upgrade dials pods/etcd-<node>/portforward with SPDY over WebSocket, falling back to SPDY
// when the apiserver refuses the WebSocket upgrade, as kubectl and KCP do. Unlike client-go's
// dialers, whose Dial takes no context, both requests carry ctx.
func (d *Dialer) upgrade(ctx context.Context, cfg *rest.Config, u *url.URL) (httpstream.Connection, error) {
	conn, err := d.upgradeWebSocket(ctx, cfg, u)
	if err == nil || !isUpgradeRefused(err) {
		return conn, err
	}
	return upgradeSPDY(ctx, cfg, u)
}

// upgradeWebSocket is client-go's SPDY-over-WebSocket tunnelling dialer with a context.
func (d *Dialer) upgradeWebSocket(ctx context.Context, cfg *rest.Config, u *url.URL) (httpstream.Connection, error) {
	ws, err := d.negotiateWebSocket(ctx, cfg, u, portforwardconst.WebsocketsSPDYTunnelingPrefix+portforward.PortForwardProtocolV1Name)
	if err != nil {
		return nil, err
	}
	conn, err := spdystream.NewClientConnectionWithPings(portforward.NewTunnelingConnection("client", ws), portforward.PingPeriod)
	if err != nil {
		_ = ws.Close()
		return nil, err
	}
	return conn, nil
}

// negotiateWebSocket upgrades a GET of u to a WebSocket speaking protocol: the WebSocket
// handshake (gorilla's DialContext) ends when ctx does. The round tripper is built as
// client-go's websocket.RoundTripperFor builds it, plus a TLS session cache, with smaller
// buffers (wsRoundTripper).
func (d *Dialer) negotiateWebSocket(ctx context.Context, cfg *rest.Config, u *url.URL, protocol string) (*gwebsocket.Conn, error) {
	transportCfg, err := cfg.TransportConfig()
	if err != nil {
		return nil, err
	}
	tlsCfg, err := transport.TLSConfigFor(transportCfg)
	if err != nil {
		return nil, err
	}
	if tlsCfg != nil && d.Sessions != nil {
		tlsCfg = tlsCfg.Clone()
		tlsCfg.ClientSessionCache = d.Sessions
	}
	proxy := cfg.Proxy
	if proxy == nil {
		proxy = utilnet.NewProxierWithNoProxyCIDR(http.ProxyFromEnvironment)
	}
	holder := &wsRoundTripper{tlsConfig: tlsCfg, proxier: proxy}
	rt, err := transport.HTTPWrappersForConfig(transportCfg, holder)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	return websocket.Negotiate(rt, holder, req, protocol)
}

// upgradeSPDY is client-go's SPDY dialer with the request under ctx.
func upgradeSPDY(ctx context.Context, cfg *rest.Config, u *url.URL) (httpstream.Connection, error) {
	transport, upgrader, err := spdy.RoundTripperFor(cfg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), nil)
	if err != nil {
		return nil, err
	}
	conn, _, err := spdy.NegotiateStreaming(upgrader, &http.Client{Transport: transport}, req, portforward.PortForwardProtocolV1Name)
	return conn, err
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
	u.Path = path.Join(u.Path, "/api/v1/namespaces", metav1.NamespaceSystem, "pods", PodName(node), "portforward")
	return u, nil
}

// createStreams creates the error and data streams of request 0 for port 2379.
func createStreams(conn httpstream.Connection, node string) (*tunnel, error) {
	headers := http.Header{}
	headers.Set(corev1.PortHeader, strconv.Itoa(EtcdPort))
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
