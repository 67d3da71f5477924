package kubeadm

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/go-logr/logr"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/internal/membership"
	"github.com/etcd-adapter/etcd-adapter/pkg/kubeadm/internal/portforward"
)

// Keep-alive of member connections: a tunnel that died without a close (apiserver or kubelet
// gone silent) is noticed within keepAliveTime + keepAliveTimeout even when idle.
const (
	keepAliveTime    = 30 * time.Second
	keepAliveTimeout = 10 * time.Second
)

// memberClient is a clientv3 client for one member, over one port-forward.
type memberClient struct {
	node        string
	fingerprint string
	cli         *clientv3.Client
	cluster     clientv3.Cluster
	maint       clientv3.Maintenance
	// Client is how the membership core asks the member, over the same connection.
	membership.Client
	// conns drops the client from the pool, and tells the pool's owner, when the member's
	// connection ends while the pool keeps the client.
	conns *connLossHandler

	mu       sync.Mutex
	dialErr  error
	lastUsed time.Time
}

// close closes the client; the ends of its connections are not reported as lost.
func (m *memberClient) close() error {
	m.conns.kept.Store(false)
	return m.cli.Close()
}

func (m *memberClient) setDialErr(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.dialErr = err
}

func (m *memberClient) lastDialErr() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.dialErr
}

func (m *memberClient) touch(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.lastUsed = now
}

func (m *memberClient) idleSince() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.lastUsed
}

// ready is the health probe run before every use: it returns nil when the connection is up,
// connects an idle one, and reports the dial error of a broken one.
func (m *memberClient) ready(ctx context.Context) error {
	conn := m.cli.ActiveConnection()
	for {
		s := conn.GetState()
		switch s {
		case connectivity.Ready:
			return nil
		case connectivity.Idle:
			conn.Connect()
		case connectivity.TransientFailure, connectivity.Shutdown:
			if err := m.lastDialErr(); err != nil {
				return err
			}
			return fmt.Errorf("%w: connection to etcd on Node %s is %s", etcd.ErrUnreachable, m.node, s)
		}
		if !conn.WaitForStateChange(ctx, s) {
			if err := m.lastDialErr(); err != nil {
				return err
			}
			return fmt.Errorf("%w: connection to etcd on Node %s stayed %s: %w", etcd.ErrUnreachable, m.node, s, context.Cause(ctx))
		}
	}
}

// pool keeps one memberClient per Node. Broken clients are replaced on the next get, idle ones
// are closed by a janitor, and close closes everything. A kept client's connection that ends
// otherwise notifies lost (nil: nobody is told).
type pool struct {
	dialer *dialer
	idle   time.Duration
	log    logr.Logger
	lost   *coalescer

	mu      sync.Mutex
	clients map[string]*memberClient
	closed  bool

	stop chan struct{}
	wg   sync.WaitGroup
}

func newPool(d *dialer, idle time.Duration, lost *coalescer, log logr.Logger) *pool {
	p := &pool{dialer: d, idle: idle, log: log, lost: lost, clients: map[string]*memberClient{}, stop: make(chan struct{})}
	p.wg.Go(p.janitor)
	return p
}

// errClosed is returned after Close.
var errClosed = fmt.Errorf("%w: the kubeadm etcd backend is closed", etcd.ErrInvalidInput)

// get returns a ready client for the member on node, dialling a new one when there is none,
// when the CA changed, or when the probe finds the old one broken.
func (p *pool) get(ctx context.Context, node string, creds *credentials) (*memberClient, error) {
	c, _, err := p.getReused(ctx, node, creds)
	return c, err
}

// getReused is get, also telling whether the client was kept from before (its tunnel may have
// died silently) rather than dialled now.
func (p *pool) getReused(ctx context.Context, node string, creds *credentials) (*memberClient, bool, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, false, errClosed
	}
	c := p.clients[node]
	p.mu.Unlock()
	if c != nil && c.fingerprint == creds.fingerprint {
		if err := c.ready(ctx); err == nil {
			c.touch(time.Now())
			return c, true, nil
		}
		p.log.V(4).Info("Replacing broken etcd connection", "node", node)
	}
	if c != nil {
		p.drop(node, c)
	}
	c, err := p.connect(ctx, node, creds)
	return c, false, err
}

// connect dials a new client and keeps it unless the pool closed meanwhile.
func (p *pool) connect(ctx context.Context, node string, creds *credentials) (*memberClient, error) {
	c, err := p.newClient(node, creds)
	if err != nil {
		return nil, err
	}
	dialCtx, cancel := context.WithTimeout(ctx, p.dialer.cfg.DialTimeout)
	defer cancel()
	if err := c.ready(dialCtx); err != nil {
		_ = c.close()
		return nil, err
	}
	c.touch(time.Now())
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		_ = c.close()
		return nil, errClosed
	}
	// Note: another call (the quorum guard's and the controller's observations run at the same
	// time) may have connected meanwhile. Its client is in use: closing it would fail that
	// call's requests with "the client connection is closing", read as a member not answering.
	// Keep it and close this one, unless it was made with an old CA.
	if cur := p.clients[node]; cur != nil && cur.fingerprint == creds.fingerprint {
		p.mu.Unlock()
		_ = c.close()
		cur.touch(time.Now())
		return cur, nil
	}
	old := p.clients[node]
	p.clients[node] = c
	c.conns.kept.Store(true)
	p.mu.Unlock()
	if old != nil {
		_ = old.close()
	}
	return c, nil
}

// newClient builds a clientv3 client whose only way to the member is the port-forward dialer.
// TLS is done by the dialer (so its errors are ours to classify), hence no TLS config here.
func (p *pool) newClient(node string, creds *credentials) (*memberClient, error) {
	c := &memberClient{node: node, fingerprint: creds.fingerprint}
	c.conns = &connLossHandler{node: node, lost: p.lost, log: p.log, forget: func() { p.forgetLost(node, c) }}
	dial := func(ctx context.Context, _ string) (net.Conn, error) {
		conn, err := p.dialer.dial(ctx, node, creds)
		c.setDialErr(err)
		return conn, err
	}
	// No read buffer of gRPC's own (32 KiB by default, kept per connection): the TLS connection
	// under it already buffers a whole record.
	opts := []grpc.DialOption{grpc.WithContextDialer(dial), grpc.WithReadBufferSize(0), grpc.WithStatsHandler(c.conns)}
	cli, err := clientv3.New(clientv3.Config{
		// The endpoint only names the target; the dialer decides where the bytes go.
		Endpoints:            []string{fmt.Sprintf("%s:%d", portforward.PodName(node), portforward.EtcdPort)},
		DialTimeout:          p.dialer.cfg.DialTimeout,
		DialKeepAliveTime:    keepAliveTime,
		DialKeepAliveTimeout: keepAliveTimeout,
		DialOptions:          opts,
		MaxUnaryRetries:      1,
		Logger:               zap.NewNop(),
		// clientv3's default is 2 GiB: a member answering a huge member list would be read
		// whole into the manager's memory.
		MaxCallRecvMsgSize: etcd.MaxResponseBytes,
	})
	if err != nil {
		return nil, fmt.Errorf("failed to create etcd client for Node %s: %w", node, err)
	}
	c.cli = cli
	c.cluster = clientv3.NewClusterFromClusterClient(pb.NewClusterClient(cli.ActiveConnection()), cli)
	// Status through the client's own connection: clientv3's Status(endpoint) would dial a
	// second connection (another port-forward) on every call.
	c.maint = clientv3.NewMaintenanceFromMaintenanceClient(pb.NewMaintenanceClient(cli.ActiveConnection()), cli)
	c.Client = membership.NewClient(c.cluster, c.maint, "")
	return c, nil
}

// drop closes and forgets c if it is still the pool's client for node.
func (p *pool) drop(node string, c *memberClient) {
	p.mu.Lock()
	if p.clients[node] == c {
		delete(p.clients, node)
	}
	p.mu.Unlock()
	_ = c.close()
}

// forgetLost forgets c, whose kept connection ended, if it is still the pool's client for node,
// and closes it. Left open, gRPC would connect it again at once and then with a growing backoff,
// each time a new port-forward through the workload apiserver, for as long as the member stays
// down; the next observation dials the member once instead.
//
// Note: it runs on the gRPC goroutine that reports the end of the connection, so the client is
// closed on a goroutine of its own rather than from inside gRPC's close.
func (p *pool) forgetLost(node string, c *memberClient) {
	p.mu.Lock()
	if p.clients[node] == c {
		delete(p.clients, node)
	}
	p.mu.Unlock()
	go func() { _ = c.close() }()
}

// retain closes the clients of Nodes not in keep (members that left the cluster).
func (p *pool) retain(keep map[string]bool) {
	p.mu.Lock()
	var gone []*memberClient
	for node, c := range p.clients {
		if !keep[node] {
			gone = append(gone, c)
			delete(p.clients, node)
		}
	}
	p.mu.Unlock()
	closeAll(gone)
}

// dropAll closes every client (a new CA makes them all stale).
func (p *pool) dropAll() { p.retain(nil) }

// janitor closes clients unused for longer than the idle timeout.
func (p *pool) janitor() {
	t := time.NewTicker(max(p.idle/4, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-p.stop:
			return
		case now := <-t.C:
			p.evictIdle(now)
		}
	}
}

func (p *pool) evictIdle(now time.Time) {
	p.mu.Lock()
	var idle []*memberClient
	for node, c := range p.clients {
		if now.Sub(c.idleSince()) > p.idle {
			idle = append(idle, c)
			delete(p.clients, node)
			p.log.V(4).Info("Closing idle etcd connection", "node", node)
		}
	}
	p.mu.Unlock()
	closeAll(idle)
}

// close closes every client and stops the janitor; it is idempotent.
func (p *pool) close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	clients := p.clients
	p.clients = map[string]*memberClient{}
	p.mu.Unlock()
	close(p.stop)
	p.wg.Wait()
	var errs []error
	for _, c := range clients {
		if err := c.close(); err != nil && !errors.Is(err, context.Canceled) {
			errs = append(errs, fmt.Errorf("failed to close etcd client for Node %s: %w", c.node, err))
		}
	}
	return errors.Join(errs...)
}

func closeAll(cs []*memberClient) {
	for _, c := range cs {
		_ = c.close()
	}
}

// size reports how many member clients are open.
func (p *pool) size() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.clients)
}

// snapshotClients returns the open clients by Node, for tests.
func (p *pool) snapshotClients() map[string]*memberClient {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]*memberClient, len(p.clients))
	for k, v := range p.clients {
		out[k] = v
	}
	return out
}

// SnapshotWithVersion opens the member's snapshot stream over the client's port-forward
// (membership.SnapshotClient).
func (m *memberClient) SnapshotWithVersion(ctx context.Context) (*clientv3.SnapshotResponse, error) {
	return m.maint.SnapshotWithVersion(ctx)
}
