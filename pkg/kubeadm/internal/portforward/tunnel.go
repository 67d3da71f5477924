package portforward

import (
	"io"
	"net"
	"sync"
	"time"

	"k8s.io/streaming/pkg/httpstream"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
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

	mu            sync.Mutex
	readDeadline  time.Time
	writeDeadline time.Time
	timer         *time.Timer
}

var _ net.Conn = &tunnel{}

// newTunnel wraps the data stream and starts reading the error stream, where the kubelet
// writes why it could not connect to the Pod's port.
func newTunnel(conn httpstream.Connection, data, errStream httpstream.Stream, node string) *tunnel {
	t := &tunnel{conn: conn, data: data, node: node, errMsg: make(chan string, 1)}
	go func() {
		// The kubelet writes one line: the rest of a longer text is read and dropped, so the
		// stream never holds up the connection and never grows the manager's memory.
		msg, _ := io.ReadAll(io.LimitReader(errStream, etcd.MaxTextBytes))
		_, _ = io.Copy(io.Discard, errStream)
		t.errMsg <- etcd.SanitizeText(string(msg), etcd.MaxTextBytes)
	}()
	return t
}

// RemoteError returns what the kubelet reported on the error stream, waiting briefly for it;
// empty when it reported nothing.
func (t *tunnel) RemoteError() string {
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
		t.mu.Lock()
		if t.timer != nil {
			t.timer.Stop()
		}
		t.mu.Unlock()
		_ = t.data.Reset()
		err = t.conn.Close()
	})
	return err
}

func (t *tunnel) LocalAddr() net.Addr  { return tunnelAddr("port-forward") }
func (t *tunnel) RemoteAddr() net.Addr { return tunnelAddr(PodName(t.node)) }

// SetDeadline and friends honour deadlines the only way a port-forward stream can: streams
// have no deadlines of their own, so when the earliest deadline passes the tunnel is closed,
// which ends a blocked Read or Write (as CAPI's proxy connection does). TLS and gRPC set
// deadlines to interrupt blocked I/O; a tunnel is never reused after one passed.
func (t *tunnel) SetDeadline(d time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.readDeadline, t.writeDeadline = d, d
	t.armLocked()
	return nil
}

// SetReadDeadline sets the read deadline; see SetDeadline.
func (t *tunnel) SetReadDeadline(d time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.readDeadline = d
	t.armLocked()
	return nil
}

// SetWriteDeadline sets the write deadline; see SetDeadline.
func (t *tunnel) SetWriteDeadline(d time.Time) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.writeDeadline = d
	t.armLocked()
	return nil
}

// armLocked (re)arms the timer that closes the tunnel at the earliest deadline.
func (t *tunnel) armLocked() {
	if t.timer != nil {
		t.timer.Stop()
		t.timer = nil
	}
	d := earliest(t.readDeadline, t.writeDeadline)
	if d.IsZero() {
		return
	}
	t.timer = time.AfterFunc(max(time.Until(d), 0), func() { _ = t.Close() })
}

// earliest returns the earlier of two deadlines, zero meaning none.
func earliest(a, b time.Time) time.Time {
	switch {
	case a.IsZero():
		return b
	case b.IsZero() || a.Before(b):
		return a
	}
	return b
}

// tunnelAddr names the ends of a tunnel.
type tunnelAddr string

func (a tunnelAddr) Network() string { return "portforward" }
func (a tunnelAddr) String() string  { return string(a) }
