// Package setup adds every etcd-adapter controller and the webhooks (quorum guard, Machine hook)
// to a controller-runtime manager, the one call a manager binary (or a test) makes.
package setup

import (
	"context"
	"errors"
	"net/netip"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
	"github.com/etcd-adapter/etcd-adapter/controlplane/reconcilers/controlplaneetcd"
	"github.com/etcd-adapter/etcd-adapter/controlplane/reconcilers/creation"
	"github.com/etcd-adapter/etcd-adapter/controlplane/reconcilers/handback"
	"github.com/etcd-adapter/etcd-adapter/controlplane/webhooks/machinehook"
	"github.com/etcd-adapter/etcd-adapter/controlplane/webhooks/quorumguard"
)

// DefaultConcurrency is how many ControlPlaneEtcds are reconciled at once: a worker waits at most
// the call timeout on a dead workload cluster, so others keep their pace. A pass mostly waits on
// the workload and management apiservers. make bench-fleet (docs/benchmarks.md): a member
// failure seen by 1,000 K3s Clusters at once reached the last status after 26.9 s with 20
// workers under a 920 MiB memory limit, most of it K3s's own report and the status writes queued
// behind the management client's rate limit, not the workers.
const DefaultConcurrency = 20

// Options configure Setup.
type Options struct {
	// ClusterCache reaches the workload clusters. Required.
	ClusterCache clustercache.ClusterCache
	// Concurrency is MaxConcurrentReconciles of the ControlPlaneEtcd controller; zero means
	// DefaultConcurrency.
	Concurrency int
	// CallTimeout bounds one observation; zero means the controller's default.
	CallTimeout time.Duration
	// DialTimeout bounds one port-forward plus TLS handshake to a kubeadm etcd member; zero means
	// kubeadm.DefaultDialTimeout.
	DialTimeout time.Duration
	// ObservationInterval is how often etcd is observed for a ControlPlaneEtcd without
	// spec.observationInterval; zero means v1alpha1.DefaultObservationInterval.
	ObservationInterval time.Duration
	// SnapshotScratchDir is where a snapshot's database is written for its consistency and
	// revision checks (spec.snapshot); empty: only the sha256 trailer and stored size are checked.
	SnapshotScratchDir string
	// AllowedNetworks are the only networks the external etcd backend dials
	// (backends.Registry.AllowedNetworks); empty allows every address.
	AllowedNetworks []netip.Prefix
	// Webhooks registers the quorum guard and the Machine hook webhook on the manager's webhook
	// server.
	Webhooks bool
	// WatchFilter and Namespace are the manager's --watch-filter and --namespace (the cache
	// already applies them); the Machine hook webhook reads uncached and needs them to tell the
	// Clusters this manager handles.
	WatchFilter string
	Namespace   string
	// AtStep is passed to the ControlPlaneEtcd controller. Only used for testing.
	AtStep func(ctx context.Context, step string)
}

// Setup adds the controllers (and, with Options.Webhooks, the quorum guard and the Machine hook
// webhook) to mgr. The returned
// Registry is shared by all of them.
func Setup(ctx context.Context, mgr ctrl.Manager, opts Options) (*backends.Registry, error) {
	if opts.ClusterCache == nil {
		return nil, errors.New("failed to set up etcd-adapter: ClusterCache is nil")
	}
	if opts.Concurrency == 0 {
		opts.Concurrency = DefaultConcurrency
	}
	// A kubeadm member connection that ends wakes the ControlPlaneEtcd controller, so a failed
	// member shows in the status without waiting for the next observation.
	if err := creation.IndexByClusterName(ctx, mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	lost := controlplaneetcd.NewConnectionLost()
	registry := &backends.Registry{Client: mgr.GetClient(), RESTMapper: mgr.GetRESTMapper(), ClusterCache: opts.ClusterCache, DialTimeout: opts.DialTimeout,
		ConnectionLost: lost.Notify, AllowedNetworks: opts.AllowedNetworks}
	if err := (&creation.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		return nil, err
	}
	r := &controlplaneetcd.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), ClusterCache: opts.ClusterCache, Backends: registry, ConnectionLost: lost,
		CallTimeout: opts.CallTimeout, ObservationInterval: opts.ObservationInterval, AtStep: opts.AtStep,
		SnapshotScratchDir: opts.SnapshotScratchDir}
	// Note: warm-up starts the controller's event sources on a replica that does not lead (its
	// workers still start only on the leader, so nothing is written there). One of the sources is
	// the ClusterCache's Cluster source, an unbuffered channel the ClusterCache's reconciler sends
	// to on every connect: a manager that runs the ClusterCache on every replica, so that the
	// quorum guard answers from a real observation everywhere, would otherwise see that reconciler
	// block forever on the first connect of a replica that does not lead. Warm-up also lets a new
	// leader start with its queue filled.
	if err := r.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: opts.Concurrency, EnableWarmup: ptr.To(true)}); err != nil {
		return nil, err
	}
	if err := (&handback.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}).SetupWithManager(mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		return nil, err
	}
	if opts.Webhooks {
		if err := (&quorumguard.Guard{Client: mgr.GetClient(), Backends: registry}).SetupWithManager(mgr); err != nil {
			return nil, err
		}
		if err := (&machinehook.Webhook{Client: mgr.GetAPIReader(), WatchFilter: opts.WatchFilter, Namespace: opts.Namespace}).SetupWithManager(mgr); err != nil {
			return nil, err
		}
	}
	return registry, nil
}
