package controlplaneetcd

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/controlplane/reconcilers/creation"
)

// seenCluster is the Cluster a ControlPlaneEtcd key was last reconciled against.
type seenCluster struct {
	name string
	uid  types.UID
}

// clusterSeen records which Cluster (by UID) the ControlPlaneEtcd key was last reconciled
// against, so the backend of that Cluster can be released once either of them is gone: the
// request for a deleted object carries only its key, and the backends registry is keyed by the
// Cluster's UID.
func (r *Reconciler) clusterSeen(ctx context.Context, key types.NamespacedName, cluster *clusterv1.Cluster) error {
	now := seenCluster{name: cluster.Name, uid: cluster.UID}
	if old, loaded := r.seen.Swap(key, now); loaded && old.(seenCluster).uid != now.uid {
		// The Cluster was deleted and created again under the same name: the old one's
		// connections and informers point at a workload cluster that is gone.
		return r.releaseBackend(ctx, key, old.(seenCluster))
	}
	return nil
}

// forget releases what the backend of the Cluster last seen for the ControlPlaneEtcd key holds
// (kubeadm: its workload client, pooled etcd clients and their janitor, the
// parsed CA key), once the ControlPlaneEtcd or its Cluster is gone. Cluster API's ClusterCache
// disconnects from a deleted Cluster's workload cluster by itself; this covers what
// etcd-adapter started on top of it.
func (r *Reconciler) forget(ctx context.Context, key types.NamespacedName) error {
	r.versions.Delete(key)
	old, loaded := r.seen.LoadAndDelete(key)
	if !loaded {
		return nil
	}
	if err := r.releaseBackend(ctx, key, old.(seenCluster)); err != nil {
		// Looked at again with the error's requeue.
		r.seen.LoadOrStore(key, old)
		return err
	}
	return nil
}

// releaseBackend closes the backend of the Cluster seen, unless a ControlPlaneEtcd is still in charge
// of that same Cluster.
//
// Important! The backend is one per Cluster, shared by the ControlPlaneEtcd in charge and the
// quorum guard. A duplicate ControlPlaneEtcd that is deleted (as its condition asks), or the one
// in charge deleted while a duplicate takes over, must not close it under them: a guard request
// would then fail its observation and let a deletion through as "etcd health unknown".
func (r *Reconciler) releaseBackend(ctx context.Context, key types.NamespacedName, seen seenCluster) error {
	log := ctrl.LoggerFrom(ctx).WithValues("ControlPlaneEtcd", key.String(), "clusterUID", seen.uid)
	inUse, err := r.inChargeOfSameCluster(ctx, key.Namespace, seen)
	if err != nil {
		return fmt.Errorf("failed to find whether the etcd backend of Cluster %s is still in use: %w", seen.name, err)
	}
	if inUse {
		log.V(2).Info("Kept the etcd backend of the Cluster: another ControlPlaneEtcd is in charge of it")
		return nil
	}
	if err := r.Backends.Forget(seen.uid); err != nil {
		// Closing only fails on connections already broken; the entry is dropped either way.
		log.Info("Released the etcd backend of a Cluster that is gone, with errors", "err", err.Error())
		return nil
	}
	log.V(2).Info("Released the etcd backend of a Cluster that is gone")
	return nil
}

// inChargeOfSameCluster says whether the Cluster seen still exists (same UID) and a
// ControlPlaneEtcd is in charge of it.
func (r *Reconciler) inChargeOfSameCluster(ctx context.Context, namespace string, seen seenCluster) (bool, error) {
	cluster := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: seen.name}, cluster); err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	if cluster.UID != seen.uid {
		return false, nil
	}
	inCharge, err := creation.ControlPlaneEtcdOf(ctx, r.Client, cluster)
	return inCharge != nil, err
}
