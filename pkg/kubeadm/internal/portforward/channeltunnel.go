package portforward

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"

	gwebsocket "github.com/gorilla/websocket"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// The kubelet's own WebSocket port-forward protocol ("v4.channel.k8s.io", served by the
// kubelet's and containerd's CRI streaming server since Kubernetes 1.4): every message carries
// one channel byte; for the one port asked, channel 0 is its data and channel 1 its error
// stream, and the first message on each is the port number (2 bytes, little endian).
// The apiserver proxies such a request to the kubelet as it is (it translates only requests
// for the SPDY-tunnelling subprotocol of KEP-4006, which kubectl sends), so no SPDY framing
// and no zlib header compressor runs at any hop: each port-forward costs the controller, the
// apiserver and the kubelet less than the SPDY-based protocols kubectl and KCP use.
const (
	dataChannel  = 0
	errorChannel = 1
)

// ChannelProtocol is the WebSocket subprotocol of the kubelet's own port-forward protocol,
// the one Dialer.Open asks for first.
const ChannelProtocol = "v4.channel.k8s.io"

// channelTunnel is a net.Conn over the data channel of one native WebSocket port-forward.
type channelTunnel struct {
	ws   *gwebsocket.Conn
	node string

	readMu  sync.Mutex
	pending []byte // the rest of the data message being read
	headers [2]bool

	writeMu sync.Mutex

	errMu  sync.Mutex
	errMsg strings.Builder

	closeOnce sync.Once
}

var _ Conn = &channelTunnel{}

// newChannelTunnel reads the port headers the kubelet sends first on both channels, which
// confirms that the other end speaks this protocol for port 2379.
func newChannelTunnel(ws *gwebsocket.Conn, node string, deadline time.Time) (*channelTunnel, error) {
	t := &channelTunnel{ws: ws, node: node}
	if err := ws.SetReadDeadline(deadline); err != nil {
		return nil, err
	}
	for !t.headers[dataChannel] || !t.headers[errorChannel] {
		if _, err := t.next(); err != nil {
			return nil, err
		}
	}
	return t, ws.SetReadDeadline(time.Time{})
}

// next reads one message: a data message's payload is kept in pending; the port headers are
// checked and error-channel text is kept for RemoteError. It returns how many data bytes arrived.
func (t *channelTunnel) next() (int, error) {
	kind, msg, err := t.ws.ReadMessage()
	if err != nil {
		return 0, err
	}
	if kind != gwebsocket.BinaryMessage || len(msg) == 0 {
		return 0, fmt.Errorf("unexpected port-forward message (type %d, %d bytes) from Pod %s", kind, len(msg), PodRef(t.node))
	}
	ch, payload := msg[0], msg[1:]
	if ch > errorChannel {
		return 0, fmt.Errorf("unexpected port-forward channel %d from Pod %s", ch, PodRef(t.node))
	}
	if !t.headers[ch] {
		if len(payload) < 2 || binary.LittleEndian.Uint16(payload) != EtcdPort {
			return 0, fmt.Errorf("unexpected port-forward header on channel %d from Pod %s", ch, PodRef(t.node))
		}
		t.headers[ch] = true
		payload = payload[2:]
	}
	if ch == errorChannel {
		t.errMu.Lock()
		// The kubelet writes one line; the rest of a longer text is dropped.
		if room := etcd.MaxTextBytes - t.errMsg.Len(); room > 0 {
			t.errMsg.Write(payload[:min(len(payload), room)])
		}
		t.errMu.Unlock()
		return 0, nil
	}
	t.pending = payload
	return len(payload), nil
}

func (t *channelTunnel) Read(b []byte) (int, error) {
	t.readMu.Lock()
	defer t.readMu.Unlock()
	for len(t.pending) == 0 {
		if _, err := t.next(); err != nil {
			return 0, t.readError(err)
		}
	}
	n := copy(b, t.pending)
	t.pending = t.pending[n:]
	if len(t.pending) == 0 {
		// Not kept: an idle connection would hold its last message (up to a TLS record).
		t.pending = nil
	}
	return n, nil
}

// readError turns the end of the WebSocket into io.EOF, as a closed TCP connection reads, so
// TLS and gRPC report a closed connection rather than a protocol error; timeouts stay
// net.Errors.
func (t *channelTunnel) readError(err error) error {
	var closeErr *gwebsocket.CloseError
	if errors.As(err, &closeErr) || errors.Is(err, io.ErrUnexpectedEOF) {
		return io.EOF
	}
	return err
}

// Write sends b as one data message, the channel byte first. TLS writes records of at most
// 16 KiB plus overhead, well inside the write buffer (wsWriteBufferSize), so a message is never
// fragmented; the buffer is borrowed for the message only.
func (t *channelTunnel) Write(b []byte) (int, error) {
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	w, err := t.ws.NextWriter(gwebsocket.BinaryMessage)
	if err != nil {
		return 0, err
	}
	if _, err = w.Write([]byte{dataChannel}); err == nil {
		_, err = w.Write(b)
	}
	if closeErr := w.Close(); err == nil {
		err = closeErr
	}
	if err != nil {
		return 0, err
	}
	return len(b), nil
}

// RemoteError is what the kubelet wrote on the error channel (why it could not connect to the
// Pod's port), as far as it has been read.
func (t *channelTunnel) RemoteError() string {
	t.errMu.Lock()
	defer t.errMu.Unlock()
	return etcd.SanitizeText(t.errMsg.String(), etcd.MaxTextBytes)
}

// closeFrameWait bounds the close frame Close sends.
const closeFrameWait = 100 * time.Millisecond

// Close sends a close frame, so the kubelet ends the port-forward as a normal close (without
// it, a kubelet logs "Error on socket receive" for every connection closed), and closes the
// connection; the kubelet then closes its connection to etcd.
func (t *channelTunnel) Close() error {
	var err error
	t.closeOnce.Do(func() {
		msg := gwebsocket.FormatCloseMessage(gwebsocket.CloseNormalClosure, "")
		_ = t.ws.WriteControl(gwebsocket.CloseMessage, msg, time.Now().Add(closeFrameWait))
		err = t.ws.Close()
	})
	return err
}

func (t *channelTunnel) LocalAddr() net.Addr  { return tunnelAddr("port-forward") }
func (t *channelTunnel) RemoteAddr() net.Addr { return tunnelAddr(PodName(t.node)) }

// The deadlines are the WebSocket connection's own: a read or write past one fails with a
// timeout, after which the tunnel is broken (gorilla/websocket does not resume after a read
// timeout) and the pool dials a new one.
func (t *channelTunnel) SetDeadline(d time.Time) error {
	return errors.Join(t.ws.SetReadDeadline(d), t.ws.SetWriteDeadline(d))
}
func (t *channelTunnel) SetReadDeadline(d time.Time) error  { return t.ws.SetReadDeadline(d) }
func (t *channelTunnel) SetWriteDeadline(d time.Time) error { return t.ws.SetWriteDeadline(d) }
