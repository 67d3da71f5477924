package kubelet

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Defaults of Options.
const (
	// DefaultHeartbeatInterval is how often the Node's Ready condition is refreshed.
	DefaultHeartbeatInterval = time.Second
	// DefaultPodSyncInterval is how often Pods bound to the Node are reconciled.
	DefaultPodSyncInterval = 500 * time.Millisecond
	// DefaultKubeletVersion is reported in the Node's status.nodeInfo.
	DefaultKubeletVersion = "v1.36.3"
)

// Options configures a kubelet stand-in.
type Options struct {
	// NodeName is the Node the stand-in registers and serves. Required.
	NodeName string
	// Config connects to the workload cluster's apiserver. Required.
	Config *rest.Config
	// Targets maps a Pod port to the address (host:port) that port-forward connects it to, for
	// every Pod on the Node; e.g. {2379: member.ClientAddress()} for an etcd Pod.
	Targets map[int32]string
	// ProviderID is set on a Node the stand-in creates; optional.
	ProviderID string
	// NodeIP is the Node's InternalIP, where the stand-in listens: a loopback address
	// (127.0.0.0/8); empty means NodeIP. A Node of its own address lets a member that never
	// started be placed on it by its peer URL, as kubeadm join advertises the Node's address.
	NodeIP string
	// HeartbeatInterval and PodSyncInterval default to DefaultHeartbeatInterval and
	// DefaultPodSyncInterval.
	HeartbeatInterval, PodSyncInterval time.Duration
	// KubeletVersion defaults to DefaultKubeletVersion.
	KubeletVersion string
	// Logger receives errors of the background loops; zero discards them.
	Logger logr.Logger
}

// Kubelet is a running kubelet stand-in. Its methods are safe for concurrent use.
type Kubelet struct {
	opts     Options
	client   client.Client
	listener net.Listener
	server   *http.Server
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	// writeMu serializes heartbeats: a heartbeat that read the Ready state before SetNotReady
	// or SetReady changed it must land before theirs, not after, or the Node would show the
	// old state once they returned (until the next heartbeat).
	writeMu sync.Mutex

	mu       sync.Mutex
	targets  map[int32]string
	conns    map[net.Conn]struct{}
	forwards map[net.Conn]struct{}
	broken   bool
	// portForwards counts the port-forward streams asked of this kubelet, whatever became of them.
	portForwards int
	// protocols counts the port-forward requests by the protocol they reached this kubelet in.
	protocols map[string]int
	notReady  *readyOverride
	// logs are the containers' logs SetLog gave, by namespace/pod/container.
	logs    map[string]containerLog
	stopped bool
}

// Start registers the Node (or adopts an existing one), starts serving the kubelet port and
// starts the heartbeat and Pod loops. It returns once the Node carries the kubelet's port,
// address and Ready condition. Stop ends it.
func Start(ctx context.Context, opts Options) (*Kubelet, error) {
	k, err := newKubelet(opts)
	if err != nil {
		return nil, err
	}
	if err := k.listen(); err != nil {
		return nil, err
	}
	if err := k.registerNode(ctx); err != nil {
		return nil, errors.Join(err, k.Stop())
	}
	loopCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	k.cancel = cancel
	k.every(loopCtx, k.opts.HeartbeatInterval, k.heartbeat)
	k.every(loopCtx, k.opts.PodSyncInterval, k.syncPods)
	return k, nil
}

// newKubelet validates the options and builds an uncached client: the Pod loop lists by
// spec.nodeName, which the apiserver supports and a cache would need an index for.
func newKubelet(opts Options) (*Kubelet, error) {
	if opts.NodeName == "" || opts.Config == nil {
		return nil, fmt.Errorf("invalid kubelet options: NodeName and Config are required")
	}
	if opts.HeartbeatInterval == 0 {
		opts.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if opts.PodSyncInterval == 0 {
		opts.PodSyncInterval = DefaultPodSyncInterval
	}
	if opts.KubeletVersion == "" {
		opts.KubeletVersion = DefaultKubeletVersion
	}
	if opts.NodeIP == "" {
		opts.NodeIP = NodeIP
	}
	c, err := client.New(opts.Config, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("failed to create client for kubelet %s: %w", opts.NodeName, err)
	}
	targets := map[int32]string{}
	for p, a := range opts.Targets {
		targets[p] = a
	}
	return &Kubelet{opts: opts, client: c, targets: targets}, nil
}

// every runs fn now and then every interval until ctx ends.
func (k *Kubelet) every(ctx context.Context, interval time.Duration, fn func(context.Context) error) {
	k.wg.Go(func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			if err := fn(ctx); err != nil && ctx.Err() == nil {
				k.opts.Logger.Error(err, "Kubelet stand-in loop failed", "node", k.opts.NodeName)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
}

// NodeName returns the Node the stand-in serves.
func (k *Kubelet) NodeName() string { return k.opts.NodeName }

// Port returns the kubelet's TLS port, the one in the Node's status.daemonEndpoints.
func (k *Kubelet) Port() int32 { return int32(k.listener.Addr().(*net.TCPAddr).Port) }

// Stop stops the stand-in as if its machine died: heartbeats and Pod handling end and the
// kubelet port refuses connections. The Node object is left as it is: the test apiserver runs
// no node lifecycle controller, so its Ready condition stays True with a stale heartbeat; use
// SetNotReady first to see a not-ready Node. Stop is idempotent and cannot be undone.
func (k *Kubelet) Stop() error {
	k.mu.Lock()
	if k.stopped {
		k.mu.Unlock()
		return nil
	}
	k.stopped = true
	k.mu.Unlock()
	if k.cancel != nil {
		k.cancel()
	}
	// Close, not Shutdown: hijacked port-forward connections would keep Shutdown waiting, and
	// neither closes them; closeConns does.
	err := k.server.Close()
	k.closeConns()
	k.closeForwards()
	k.wg.Wait()
	if err != nil {
		return fmt.Errorf("failed to stop kubelet %s: %w", k.opts.NodeName, err)
	}
	return nil
}
