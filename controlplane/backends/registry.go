package backends

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/k3s"
	"github.com/etcd-adapter/etcd-adapter/pkg/kubeadm"
)

// Registry hands out the etcd.Cluster of each CAPI Cluster. It is safe for concurrent use.
type Registry struct {
	// Client reads the management cluster (the etcd CA Secret of kubeadm Clusters).
	Client client.Reader
	// ClusterCache reaches the workload clusters.
	ClusterCache clustercache.ClusterCache
	// DialTimeout bounds one port-forward plus TLS handshake of the kubeadm backend; zero means
	// kubeadm.DefaultDialTimeout.
	DialTimeout time.Duration
	// Watchers are added to a workload cluster's cache next to the backend's own, every time a
	// backend is handed out (the ClusterCache adds each name once per connection).
	Watchers []clustercache.Watcher

	mu      sync.Mutex
	entries map[types.UID]*entry
}

type entry struct {
	backend v1alpha1.Backend
	cluster etcd.Cluster
	// conn identifies the ClusterCache connection a K3s backend was built on: its clients and
	// informer change on reconnect, and the backend must be rebuilt with them.
	conn   client.Client
	closer func() error
}

// For returns the etcd.Cluster of the Cluster, reached with the given backend. Errors from an
// unconnected workload cluster wrap etcd.ErrUnreachable.
func (r *Registry) For(ctx context.Context, cluster *clusterv1.Cluster, backend v1alpha1.Backend) (etcd.Cluster, error) {
	key := client.ObjectKeyFromObject(cluster)
	if err := r.watch(ctx, key, r.Watchers...); err != nil {
		return nil, err
	}
	switch backend {
	case v1alpha1.BackendKubeadm:
		return r.kubeadm(cluster)
	case v1alpha1.BackendK3s, v1alpha1.BackendRKE2:
		return r.k3s(ctx, cluster, backend)
	}
	return nil, fmt.Errorf("%w: unknown backend %q", etcd.ErrInvalidInput, backend)
}

// Forget closes and drops the backend of a Cluster that is gone.
func (r *Registry) Forget(uid types.UID) error {
	r.mu.Lock()
	e := r.entries[uid]
	delete(r.entries, uid)
	r.mu.Unlock()
	if e == nil || e.closer == nil {
		return nil
	}
	return e.closer()
}

func (r *Registry) lookup(uid types.UID, backend v1alpha1.Backend, conn client.Client) (etcd.Cluster, *entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[uid]
	if e != nil && e.backend == backend && e.conn == conn {
		return e.cluster, nil
	}
	return nil, e
}

func (r *Registry) store(uid types.UID, e *entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.entries == nil {
		r.entries = map[types.UID]*entry{}
	}
	r.entries[uid] = e
}

func (r *Registry) kubeadm(cluster *clusterv1.Cluster) (etcd.Cluster, error) {
	if c, old := r.lookup(cluster.UID, v1alpha1.BackendKubeadm, nil); c != nil {
		return c, nil
	} else if old != nil {
		_ = r.Forget(cluster.UID)
	}
	key := client.ObjectKeyFromObject(cluster)
	b, err := kubeadm.New(kubeadm.Config{
		Cluster: key, ClusterUID: cluster.UID, Client: r.Client,
		RESTConfig: kubeadm.FromClusterCache(r.ClusterCache, key), DialTimeout: r.DialTimeout,
	})
	if err != nil {
		return nil, fmt.Errorf("failed to create the kubeadm etcd backend of Cluster %s: %w", key, err)
	}
	r.store(cluster.UID, &entry{backend: v1alpha1.BackendKubeadm, cluster: b, closer: b.Close})
	return b, nil
}

func (r *Registry) k3s(ctx context.Context, cluster *clusterv1.Cluster, backend v1alpha1.Backend) (etcd.Cluster, error) {
	key := client.ObjectKeyFromObject(cluster)
	uncached, err := r.ClusterCache.GetUncachedClient(ctx, key)
	if err != nil {
		return nil, unreachable(key, err)
	}
	if c, old := r.lookup(cluster.UID, backend, uncached); c != nil {
		return c, r.watchBackend(ctx, key, c)
	} else if old != nil {
		_ = r.Forget(cluster.UID)
	}
	reader, err := r.ClusterCache.GetReader(ctx, key)
	if err != nil {
		return nil, unreachable(key, err)
	}
	b, err := k3s.New(k3s.Config{Client: uncached, Reader: reader})
	if err != nil {
		return nil, fmt.Errorf("failed to create the %s etcd backend of Cluster %s: %w", backend, key, err)
	}
	r.store(cluster.UID, &entry{backend: backend, cluster: b, conn: uncached})
	return b, r.watchBackend(ctx, key, b)
}

func (r *Registry) watchBackend(ctx context.Context, key client.ObjectKey, c etcd.Cluster) error {
	b, ok := c.(*k3s.Backend)
	if !ok {
		return nil
	}
	return r.watch(ctx, key, b.Watcher())
}

func (r *Registry) watch(ctx context.Context, key client.ObjectKey, watchers ...clustercache.Watcher) error {
	for _, w := range watchers {
		if err := r.ClusterCache.Watch(ctx, key, w); err != nil {
			return unreachable(key, err)
		}
	}
	return nil
}

func unreachable(key client.ObjectKey, err error) error {
	if errors.Is(err, clustercache.ErrClusterNotConnected) {
		return fmt.Errorf("%w: workload cluster %s is not connected: %w", etcd.ErrUnreachable, key, err)
	}
	return fmt.Errorf("%w: failed to reach workload cluster %s: %w", etcd.ErrUnreachable, key, err)
}
