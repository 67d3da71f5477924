package kubeadm

import (
	"io"
	"net"
	"strings"
	"sync"
	"time"

	"k8s.io/streaming/pkg/httpstream"
)

// errorStreamWait bounds how long a failed tunnel waits for the kubelet's explanation on the
// port-forward error stream (e.g. "connection refused" when etcd is down).
const errorStreamWait = 300 * time.Millisecond

// tunnel is a net.Conn over one port-forward data stream. Closing it closes the whole
// port-forward connection (one stream pair per connection, so nothing else uses it).
type tunnel struct {
	conn   httpstream.Connection
	data   httpstream.Stream
	node   string
	once   sync.Once
	errMsg chan string // receives the error stream's content once it closes
}

var _ net.Conn = &tunnel{}

// newTunnel wraps the data stream and starts reading the error stream, where the kubelet
// writes why it could not connect to the Pod's port.
func newTunnel(conn httpstream.Connection, data, errStream httpstream.Stream, node string) *tunnel {
	t := &tunnel{conn: conn, data: data, node: node, errMsg: make(chan string, 1)}
	go func() {
		msg, _ := io.ReadAll(errStream)
		t.errMsg <- strings.TrimSpace(string(msg))
	}()
	return t
}

// remoteError returns what the kubelet reported on the error stream, waiting briefly for it;
// empty when it reported nothing.
func (t *tunnel) remoteError() string {
	select {
	case msg := <-t.errMsg:
		t.errMsg <- msg
		return msg
	case <-time.After(errorStreamWait):
		return ""
	}
}

func (t *tunnel) Read(b []byte) (int, error)  { return t.data.Read(b) }
func (t *tunnel) Write(b []byte) (int, error) { return t.data.Write(b) }

// Close closes the port-forward connection; the error-stream reader ends with it.
func (t *tunnel) Close() error {
	var err error
	t.once.Do(func() {
		_ = t.data.Reset()
		err = t.conn.Close()
	})
	return err
}

func (t *tunnel) LocalAddr() net.Addr  { return tunnelAddr("port-forward") }
func (t *tunnel) RemoteAddr() net.Addr { return tunnelAddr(podName(t.node)) }

// SetDeadline and friends are no-ops: streams have no deadlines. Every caller bounds its work
// with a context instead, and TLS and gRPC close the connection when their context ends.
func (t *tunnel) SetDeadline(time.Time) error      { return nil }
func (t *tunnel) SetReadDeadline(time.Time) error  { return nil }
func (t *tunnel) SetWriteDeadline(time.Time) error { return nil }

// tunnelAddr names the ends of a tunnel.
type tunnelAddr string

func (a tunnelAddr) Network() string { return "portforward" }
func (a tunnelAddr) String() string  { return string(a) }
