package etcdcluster

import (
	"context"
	"net/url"
	"path/filepath"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcd-adapter/etcd-adapter/test/env/pki"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
)

// settings are the cluster-wide parts of every member's configuration.
type settings struct {
	// binary is the etcd binary members run as processes from, empty for in process;
	// wantVersion the version they must report, empty for any.
	binary, wantVersion string
	ca                  *pki.CA
	client              pki.KeyPair
	dir                 string
	token               string
	caFile              string
	tickMs              uint
	electionMs          uint
	quotaBackendBytes   int64
	looseReconfig       bool
	removes             *removeLog
}

// embedConfig builds the member's etcd configuration. Only the data directory is state: the
// same configuration restarts the member on the same ports.
func (m *Member) embedConfig() *embed.Config {
	cfg := embed.NewConfig()
	cfg.Name = m.Name()
	cfg.Dir = m.DataDir()
	cfg.ListenClientUrls = []url.URL{m.client}
	cfg.AdvertiseClientUrls = append([]url.URL{m.client}, m.advertise...)
	cfg.ListenPeerUrls = []url.URL{m.peer}
	cfg.AdvertisePeerUrls = []url.URL{m.peer}
	cfg.InitialCluster = m.initialCluster
	cfg.ClusterState = m.clusterState
	cfg.InitialClusterToken = m.settings.token
	cfg.ClientTLSInfo = m.tlsInfo("server")
	cfg.PeerTLSInfo = m.tlsInfo("peer")
	cfg.TickMs = m.settings.tickMs
	cfg.ElectionMs = m.settings.electionMs
	cfg.QuotaBackendBytes = m.settings.quotaBackendBytes
	cfg.StrictReconfigCheck = !m.settings.looseReconfig
	// Quiet: tests read etcd's errors only.
	cfg.LogLevel = "error"
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(logger)
	// Fewer goroutines and listeners, and no fsync: test data need not survive a power cut.
	cfg.EnableGRPCGateway = false
	cfg.UnsafeNoFsync = true
	cfg.GRPCAdditionalServerOptions = []grpc.ServerOption{grpc.ChainUnaryInterceptor(endCallOnPanic, m.settings.removes.intercept)}
	return cfg
}

// endCallOnPanic answers a call whose handler panicked as Unavailable. A member that applies its
// own removal closes its storage while a call may still be reading it (etcd v3.6's
// Maintenance.Status then uses a closed bbolt transaction and panics). A real member is a process
// of its own: the call would end with its connection, as Unavailable. In the test process the
// panic would end every test at once.
func endCallOnPanic(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			resp, err = nil, status.Errorf(codes.Unavailable, "etcd member stopped while answering: %v", r)
		}
	}()
	return handler(ctx, req)
}

// tlsInfo returns the TLS files of kind "server" or "peer", with client certificates required.
func (m *Member) tlsInfo(kind string) transport.TLSInfo {
	return transport.TLSInfo{
		CertFile:       filepath.Join(m.certDir(), kind+".crt"),
		KeyFile:        filepath.Join(m.certDir(), kind+".key"),
		TrustedCAFile:  m.settings.caFile,
		ClientCertAuth: true,
	}
}

// certDir holds the member's certificates; it is outside the data directory so Wipe keeps them.
func (m *Member) certDir() string { return filepath.Join(m.dir, "pki") }
