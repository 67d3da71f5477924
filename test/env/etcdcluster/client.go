package etcdcluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/etcd-adapter/etcd-adapter/test/env/pki"
)

// DialTimeout bounds how long a client built here waits for its first connection.
const DialTimeout = 5 * time.Second

// ClientKeyPair returns the client certificate of the cluster's clients, issued with KCP's
// CommonName (pki.KCPClientCommonName).
func (c *Cluster) ClientKeyPair() pki.KeyPair { return c.settings.client }

// ClientTLSConfig returns a TLS configuration presenting the cluster's client certificate and
// verifying the server against the cluster CA. serverName is the name to verify, e.g. a node
// name when dialling through a port-forward; empty means the dialled host.
// Note: clientv3 ignores tls.Config.ServerName (gRPC overwrites it); use WithServerName.
func (c *Cluster) ClientTLSConfig(serverName string) (*tls.Config, error) {
	return c.settings.ca.ClientTLSConfig(c.settings.client, serverName)
}

// ClientConfig returns a clientv3 configuration for endpoints (host:port or URLs); with none,
// for every running member.
func (c *Cluster) ClientConfig(endpoints ...string) (clientv3.Config, error) {
	if len(endpoints) == 0 {
		endpoints = c.runningEndpoints()
	}
	return c.settings.clientConfig(endpoints)
}

// clientConfig builds a clientv3 configuration with the cluster's client certificate.
func (s *settings) clientConfig(endpoints []string) (clientv3.Config, error) {
	if len(endpoints) == 0 {
		return clientv3.Config{}, fmt.Errorf("failed to build etcd client config: no running member")
	}
	tlsConfig, err := s.ca.ClientTLSConfig(s.client, "")
	if err != nil {
		return clientv3.Config{}, err
	}
	return clientv3.Config{
		Endpoints:   endpoints,
		TLS:         tlsConfig,
		DialTimeout: DialTimeout,
		// Block so that a client is only returned once it is connected and TLS succeeded;
		// tests then see a rejected certificate as an error from NewClient.
		DialOptions: []grpc.DialOption{grpc.WithBlock()}, //nolint:staticcheck // see above
		Logger:      zap.NewNop(),
	}, nil
}

// NewClient returns a client, closed by the caller, for the given endpoints; with none, for
// every running voting member. ctx's deadline bounds only the dial.
func (c *Cluster) NewClient(ctx context.Context, endpoints ...string) (*clientv3.Client, error) {
	cfg, err := c.ClientConfig(endpoints...)
	if err != nil {
		return nil, err
	}
	return NewClient(ctx, cfg)
}

// NewClient connects a client with cfg, e.g. one from ClientConfig and WithServerName, and
// returns it once connected, or an error when ctx's deadline or cfg.DialTimeout (default
// DialTimeout) passes first. ctx bounds only the dial: the client lives until the caller
// closes it.
func NewClient(ctx context.Context, cfg clientv3.Config) (*clientv3.Client, error) {
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = DialTimeout
	}
	if deadline, ok := ctx.Deadline(); ok && time.Until(deadline) < cfg.DialTimeout {
		cfg.DialTimeout = max(time.Until(deadline), time.Millisecond)
	}
	// clientv3 closes a client when cfg.Context ends, which would surprise callers that
	// pass a short-lived ctx; its values are kept.
	cfg.Context = context.WithoutCancel(ctx)
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to connect to etcd %v: %w", cfg.Endpoints, err)
	}
	return cli, nil
}

// ClientConfig returns a clientv3 configuration for this member only.
func (m *Member) ClientConfig() (clientv3.Config, error) {
	return m.settings.clientConfig([]string{m.ClientURL()})
}

// NewClient returns a client, closed by the caller, connected to this member only.
func (m *Member) NewClient(ctx context.Context) (*clientv3.Client, error) {
	cfg, err := m.ClientConfig()
	if err != nil {
		return nil, err
	}
	return NewClient(ctx, cfg)
}

// ClusterID returns the cluster ID reported by the running members.
func (c *Cluster) ClusterID(ctx context.Context) (uint64, error) {
	cli, err := c.NewClient(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = cli.Close() }()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		return 0, fmt.Errorf("failed to list etcd members: %w", err)
	}
	return resp.Header.ClusterId, nil
}

// runningEndpoints returns the client URLs of running voting members: learners reject most
// RPCs, and the client would round-robin onto them. A member that applied its own removal and
// has not stopped yet is left out too.
func (c *Cluster) runningEndpoints() []string {
	var eps []string
	for _, m := range c.Members() {
		if m.Running() && m.isVoter() {
			eps = append(eps, m.ClientURL())
		}
	}
	return eps
}

// isVoter reports whether the server is a voting member by its own member list.
// Important! EtcdServer.IsLearner panics ("failed to find local ID in cluster members") on a
// member that applied its own removal and still runs, which would end the whole test binary.
func isVoter(e *embed.Etcd) bool {
	self := e.Server.Cluster().Member(e.Server.MemberID())
	return self != nil && !self.IsLearner
}

// WithServerName returns cfg set to verify the server certificate for serverName (e.g. the
// Node name when dialling a member through a port-forward) instead of the dialled host.
// Important! Setting cfg.TLS.ServerName alone has no effect: gRPC's TLS credentials overwrite
// it with the connection's authority, so the authority is overridden too.
func WithServerName(cfg clientv3.Config, serverName string) clientv3.Config {
	if cfg.TLS != nil {
		cfg.TLS = cfg.TLS.Clone()
		cfg.TLS.ServerName = serverName
	}
	cfg.DialOptions = append(append([]grpc.DialOption(nil), cfg.DialOptions...), grpc.WithAuthority(serverName))
	return cfg
}
