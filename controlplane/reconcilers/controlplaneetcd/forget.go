package controlplaneetcd

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
)

// clusterSeen records which Cluster (by UID) the ControlPlaneEtcd key was last reconciled
// against, so the backend of that Cluster can be released once either of them is gone: the
// request for a deleted object carries only its key, and the backends registry is keyed by the
// Cluster's UID.
func (r *Reconciler) clusterSeen(ctx context.Context, key types.NamespacedName, uid types.UID) {
	if old, loaded := r.seen.Swap(key, uid); loaded && old.(types.UID) != uid {
		// The Cluster was deleted and created again under the same name: the old one's
		// connections and informers point at a workload cluster that is gone.
		r.forgetUID(ctx, key, old.(types.UID))
	}
}

// forget releases what the backend of the Cluster last seen for the ControlPlaneEtcd key holds
// (kubeadm: its workload client, pooled etcd clients and their janitor, the
// parsed CA key), once the ControlPlaneEtcd or its Cluster is gone. Cluster API's ClusterCache
// disconnects from a deleted Cluster's workload cluster by itself; this covers what
// etcd-adapter started on top of it.
func (r *Reconciler) forget(ctx context.Context, key types.NamespacedName) {
	r.versions.Delete(key)
	if uid, loaded := r.seen.LoadAndDelete(key); loaded {
		r.forgetUID(ctx, key, uid.(types.UID))
	}
}

func (r *Reconciler) forgetUID(ctx context.Context, key types.NamespacedName, uid types.UID) {
	log := ctrl.LoggerFrom(ctx).WithValues("ControlPlaneEtcd", key.String(), "clusterUID", uid)
	if err := r.Backends.Forget(uid); err != nil {
		// Closing only fails on connections already broken; the entry is dropped either way.
		log.Info("Released the etcd backend of a Cluster that is gone, with errors", "err", err.Error())
		return
	}
	log.V(2).Info("Released the etcd backend of a Cluster that is gone")
}
