package capi

import (
	"context"
	"fmt"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/logutil"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/bootstrap/kubeadm/reconcilers/kubeadmconfig"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/pkg/etcd"
	"sigs.k8s.io/cluster-api/controlplane/kubeadm/reconcilers/kubeadmcontrolplane"
	kcpsetup "sigs.k8s.io/cluster-api/controlplane/kubeadm/setup"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

const (
	// kubeadmControllerName is the user agent and informer name of the in-process
	// KubeadmControlPlane and kubeadm bootstrap controllers.
	kubeadmControllerName = "etcd-adapter-test-env-kcp"

	// etcdDialTimeout is KubeadmControlPlane's default --etcd-dial-timeout-duration.
	etcdDialTimeout = 10 * time.Second

	// kcpReconciliationTimeout is what KubeadmControlPlane's main.go gives its controller, because
	// one reconcile may dial every etcd member.
	kcpReconciliationTimeout = 3 * time.Minute
)

// KubeadmManagerOptions returns manager options like KubeadmControlPlane's manager uses (cache
// and client options from controlplane/kubeadm/setup: Unstructured objects cached, only
// control-plane KubeadmConfigs cached), with metrics, probes, webhooks and leader election off
// and informer names unique per call (see ManagerOptions).
//
// Note: the kubeadm bootstrap controller runs in the same manager. Its own manager caches every
// KubeadmConfig; here only control-plane ones are cached, which are all a KubeadmControlPlane
// creates.
func KubeadmManagerOptions(scheme *runtime.Scheme) ctrl.Options {
	informerName := fmt.Sprintf("%s-%d", kubeadmControllerName, managers.Add(1))
	return ctrl.Options{
		Scheme:                 scheme,
		Cache:                  kcpsetup.ManagerCacheOptions(scheme, informerName, "", syncPeriod),
		Client:                 kcpsetup.ManagerClientOptions(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true), UsePriorityQueue: ptr.To(false)},
	}
}

// SetupKubeadm adds to mgr what KubeadmControlPlane's main.go runs (a ClusterCache with KCP's
// cache options and the KubeadmControlPlane controller, without webhooks, the CRD migrator or
// the runtime SDK client) and the kubeadm bootstrap (KubeadmConfig) controller, which the
// Machines KCP creates wait for. mgr should have KubeadmManagerOptions.
func SetupKubeadm(ctx context.Context, mgr ctrl.Manager) (clustercache.ClusterCache, error) {
	secretClient, err := kcpsetup.CreateSecretCachingClient(mgr)
	if err != nil {
		return nil, fmt.Errorf("failed to create KCP's Secret caching client: %w", err)
	}
	cc, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: secretClient,
		Cache:        kcpsetup.ClusterCacheCacheOptions(),
		Client:       kcpsetup.ClusterCacheClientOptions(kubeadmControllerName, 20, 30),
	}, controller.Options{MaxConcurrentReconciles: concurrency})
	if err != nil {
		return nil, fmt.Errorf("failed to set up KCP's ClusterCache: %w", err)
	}
	if err := setupKCP(ctx, mgr, cc, secretClient); err != nil {
		return nil, err
	}
	if err := setupKubeadmConfig(ctx, mgr, cc, secretClient); err != nil {
		return nil, err
	}
	return cc, nil
}

func setupKCP(ctx context.Context, mgr ctrl.Manager, cc clustercache.ClusterCache, secretClient ctrlClient) error {
	etcdLogger, err := logutil.CreateDefaultZapLogger(zapcore.WarnLevel)
	if err != nil {
		return fmt.Errorf("failed to create KCP's etcd logger: %w", err)
	}
	r := &kubeadmcontrolplane.Reconciler{
		Client:                      mgr.GetClient(),
		APIReader:                   mgr.GetAPIReader(),
		SecretCachingClient:         secretClient,
		ClusterCache:                cc,
		EtcdDialTimeout:             etcdDialTimeout,
		EtcdCallTimeout:             etcd.DefaultCallTimeout,
		EtcdLogger:                  etcdLogger,
		RemoteConditionsGracePeriod: remoteConditionsGracePeriod,
	}
	err = r.SetupWithManager(ctx, mgr, controller.Options{
		MaxConcurrentReconciles: concurrency,
		ReconciliationTimeout:   kcpReconciliationTimeout,
	})
	if err != nil {
		return fmt.Errorf("failed to set up the KubeadmControlPlane controller: %w", err)
	}
	return nil
}

func setupKubeadmConfig(ctx context.Context, mgr ctrl.Manager, cc clustercache.ClusterCache, secretClient ctrlClient) error {
	r := &kubeadmconfig.Reconciler{
		Client:              mgr.GetClient(),
		SecretCachingClient: secretClient,
		APIReader:           mgr.GetAPIReader(),
		ClusterCache:        cc,
		TokenTTL:            kubeadmconfig.DefaultTokenTTL,
	}
	if err := r.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: concurrency}); err != nil {
		return fmt.Errorf("failed to set up the KubeadmConfig controller: %w", err)
	}
	return nil
}
