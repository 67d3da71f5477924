package soak

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/etcd-adapter/etcd-adapter/controlplane/backends"
	"github.com/etcd-adapter/etcd-adapter/controlplane/reconcilers/creation"
	"github.com/etcd-adapter/etcd-adapter/controlplane/setup"
	"github.com/etcd-adapter/etcd-adapter/controlplane/webhooks/machinehook"
	"github.com/etcd-adapter/etcd-adapter/controlplane/webhooks/quorumguard"
	"github.com/etcd-adapter/etcd-adapter/test/env/capi"
	"github.com/etcd-adapter/etcd-adapter/test/env/managerproc"
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

// replica is an in-process etcd-adapter manager: the webhook server, which the soak never kills.
// The controller replicas are processes of the manager binary (controllerReplica).
type replica struct {
	name    string
	mgr     ctrl.Manager
	cancel  context.CancelFunc
	done    chan error
	once    sync.Once
	stopErr error
}

// startWebhooks starts the in-process webhook server: the quorum guard and the Machine hook
// webhook on the management apiserver's webhook address, and no controller.
func (w *world) startWebhooks(ctx context.Context) (*replica, error) {
	const name = "webhooks"
	opts := capi.ManagerOptions(w.scheme)
	opts.Cache.ByObject[&clusterv1.Machine{}] = setup.MachineCacheOptions()
	wio := w.mgmt.WebhookInstallOptions()
	opts.WebhookServer = webhook.NewServer(webhook.Options{Host: wio.LocalServingHost, Port: wio.LocalServingPort, CertDir: wio.LocalServingCertDir})
	mgr, err := ctrl.NewManager(w.mgmt.Config, opts)
	if err != nil {
		return nil, fmt.Errorf("failed to create the etcd-adapter webhook server: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &replica{name: name, mgr: mgr, cancel: cancel, done: make(chan error, 1)}
	cc, err := capi.SetupClusterCache(ctx, mgr)
	if err == nil {
		reg := &backends.Registry{Client: mgr.GetClient(), RESTMapper: mgr.GetRESTMapper(), ClusterCache: cc}
		err = errors.Join(creation.IndexByClusterName(ctx, mgr.GetFieldIndexer()),
			(&quorumguard.Guard{Client: mgr.GetClient(), Backends: reg}).SetupWithManager(mgr),
			(&machinehook.Webhook{Client: mgr.GetAPIReader()}).SetupWithManager(mgr))
	}
	if err != nil {
		cancel()
		return nil, err
	}
	go func() { r.done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return nil, errors.Join(errors.New("failed to sync the cache of the webhook server"), r.kill())
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

// controllerReplica is the manager binary as its own process with webhooks off and leader
// election on, as a replica of the Deployment runs; the soak ends it with SIGKILL, which releases
// nothing: its Lease stays until it expires.
type controllerReplica struct {
	name string
	proc *managerproc.Process
}

func (w *world) startControllerReplica(ctx context.Context, name string) (*controllerReplica, error) {
	p, err := w.bin.Start(ctx, managerproc.Options{Log: filepath.Join(w.logDir, name+".log"), Args: []string{
		"--leader-elect=true", "--leader-elect-id=" + leaderElectionID, "--leader-elect-namespace=" + adapterNamespace,
		"--leader-elect-lease-duration=" + leaseDuration.String(), "--leader-elect-renew-deadline=" + renewDeadline.String(),
		"--leader-elect-retry-period=" + retryPeriod.String(), "--etcd-call-timeout=" + callTimeout.String(), "-v=2"}})
	if err != nil {
		return nil, fmt.Errorf("failed to start etcd-adapter replica %s: %w", name, err)
	}
	return &controllerReplica{name: name, proc: p}, nil
}

func (r *controllerReplica) elected() bool { return r.proc.Elected(leaderElectionID) }

func (r *controllerReplica) kill() error { return r.proc.Kill() }
