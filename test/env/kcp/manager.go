package kcp

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcd-adapter/etcd-adapter/test/env/capi"
)

// managerStopTimeout bounds how long stopping a manager may take.
const managerStopTimeout = time.Minute

// runningManager is a started controller-runtime manager.
type runningManager struct {
	ctrl.Manager
	cancel context.CancelFunc
	done   chan error
}

// startCoreManager runs what Cluster API's core manager runs for this environment (the Cluster,
// Machine and MachineHealthCheck controllers) plus the TestMachine and TestCluster provisioners.
func startCoreManager(ctx context.Context, cfg *rest.Config, wc *workloadCluster) (*runningManager, error) {
	mgr, err := ctrl.NewManager(cfg, capi.ManagerOptions(Scheme()))
	if err != nil {
		return nil, fmt.Errorf("failed to create the core manager: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	cc, err := capi.Setup(ctx, mgr)
	if err == nil {
		err = capi.SetupCluster(ctx, mgr, cc)
	}
	if err == nil {
		err = (&provisioner{client: mgr.GetClient(), workload: wc}).setupWithManager(mgr)
	}
	if err == nil {
		err = (&clusterProvisioner{client: mgr.GetClient()}).setupWithManager(mgr)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return start(ctx, cancel, mgr)
}

// startKubeadmManager runs KubeadmControlPlane's and the kubeadm bootstrap provider's
// controllers, in a manager of their own as in a real management cluster.
func startKubeadmManager(ctx context.Context, cfg *rest.Config) (*runningManager, error) {
	mgr, err := ctrl.NewManager(cfg, capi.KubeadmManagerOptions(Scheme()))
	if err != nil {
		return nil, fmt.Errorf("failed to create the kubeadm manager: %w", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	if _, err := capi.SetupKubeadm(ctx, mgr); err != nil {
		cancel()
		return nil, err
	}
	return start(ctx, cancel, mgr)
}

func start(ctx context.Context, cancel context.CancelFunc, mgr ctrl.Manager) (*runningManager, error) {
	m := &runningManager{Manager: mgr, cancel: cancel, done: make(chan error, 1)}
	go func() { m.done <- mgr.Start(ctx) }()
	if !mgr.GetCache().WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("failed to sync a manager's cache: %w", m.stop())
	}
	return m, nil
}

// stop stops the manager and waits for it.
func (m *runningManager) stop() error {
	if m == nil {
		return nil
	}
	m.cancel()
	select {
	case err := <-m.done:
		if err != nil {
			return fmt.Errorf("manager failed: %w", err)
		}
		return nil
	case <-time.After(managerStopTimeout):
		return fmt.Errorf("failed to stop a manager within %s", managerStopTimeout)
	}
}
