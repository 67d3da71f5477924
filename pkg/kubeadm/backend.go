package kubeadm

import (
	"context"
	"crypto/tls"
	"sync"

	"github.com/go-logr/logr"
	"k8s.io/utils/clock"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/internal/membership"
	"github.com/etcd-adapter/etcd-adapter/pkg/kubeadm/internal/portforward"
)

// BackendName is the Snapshot.Backend of this backend.
const BackendName = "kubeadm"

var (
	_ etcd.Cluster         = &Backend{}
	_ etcd.ObservedChanger = &Backend{}
)

// Backend is the etcd of one kubeadm workload cluster. It is safe for concurrent use. Its
// member connections are kept between calls; Close closes them.
type Backend struct {
	cfg      Config
	log      logr.Logger
	certs    *certSource
	dialer   *dialer
	pool     *pool
	lost     *coalescer // nil without Config.OnConnectionLost
	workload workloadClient

	// Cluster is Observe, MoveLeader and RemoveMember, with the membership core; its Memory
	// keeps the cluster ID seen first, the member list seen last and the members known removed.
	membership.Cluster

	mu        sync.Mutex
	known     []string        // Nodes of the members seen last, asked while the Pods are listed
	removedOn map[string]bool // Nodes whose member this backend asked etcd to remove

	// beforeRemove, when set, runs concurrently with every MemberRemove call. Only used for
	// testing: it kills the leader in the middle of a removal.
	beforeRemove func(via string)
}

// New returns a Backend for the workload cluster cfg names. It connects lazily: nothing is
// dialled until the first call.
func New(cfg Config) (*Backend, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	log := cfg.Logger.WithValues("Cluster", cfg.Cluster.String())
	d := &dialer{cfg: cfg, tunnels: portforward.Dialer{Sessions: tls.NewLRUClientSessionCache(16)}}
	var lost *coalescer
	if cfg.OnConnectionLost != nil {
		lost = newCoalescer(cfg.OnConnectionLost, connectionLostEvery, clock.RealClock{})
	}
	b := &Backend{
		cfg:    cfg,
		log:    log,
		certs:  &certSource{cfg: cfg},
		dialer: d,
		pool:   newPool(d, cfg.IdleTimeout, lost, log),
		lost:   lost,
	}
	b.Observer, b.CallTimeout, b.Logger = b.observe, cfg.CallTimeout, b.logger
	return b, nil
}

// Close closes every member connection. The Backend must not be used afterwards. Config's
// OnConnectionLost is not called after Close (a call already running may still finish).
func (b *Backend) Close() error {
	b.lost.stop()
	return b.pool.close()
}

// logger returns the context's logger (with the cluster) when there is one, else the
// configured one.
func (b *Backend) logger(ctx context.Context) logr.Logger {
	if l, err := logr.FromContext(ctx); err == nil {
		return l.WithValues("Cluster", b.cfg.Cluster.String())
	}
	return b.log
}
