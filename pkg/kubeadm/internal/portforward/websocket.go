package portforward

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"

	gwebsocket "github.com/gorilla/websocket"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/transport/websocket"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/wsstream"
)

// Buffers of a port-forward's WebSocket. client-go's websocket.RoundTripper gives every
// connection its own 33 KiB read and 33 KiB write buffer for its whole life: for a connection
// kept per etcd member, that was the largest part of a kubeadm Cluster's memory. Here a
// connection keeps a small read buffer (gorilla reads a larger frame straight into the message)
// and borrows a write buffer of client-go's size from a pool for each message, so messages are
// framed as client-go frames them.
const (
	wsReadBufferSize  = 4 << 10
	wsWriteBufferSize = 32<<10 + 1<<10
)

// wsReadLimit bounds one WebSocket message read from the workload apiserver (gorilla reads a
// message whole, with no limit by default): the kubelet writes each read of the Pod's socket
// as one message (io.Copy's 32 KiB at most), and the apiserver's SPDY-over-WebSocket tunnel
// frames as much. A longer message ends the connection instead of growing the manager's memory.
const wsReadLimit = 1 << 20

var wsWriteBuffers = &sync.Pool{}

// wsRoundTripper upgrades one request to a WebSocket, as client-go's websocket.RoundTripper
// does (same subprotocol negotiation, same UpgradeFailureError on a refused upgrade, so the
// caller's fallback to another protocol works alike), with the buffers above. Like client-go's,
// it serves one round trip.
type wsRoundTripper struct {
	tlsConfig *tls.Config
	proxier   func(*http.Request) (*url.URL, error)
	conn      *gwebsocket.Conn
}

var _ websocket.ConnectionHolder = &wsRoundTripper{}

func (rt *wsRoundTripper) Connection() *gwebsocket.Conn { return rt.conn }

func (rt *wsRoundTripper) DataBufferSize() int { return wsWriteBufferSize }

// TLSClientConfig lets client-go's wrappers find the TLS config (utilnet.TLSClientConfigHolder).
func (rt *wsRoundTripper) TLSClientConfig() *tls.Config { return rt.tlsConfig }

func (rt *wsRoundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
	protocols := req.Header[wsstream.WebSocketProtocolHeader]
	header := req.Header.Clone()
	header.Del(wsstream.WebSocketProtocolHeader)
	u := *req.URL
	switch u.Scheme {
	case "https":
		u.Scheme = "wss"
	case "http":
		u.Scheme = "ws"
	default:
		return nil, fmt.Errorf("unknown url scheme: %s", u.Scheme)
	}
	dialer := gwebsocket.Dialer{
		Proxy: rt.proxier, TLSClientConfig: rt.tlsConfig, Subprotocols: protocols,
		ReadBufferSize: wsReadBufferSize, WriteBufferSize: wsWriteBufferSize, WriteBufferPool: wsWriteBuffers,
	}
	conn, resp, err := dialer.DialContext(req.Context(), u.String(), header)
	if err != nil {
		if errors.Is(err, gwebsocket.ErrBadHandshake) {
			return nil, &httpstream.UpgradeFailureError{Cause: refusal(err, resp)}
		}
		return nil, err
	}
	if !slices.Contains(protocols, conn.Subprotocol()) {
		_ = conn.Close()
		return nil, &httpstream.UpgradeFailureError{Cause: fmt.Errorf("invalid protocol, expected one of %q, got %q", protocols, conn.Subprotocol())}
	}
	conn.SetReadLimit(wsReadLimit)
	rt.conn = conn
	return resp, nil
}

var statusCodecs = func() serializer.CodecFactory {
	s := runtime.NewScheme()
	s.AddUnversionedTypes(metav1.SchemeGroupVersion, &metav1.Status{})
	return serializer.NewCodecFactory(s)
}()

// refusal explains a refused upgrade with the response: the apiserver's Status as an API error
// (so 401 and 403 can be told from a protocol the other end does not speak), else its text.
func refusal(err error, resp *http.Response) error {
	if resp == nil || resp.Status == "" {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	err = fmt.Errorf("%w (%s)", err, resp.Status)
	body, readErr := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if readErr != nil {
		return fmt.Errorf("%w: unable to read error from server response", err)
	}
	text := strings.TrimSpace(string(body))
	if text == "" {
		return err
	}
	if obj, _, decodeErr := statusCodecs.UniversalDecoder().Decode(body, nil, &metav1.Status{}); decodeErr == nil {
		if status, ok := obj.(*metav1.Status); ok {
			return &apierrors.StatusError{ErrStatus: *status}
		}
	}
	return fmt.Errorf("%w: %s", err, text)
}
