package capi

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/cluster-api/core/reconcilers/cluster"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
)

// remoteConnectionGracePeriod is Cluster API's default --remote-connection-grace-period.
const remoteConnectionGracePeriod = 50 * time.Second

// ctrlClient is the client type the reconcilers take.
type ctrlClient = client.Client

// SetupCluster adds Cluster API's Cluster controller to mgr, as core/main.go wires it. A
// control plane provider needs it: it marks a Cluster without an infrastructure reference
// provisioned and copies the control plane's initialization (KubeadmControlPlane's
// status.initialization.controlPlaneInitialized) to the Cluster, which the kubeadm bootstrap
// controller waits for before it renders `kubeadm join` data.
func SetupCluster(ctx context.Context, mgr ctrl.Manager, cc clustercache.ClusterCache) error {
	r := &cluster.Reconciler{
		Client:                      mgr.GetClient(),
		APIReader:                   mgr.GetAPIReader(),
		ClusterCache:                cc,
		RemoteConnectionGracePeriod: remoteConnectionGracePeriod,
	}
	if err := r.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: concurrency}); err != nil {
		return fmt.Errorf("failed to set up the Cluster controller: %w", err)
	}
	return nil
}
