package external

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/internal/membership"
)

// BackendName is the Snapshot.Backend of this backend.
const BackendName = "external"

// DefaultCallTimeout bounds one etcd call (and the dial before it) when Config says nothing.
const DefaultCallTimeout = 5 * time.Second

var (
	_ etcd.Cluster         = &Backend{}
	_ etcd.ObservedChanger = &Backend{}
)

// Config says which external etcd to reach and how.
type Config struct {
	// Cluster is the Cluster API Cluster; its namespace holds the Secrets (see the package doc).
	Cluster client.ObjectKey
	// Endpoints are the member client URLs to ask (https://host:port), as KCP's
	// clusterConfiguration.etcd.external.endpoints or an EtcdadmCluster's status.endpoints list
	// them. A member whose own client URLs are none of these (nor on MachineHosts) is never
	// dialled: the member list is the workload cluster's word, and a client URL in it may name
	// any address of the management network. Such a member's health is Unknown, saying so.
	Endpoints []string
	// MachineHosts are the addresses of the Machines that host the members (an etcdadm
	// Cluster's etcd Machines): a member reporting a client URL on one of these hosts is asked
	// there too, so a member the etcdadm controller has not yet added to status.endpoints is
	// observed. Empty: only Endpoints are dialled.
	MachineHosts []string
	// AllowedNetworks, when not empty, are the only networks dialled: an endpoint whose host
	// resolves to an address outside them is refused before any connection
	// (etcd.ErrEndpointNotAllowed), and the address connected to is checked again.
	AllowedNetworks []netip.Prefix
	// Client reads the Secrets from the management cluster.
	Client client.Reader
	// CallTimeout bounds each call to one member; zero means DefaultCallTimeout.
	CallTimeout time.Duration
	// DialContext, when set, opens the connections (for example through a proxy); nil dials
	// directly.
	DialContext func(ctx context.Context, addr string) (net.Conn, error)
	// Logger logs what the backend does; the context's logger is preferred when there is one.
	Logger logr.Logger
}

// Backend is the external etcd of one workload cluster. It is safe for concurrent use. Its
// member connections are kept between calls; Close closes them.
type Backend struct {
	cfg Config
	// configured are cfg.Endpoints, normalised.
	configured []string

	// Cluster is Observe, MoveLeader and RemoveMember, with the membership core; its Memory
	// keeps the cluster ID seen first, the member list seen last and the members known removed.
	membership.Cluster

	mu       sync.Mutex
	conns    map[string]*conn  // by endpoint
	selfAt   map[string]uint64 // the member that answered last at each endpoint
	removing map[uint64]bool   // members this backend asked etcd to remove
}

// conn is one kept client for one endpoint, made with one set of credentials.
type conn struct {
	cli *clientv3.Client
	sum [32]byte
}

// New returns a Backend for cfg. It connects lazily.
func New(cfg Config) (*Backend, error) {
	switch {
	case cfg.Cluster.Name == "" || cfg.Cluster.Namespace == "":
		return nil, fmt.Errorf("%w: external etcd backend: Cluster namespace and name are required", etcd.ErrInvalidInput)
	case cfg.Client == nil:
		return nil, fmt.Errorf("%w: external etcd backend for Cluster %s: a client to read Secrets is required", etcd.ErrInvalidInput, cfg.Cluster)
	case len(cfg.Endpoints) == 0:
		return nil, fmt.Errorf("%w: external etcd backend for Cluster %s: no etcd endpoint given", etcd.ErrInvalidInput, cfg.Cluster)
	}
	for _, ep := range cfg.Endpoints {
		if err := checkEndpoint(ep); err != nil {
			return nil, fmt.Errorf("%w: external etcd backend for Cluster %s: %w", etcd.ErrInvalidInput, cfg.Cluster, err)
		}
	}
	if cfg.CallTimeout == 0 {
		cfg.CallTimeout = DefaultCallTimeout
	}
	if cfg.Logger.GetSink() == nil {
		cfg.Logger = logr.Discard()
	}
	b := &Backend{cfg: cfg, conns: map[string]*conn{}, selfAt: map[string]uint64{}, removing: map[uint64]bool{}}
	for _, ep := range cfg.Endpoints {
		b.configured = append(b.configured, normalise(ep))
	}
	b.Observer, b.Refuse, b.CallTimeout, b.Logger = b.observe, refuseStrangers, cfg.CallTimeout, b.logger
	return b, nil
}

// checkEndpoint accepts https URLs with a host and a port: a plain-text endpoint would send the
// client certificate's requests unverified.
func checkEndpoint(ep string) error {
	u, err := url.Parse(ep)
	switch {
	case err != nil:
		return fmt.Errorf("endpoint %q is not a URL: %w", ep, err)
	case u.Scheme != "https" || u.Hostname() == "" || u.Port() == "":
		return fmt.Errorf("endpoint %q is not an https://host:port client URL", ep)
	}
	return nil
}

// Close closes every member connection. The Backend must not be used afterwards.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	for ep, c := range b.conns {
		errs = append(errs, c.cli.Close())
		delete(b.conns, ep)
	}
	return errors.Join(errs...)
}

func (b *Backend) logger(ctx context.Context) logr.Logger {
	if l, err := logr.FromContext(ctx); err == nil {
		return l.WithValues("Cluster", b.cfg.Cluster.String())
	}
	return b.cfg.Logger.WithValues("Cluster", b.cfg.Cluster.String())
}

// client returns the kept client for ep made with creds, or a new one. clientv3 reconnects a
// kept client on its own, so a client is replaced only when the credentials change. A new
// client is made only after a TLS handshake with the member succeeded (see probe).
func (b *Backend) client(ctx context.Context, ep string, creds *credentials) (*clientv3.Client, error) {
	b.mu.Lock()
	if c, ok := b.conns[ep]; ok {
		if c.sum == creds.sum {
			b.mu.Unlock()
			return c.cli, nil
		}
		_ = c.cli.Close()
		delete(b.conns, ep)
	}
	b.mu.Unlock()
	if err := b.probe(ctx, ep, creds); err != nil {
		return nil, b.classify(ctx, ep, "dial", err)
	}
	cfg := clientv3.Config{
		Endpoints:            []string{ep},
		TLS:                  creds.tlsConfig(),
		DialTimeout:          b.cfg.CallTimeout,
		DialKeepAliveTime:    30 * time.Second,
		DialKeepAliveTimeout: b.cfg.CallTimeout,
		Logger:               zap.NewNop(),
		// clientv3's default is 2 GiB: a member answering a huge member list would be read
		// whole into the manager's memory.
		MaxCallRecvMsgSize: etcd.MaxResponseBytes,
	}
	cfg.DialOptions = append(cfg.DialOptions, grpc.WithContextDialer(b.dial))
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, b.classify(ctx, ep, "create client", err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if c, ok := b.conns[ep]; ok && c.sum == creds.sum {
		_ = cli.Close() // another call made one meanwhile
		return c.cli, nil
	}
	b.conns[ep] = &conn{cli: cli, sum: creds.sum}
	return cli, nil
}

// probe opens one TLS connection to ep and reads the server's first bytes. gRPC waits for a
// connection until the call's deadline and then reports only "context deadline exceeded",
// losing why: a server certificate the CA did not sign fails the handshake here, and a client
// certificate the member refuses shows as the member's TLS alert on the first read (TLS 1.3
// sends it after the handshake). A member that sends nothing before the deadline is not an
// error here; the call that follows reports it.
func (b *Backend) probe(ctx context.Context, ep string, creds *credentials) error {
	u, err := url.Parse(ep)
	if err != nil {
		return fmt.Errorf("endpoint %q is not a URL: %w", ep, err)
	}
	ctx, cancel := context.WithTimeout(ctx, b.cfg.CallTimeout)
	defer cancel()
	raw, err := b.dial(ctx, u.Host)
	if err != nil {
		return fmt.Errorf("failed to connect to etcd at %s: %w", ep, err)
	}
	defer func() { _ = raw.Close() }()
	cfg := creds.tlsConfig()
	cfg.ServerName = u.Hostname()
	cfg.NextProtos = []string{"h2"}
	tc := tls.Client(raw, cfg)
	if deadline, ok := ctx.Deadline(); ok {
		_ = tc.SetDeadline(deadline)
	}
	if err := tc.HandshakeContext(ctx); err != nil {
		return fmt.Errorf("TLS handshake with etcd at %s failed: %w", ep, err)
	}
	if _, err := tc.Read(make([]byte, 1)); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil
		}
		return fmt.Errorf("etcd at %s closed the TLS connection: %w", ep, err)
	}
	return nil
}

// retain closes the clients of endpoints not in keep.
func (b *Backend) retain(keep []string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for ep, c := range b.conns {
		if !slices.Contains(keep, ep) {
			_ = c.cli.Close()
			delete(b.conns, ep)
		}
	}
}

// normalise makes one spelling of a client URL, so an endpoint and a member's own client URL
// are recognised as the same.
func normalise(ep string) string { return strings.TrimRight(strings.TrimSpace(ep), "/") }
