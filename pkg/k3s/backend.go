package k3s

import (
	"errors"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// BackendName is the Snapshot.Backend of this backend's snapshots.
const BackendName = "k3s"

// K3s's own intervals (k3s pkg/etcd/etcd.go: the leader's member-status pass runs every 15 s and
// re-writes an unchanged EtcdIsVoter condition every 5 minutes).
const (
	// DefaultHeartbeatInterval is how often K3s re-writes an unchanged EtcdIsVoter condition.
	DefaultHeartbeatInterval = 5 * time.Minute
	// DefaultTick is how often the etcd leader's K3s checks members and writes EtcdIsVoter.
	DefaultTick = 15 * time.Second
	// DefaultClockSkew is the margin added for clock differences between K3s and this process
	// and for a slow leader pass.
	DefaultClockSkew = 30 * time.Second
	// DefaultCallTimeout bounds each call to the workload apiserver.
	DefaultCallTimeout = 10 * time.Second
	// DefaultResync is how often WaitForRemoval re-reads the Node when no event arrived, as a
	// safety net for a missed event; events, not this, normally end the wait.
	DefaultResync = time.Minute
)

// Config configures a Backend.
type Config struct {
	// Client reaches the workload cluster's apiserver directly (uncached): it patches Nodes, and
	// re-reads a Node right before patching it. Required. Under CAPI's clustercache use
	// GetUncachedClient.
	Client client.Client
	// Reader reads Nodes, normally from an informer cache (clustercache's GetReader, or Start's
	// own cache). Nil means Client.
	Reader client.Reader
	// HeartbeatInterval, Tick and ClockSkew are K3s's refresh rule: an EtcdIsVoter
	// condition whose heartbeat is older than their sum is stale. Zero means the defaults; set
	// them only for a K3s (or simulator) tuned differently.
	HeartbeatInterval, Tick, ClockSkew time.Duration
	// CallTimeout bounds each apiserver call; zero means DefaultCallTimeout.
	CallTimeout time.Duration
	// Resync is WaitForRemoval's safety-net re-read period; zero means DefaultResync.
	Resync time.Duration
	// Now returns the current time; nil means time.Now. Tests set it.
	Now func() time.Time
}

func (c Config) withDefaults() Config {
	setDefault(&c.HeartbeatInterval, DefaultHeartbeatInterval)
	setDefault(&c.Tick, DefaultTick)
	setDefault(&c.ClockSkew, DefaultClockSkew)
	setDefault(&c.CallTimeout, DefaultCallTimeout)
	setDefault(&c.Resync, DefaultResync)
	if c.Reader == nil {
		c.Reader = c.Client
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func setDefault(d *time.Duration, v time.Duration) {
	if *d <= 0 {
		*d = v
	}
}

// StaleAfter is the age after which an EtcdIsVoter heartbeat is not trusted: K3s re-writes an
// unchanged condition every HeartbeatInterval, from a pass that runs every Tick, so an older
// heartbeat means the leader's K3s stopped reporting. It is also the snapshots' EvidenceTTL.
func (c Config) StaleAfter() time.Duration { return c.HeartbeatInterval + c.Tick + c.ClockSkew }

// Backend is the etcd.Cluster of one K3s or RKE2 workload cluster, through its Node objects.
// It is safe for concurrent use.
type Backend struct {
	cfg   Config
	notes *notifier
	stop  func()
}

var _ etcd.Cluster = &Backend{}

// New returns a Backend for the workload cluster cfg.Client reaches. For completion to be
// noticed from events, give it a Node watch (AttachInformer, or Watcher under clustercache), or
// use Start, which runs its own.
func New(cfg Config) (*Backend, error) {
	if cfg.Client == nil {
		return nil, fmt.Errorf("%w: k3s.New needs Config.Client", etcd.ErrInvalidInput)
	}
	return &Backend{cfg: cfg.withDefaults(), notes: newNotifier()}, nil
}

// errNoWatch is WaitForRemoval's refusal to wait without events.
var errNoWatch = errors.New("no Node watch attached: use k3s.Start, AttachInformer or Watcher")
