package soak

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
	"github.com/etcd-adapter/etcd-adapter/controlplane/reconcilers/creation"
	"github.com/etcd-adapter/etcd-adapter/controlplane/setup"
	"github.com/etcd-adapter/etcd-adapter/controlplane/webhooks/machinehook"
	"github.com/etcd-adapter/etcd-adapter/controlplane/webhooks/quorumguard"
	"github.com/etcd-adapter/etcd-adapter/test/env/capi"
)

// Leader election of the replicas, as short as the e2e suite's, so that a killed leader's Lease
// expires within seconds (a killed leader does not give it up).
const (
	leaseDuration    = 4 * time.Second
	renewDeadline    = 3 * time.Second
	retryPeriod      = 500 * time.Millisecond
	leaderElectionID = "etcd-adapter-soak"
	adapterNamespace = "etcd-adapter-system"
	// callTimeout bounds one observation: kubeadm asks every member through a port-forward.
	callTimeout = 20 * time.Second
)

// replica is one in-process etcd-adapter manager. kill cancels its context, as a SIGKILL ends
// the process: it releases nothing on the way out (leader election has ReleaseOnCancel off), so
// its Lease stays until it expires.
type replica struct {
	name    string
	mgr     ctrl.Manager
	cancel  context.CancelFunc
	done    chan error
	once    sync.Once
	stopErr error
}

// replicaOptions shape a replica.
type replicaOptions struct {
	// webhooksOnly serves the quorum guard and the Machine hook webhook and runs no controller:
	// the webhook server of the Deployment, which the soak never kills, so that the management
	// apiserver always has one to call.
	webhooksOnly bool
}

func (w *world) startReplica(ctx context.Context, name string, o replicaOptions) (*replica, error) {
	opts := capi.ManagerOptions(w.scheme)
	opts.Cache.ByObject[&clusterv1.Machine{}] = setup.MachineCacheOptions()
	if o.webhooksOnly {
		wio := w.mgmt.WebhookInstallOptions()
		opts.WebhookServer = webhook.NewServer(webhook.Options{Host: wio.LocalServingHost, Port: wio.LocalServingPort, CertDir: wio.LocalServingCertDir})
	} else {
		opts.LeaderElection, opts.LeaderElectionID, opts.LeaderElectionNamespace = true, leaderElectionID, adapterNamespace
		opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = ptr.To(leaseDuration), ptr.To(renewDeadline), ptr.To(retryPeriod)
	}
	mgr, err := ctrl.NewManager(w.mgmt.Config, opts)
	if err != nil {
		return nil, fmt.Errorf("failed to create etcd-adapter replica %s: %w", name, err)
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &replica{name: name, mgr: mgr, cancel: cancel, done: make(chan error, 1)}
	cc, err := capi.SetupClusterCache(ctx, mgr)
	if err == nil {
		err = r.setup(ctx, cc, o)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	go func() { r.done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return nil, errors.Join(fmt.Errorf("failed to sync the cache of replica %s", name), r.kill())
	}
	if !o.webhooksOnly {
		return r, nil
	}
	checker := mgr.GetWebhookServer().StartedChecker()
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return checker(&http.Request{}) == nil, nil
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("the webhook server did not start: %w", err), r.kill())
	}
	return r, nil
}

func (r *replica) setup(ctx context.Context, cc clustercache.ClusterCache, o replicaOptions) error {
	mgr := r.mgr
	if o.webhooksOnly {
		reg := &backends.Registry{Client: mgr.GetClient(), RESTMapper: mgr.GetRESTMapper(), ClusterCache: cc}
		return errors.Join(creation.IndexByClusterName(ctx, mgr.GetFieldIndexer()),
			(&quorumguard.Guard{Client: mgr.GetClient(), Backends: reg}).SetupWithManager(mgr),
			(&machinehook.Webhook{Client: mgr.GetAPIReader()}).SetupWithManager(mgr))
	}
	_, err := setup.Setup(ctx, mgr, setup.Options{ClusterCache: cc, CallTimeout: callTimeout})
	return err
}

// elected reports whether the replica holds the leader Lease.
func (r *replica) elected() bool {
	select {
	case <-r.mgr.Elected():
		return true
	default:
		return false
	}
}

// kill stops the replica abruptly; it is safe to call twice.
func (r *replica) kill() error {
	r.once.Do(func() {
		r.cancel()
		select {
		case err := <-r.done:
			r.stopErr = err
		case <-time.After(time.Minute):
			r.stopErr = fmt.Errorf("replica %s did not stop within a minute", r.name)
		}
	})
	return r.stopErr
}
