package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
	"github.com/etcd-adapter/etcd-adapter/controlplane/reconcilers/creation"
	"github.com/etcd-adapter/etcd-adapter/controlplane/setup"
	"github.com/etcd-adapter/etcd-adapter/controlplane/webhooks/machinehook"
	"github.com/etcd-adapter/etcd-adapter/controlplane/webhooks/quorumguard"
	"github.com/etcd-adapter/etcd-adapter/test/env"
	"github.com/etcd-adapter/etcd-adapter/test/env/capi"
)

// observeTimeout bounds one observation by the controllers: kubeadm asks every member through a
// port-forward, which on a loaded 2-core machine can take several seconds.
const observeTimeout = 20 * time.Second

// adapterManager runs the etcd-adapter controllers and the quorum guard in a manager of their
// own, as the etcd-adapter Deployment would next to Cluster API's, so a test can stop it at any
// point (a crash) and start a new one.
type adapterManager struct {
	mgmt   *env.Management
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
	// stopped is closed by Stop.
	stopped chan struct{}
	// backends is the manager's registry of etcd backends, shared by its controllers and the
	// quorum guard.
	backends *backends.Registry
}

// startAdapter starts the etcd-adapter manager; atStep, when set, is called at each step boundary
// of the removal flow (see controlplaneetcd.Reconciler.AtStep).
func startAdapter(ctx context.Context, mgmt *env.Management, atStep func(context.Context, string)) (*adapterManager, error) {
	return startAdapterWith(ctx, mgmt, adapterOptions{atStep: atStep})
}

// startWebhooksOnly starts an etcd-adapter manager that serves the webhooks (the Machine hook
// and the quorum guard) and runs no controller: etcd-adapter's controllers are down (a crash
// loop, a rollout of the Deployment) while its webhook Pods still answer.
func startWebhooksOnly(ctx context.Context, mgmt *env.Management) (*adapterManager, error) {
	return startAdapterWith(ctx, mgmt, adapterOptions{webhooksOnly: true})
}

// adapterOptions shape one etcd-adapter manager of a test.
type adapterOptions struct {
	// atStep is passed to the ControlPlaneEtcd controller.
	atStep func(context.Context, string)
	// webhooksOnly serves the webhooks and runs no controller.
	webhooksOnly bool
	// noWebhooks runs the controllers and serves no webhook: a second replica, whose webhook
	// server would need a port of its own that the management apiserver does not call.
	noWebhooks bool
	// leaderElectionID, when set, makes the controllers run only while this manager holds the
	// Lease of that name, as replicas of the etcd-adapter Deployment do.
	leaderElectionID string
	// wrapClient, when set, wraps the manager's client (to make some of its calls fail).
	wrapClient func(client.WithWatch) client.Client
	// webhookPort, when set, is the port the webhook server listens on instead of the one the
	// management apiserver calls (a replica behind a proxy that listens there).
	webhookPort int
}

// Leader election timings of the tests' managers: short, so that a stopped leader's Lease
// expires within seconds (a crashed leader does not give it up).
const (
	leaseDuration = 4 * time.Second
	renewDeadline = 3 * time.Second
	retryPeriod   = 500 * time.Millisecond
)

func startAdapterWith(ctx context.Context, mgmt *env.Management, o adapterOptions) (*adapterManager, error) {
	wio := mgmt.WebhookInstallOptions()
	opts := capi.ManagerOptions(scheme)
	// Note: Machines are cached as the etcd-adapter binary caches them (worker Machines trimmed).
	opts.Cache.ByObject[&clusterv1.Machine{}] = setup.MachineCacheOptions()
	if !o.noWebhooks {
		port := wio.LocalServingPort
		if o.webhookPort != 0 {
			port = o.webhookPort
		}
		opts.WebhookServer = webhook.NewServer(webhook.Options{Host: wio.LocalServingHost, Port: port, CertDir: wio.LocalServingCertDir})
	}
	if o.leaderElectionID != "" {
		opts.LeaderElection, opts.LeaderElectionID, opts.LeaderElectionNamespace = true, o.leaderElectionID, adapterNamespace
		opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = ptr.To(leaseDuration), ptr.To(renewDeadline), ptr.To(retryPeriod)
		// Note: the Lease is taken with the test's own identity: the manager's role
		// (config/rbac/role.yaml, checked against every recorded request) has no Lease rule,
		// which config/rbac/leader_election_role.yaml grants in the manager's namespace.
		opts.LeaderElectionConfig = rest.CopyConfig(mgmt.Config)
	}
	if o.wrapClient != nil {
		opts.NewClient = func(config *rest.Config, options client.Options) (client.Client, error) {
			c, err := client.NewWithWatch(config, options)
			if err != nil {
				return nil, err
			}
			return o.wrapClient(c), nil
		}
	}
	mgr, err := ctrl.NewManager(adapterConfig, opts)
	if err != nil {
		return nil, fmt.Errorf("failed to create the etcd-adapter manager: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	a := &adapterManager{mgmt: mgmt, cancel: cancel, done: make(chan error, 1), stopped: make(chan struct{})}
	cc, err := capi.SetupClusterCache(ctx, mgr)
	if err != nil {
		cancel()
		return nil, err
	}
	if o.webhooksOnly {
		a.backends = &backends.Registry{Client: mgr.GetClient(), RESTMapper: mgr.GetRESTMapper(), ClusterCache: cc}
		err = errors.Join(creation.IndexByClusterName(ctx, mgr.GetFieldIndexer()),
			(&quorumguard.Guard{Client: mgr.GetClient(), Backends: a.backends}).SetupWithManager(mgr),
			(&machinehook.Webhook{Client: mgr.GetAPIReader()}).SetupWithManager(mgr))
	} else {
		a.backends, err = setup.Setup(ctx, mgr, setup.Options{ClusterCache: cc, Webhooks: !o.noWebhooks, CallTimeout: observeTimeout, AtStep: o.atStep,
			SnapshotScratchDir: os.TempDir()})
	}
	if err != nil {
		cancel()
		return nil, err
	}
	go func() { a.done <- mgr.Start(ctx) }()
	track(a)
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return nil, errors.Join(errors.New("failed to sync the etcd-adapter manager's cache"), a.Stop())
	}
	if o.noWebhooks {
		return a, nil
	}
	checker := mgr.GetWebhookServer().StartedChecker()
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return checker(&http.Request{}) == nil, nil
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("the quorum guard webhook server did not start: %w", err), a.Stop())
	}
	return a, nil
}

// started holds every etcd-adapter manager a spec started besides the suite's own (adapter),
// so that one a failed spec left running is stopped before the next spec.
var (
	startedMu sync.Mutex
	started   []*adapterManager
)

func track(a *adapterManager) {
	startedMu.Lock()
	defer startedMu.Unlock()
	started = append(started, a)
}

// restoreAdapter leaves exactly one etcd-adapter running, the suite's own: a spec that stops it
// to crash or replace it and fails before starting it again would otherwise leave every later
// spec without one (the Machine hook webhook fails closed, so no Machine could be created), or
// with a second manager holding the webhook port.
func restoreAdapter() error {
	startedMu.Lock()
	others := started
	started = nil
	startedMu.Unlock()
	var errs []error
	for _, a := range others {
		if a != adapter && a.Running() {
			errs = append(errs, a.Stop())
		}
	}
	if adapter != nil && adapter.Running() {
		track(adapter)
		return errors.Join(errs...)
	}
	var err error
	adapter, err = startAdapter(context.Background(), mgmt, nil)
	return errors.Join(append(errs, err)...)
}

// Running reports whether the manager was not stopped.
func (a *adapterManager) Running() bool {
	select {
	case <-a.stopped:
		return false
	default:
		return true
	}
}

// Stop stops the manager, as a crash would stop it between two calls. It is safe to call twice.
func (a *adapterManager) Stop() error {
	a.once.Do(func() {
		defer close(a.stopped)
		a.cancel()
		select {
		case err := <-a.done:
			a.err = err
		case <-time.After(time.Minute):
			a.err = errors.New("the etcd-adapter manager did not stop within a minute")
		}
	})
	return a.err
}
