package capi

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/core/reconcilers/machine"
	"sigs.k8s.io/cluster-api/core/reconcilers/machinehealthcheck"
	"sigs.k8s.io/cluster-api/core/setup"
	"sigs.k8s.io/cluster-api/util/index"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

const (
	// controllerName is the user agent and informer name of the in-process controllers.
	controllerName = "etcd-adapter-test-env-capi"

	// syncPeriod is the manager's resync period; Cluster API's default.
	syncPeriod = 10 * time.Minute

	// remoteConditionsGracePeriod is how long the Machine controller tolerates an unreachable
	// workload cluster before it marks Node conditions Unknown; Cluster API's default (the
	// controller refuses anything below 2m).
	remoteConditionsGracePeriod = 5 * time.Minute

	// concurrency is the number of workers of each controller; tests have few objects.
	concurrency = 5
)

// managers counts the managers created in this process; see ManagerOptions.
var managers atomic.Int64

// ManagerOptions returns manager options like Cluster API's core manager uses (cache and client
// options from core/setup), with metrics, health probes, webhooks and leader election off.
//
// Note: the controllers use client-go's rate-limited queue instead of controller-runtime's
// priority queue, which in v0.24.1 can hang a manager's stop (kubernetes-sigs/controller-runtime
// #3538), as etcd-adapter's own manager does; a test stops and restarts managers many times.
//
// Note: controller-name validation is skipped, and each call names its informers uniquely
// (client-go refuses a second informer name in one process), so that several management clusters
// can run in one test binary, one after the other or at the same time.
func ManagerOptions(scheme *runtime.Scheme) ctrl.Options {
	informerName := fmt.Sprintf("%s-%d", controllerName, managers.Add(1))
	return ctrl.Options{
		Scheme:                 scheme,
		Cache:                  setup.ManagerCacheOptions(scheme, informerName, "", syncPeriod),
		Client:                 setup.ManagerClientOptions(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Controller:             config.Controller{SkipNameValidation: ptr.To(true), UsePriorityQueue: ptr.To(false)},
	}
}

// Setup adds Cluster API's indexes, the ClusterCache, the Machine controller and the
// MachineHealthCheck controller to mgr, as Cluster API's core/main.go does. The returned
// ClusterCache gives clients for workload clusters once their Cluster is registered.
func Setup(ctx context.Context, mgr ctrl.Manager) (clustercache.ClusterCache, error) {
	if err := index.AddDefaultIndexes(ctx, mgr); err != nil {
		return nil, fmt.Errorf("failed to add Cluster API indexes: %w", err)
	}
	cc, err := setupClusterCache(ctx, mgr)
	if err != nil {
		return nil, err
	}
	opts := controller.Options{MaxConcurrentReconciles: concurrency}
	if err := setupMachine(ctx, mgr, cc, opts); err != nil {
		return nil, err
	}
	if err := setupMachineHealthCheck(ctx, mgr, cc, opts); err != nil {
		return nil, err
	}
	return cc, nil
}

// SetupClusterCache adds a ClusterCache to mgr alone, configured as Setup configures its own
// except that it reads kubeconfig Secrets uncached (mgr.GetAPIReader()), as the etcd-adapter
// manager does: for the etcd-adapter manager of a test (or another provider's controllers)
// beside Cluster API's in the same management cluster. The etcd-adapter role grants get on
// secrets, not list or watch.
func SetupClusterCache(ctx context.Context, mgr ctrl.Manager) (clustercache.ClusterCache, error) {
	return setupClusterCacheWith(ctx, mgr, mgr.GetAPIReader())
}

func setupClusterCache(ctx context.Context, mgr ctrl.Manager) (clustercache.ClusterCache, error) {
	secretClient, err := setup.CreateSecretCachingClient(mgr)
	if err != nil {
		return nil, fmt.Errorf("failed to create the Secret caching client: %w", err)
	}
	return setupClusterCacheWith(ctx, mgr, secretClient)
}

func setupClusterCacheWith(ctx context.Context, mgr ctrl.Manager, secretClient client.Reader) (clustercache.ClusterCache, error) {
	cc, err := clustercache.SetupWithManager(ctx, mgr, clustercache.Options{
		SecretClient: secretClient,
		Cache:        setup.ClusterCacheCacheOptions(),
		Client:       setup.ClusterCacheClientOptions(controllerName, 20, 30),
	}, controller.Options{MaxConcurrentReconciles: concurrency})
	if err != nil {
		return nil, fmt.Errorf("failed to set up the ClusterCache: %w", err)
	}
	return cc, nil
}

func setupMachine(ctx context.Context, mgr ctrl.Manager, cc clustercache.ClusterCache, opts controller.Options) error {
	r := &machine.Reconciler{
		Client:                      mgr.GetClient(),
		APIReader:                   mgr.GetAPIReader(),
		ClusterCache:                cc,
		RemoteConditionsGracePeriod: remoteConditionsGracePeriod,
	}
	if err := r.SetupWithManager(ctx, mgr, opts); err != nil {
		return fmt.Errorf("failed to set up the Machine controller: %w", err)
	}
	return nil
}

func setupMachineHealthCheck(ctx context.Context, mgr ctrl.Manager, cc clustercache.ClusterCache, opts controller.Options) error {
	r := &machinehealthcheck.Reconciler{
		Client:       mgr.GetClient(),
		ClusterCache: cc,
	}
	if err := r.SetupWithManager(ctx, mgr, opts); err != nil {
		return fmt.Errorf("failed to set up the MachineHealthCheck controller: %w", err)
	}
	return nil
}
