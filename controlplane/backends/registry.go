package backends

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/external"
	"github.com/etcd-adapter/etcd-adapter/pkg/k3s"
	"github.com/etcd-adapter/etcd-adapter/pkg/kubeadm"
)

// Registry hands out the etcd.Cluster of each CAPI Cluster. It is safe for concurrent use.
type Registry struct {
	// Client reads the management cluster (the etcd CA Secret of kubeadm Clusters, the
	// KubeadmControlPlane and the Secrets of external etcd).
	Client client.Reader
	// RESTMapper maps a Cluster's spec.controlPlaneRef to a version, to read its
	// KubeadmControlPlane for the external backend; nil fails every external backend.
	RESTMapper meta.RESTMapper
	// ClusterCache reaches the workload clusters.
	ClusterCache clustercache.ClusterCache
	// DialTimeout bounds one port-forward plus TLS handshake of the kubeadm backend; zero means
	// kubeadm.DefaultDialTimeout. The external backend bounds each call to a member with
	// external.DefaultCallTimeout (5 s): it asks a member up to three times per observation
	// (TLS probe, member list, Status), and the three stay within the manager's default
	// observation timeout (--etcd-call-timeout, 15 s).
	DialTimeout time.Duration
	// ConnectionLost, when set, is told the Cluster whose kubeadm backend lost a kept member
	// connection without closing it (kubeadm.Config.OnConnectionLost: the member's etcd stopped,
	// its Pod or Node went away), so that its etcd is observed again at once. It is called on
	// gRPC's goroutines and must not block. Nil: nobody is told.
	ConnectionLost func(cluster client.ObjectKey)
	// AllowedNetworks are the only networks the external backend dials
	// (external.Config.AllowedNetworks); empty allows every address.
	AllowedNetworks []netip.Prefix
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
	conn client.Client
	// endpoints are the external etcd endpoints and Machine hosts an external backend was built
	// with: it dials only those, so a changed list needs a new backend.
	endpoints string
	closer    func() error
}

// For returns the etcd.Cluster of the Cluster, reached with the given backend. Errors from an
// unconnected workload cluster wrap etcd.ErrUnreachable.
func (r *Registry) For(ctx context.Context, cluster *clusterv1.Cluster, backend v1alpha1.Backend) (etcd.Cluster, error) {
	if backend == v1alpha1.BackendExternal {
		// Note: the external backend reaches etcd with no workload apiserver in between, so it
		// needs no connection to the workload cluster (and adds no watch to one).
		return r.external(ctx, cluster)
	}
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
	return r.lookupEndpoints(uid, backend, conn, "")
}

func (r *Registry) lookupEndpoints(uid types.UID, backend v1alpha1.Backend, conn client.Client, endpoints string) (etcd.Cluster, *entry) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.entries[uid]
	if e != nil && e.backend == backend && e.conn == conn && e.endpoints == endpoints {
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
	cfg := kubeadm.Config{
		Cluster: key, ClusterUID: cluster.UID, Client: r.Client,
		RESTConfig: kubeadm.FromClusterCache(r.ClusterCache, key), DialTimeout: r.DialTimeout,
	}
	if lost := r.ConnectionLost; lost != nil {
		cfg.OnConnectionLost = func() { lost(key) }
	}
	b, err := kubeadm.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("failed to create the kubeadm etcd backend of Cluster %s: %w", key, err)
	}
	r.store(cluster.UID, &entry{backend: v1alpha1.BackendKubeadm, cluster: b, closer: b.Close})
	return b, nil
}

// external returns the external backend of a Cluster that owns an EtcdadmCluster or whose
// KubeadmControlPlane has clusterConfiguration.etcd.external: it dials only the endpoints listed
// there (externalEndpoints) and, for etcdadm, client URLs on its etcd Machines' addresses, with
// the Secrets pkg/external reads, within AllowedNetworks. They are read on every call, so a
// changed endpoint list takes effect on the next observation (with a new backend). A Cluster with
// neither, or whose EtcdadmCluster has no endpoints yet, is an error wrapping
// etcd.ErrInvalidInput that says so: the endpoints are never guessed.
func (r *Registry) external(ctx context.Context, cluster *clusterv1.Cluster) (etcd.Cluster, error) {
	key := client.ObjectKeyFromObject(cluster)
	if r.RESTMapper == nil {
		return nil, fmt.Errorf("%w: the external etcd backend of Cluster %s needs a RESTMapper to read its control plane", etcd.ErrInvalidInput, key)
	}
	endpoints, hosts, err := r.externalEndpoints(ctx, cluster)
	if err != nil {
		return nil, err
	}
	joined := strings.Join(endpoints, ",") + "|" + strings.Join(hosts, ",")
	if c, old := r.lookupEndpoints(cluster.UID, v1alpha1.BackendExternal, nil, joined); c != nil {
		return c, nil
	} else if old != nil {
		_ = r.Forget(cluster.UID)
	}
	b, err := external.New(external.Config{Cluster: key, Endpoints: endpoints, MachineHosts: hosts, AllowedNetworks: r.AllowedNetworks, Client: r.Client})
	if err != nil {
		return nil, fmt.Errorf("failed to create the external etcd backend of Cluster %s: %w", key, err)
	}
	r.store(cluster.UID, &entry{backend: v1alpha1.BackendExternal, cluster: b, endpoints: joined, closer: b.Close})
	return b, nil
}

// externalEndpoints are the client URLs of the Cluster's external etcd and the hosts of its etcd
// Machines: the status.endpoints of the EtcdadmCluster it owns when it owns one (the etcdadm
// controller keeps them current as it replaces etcd Machines, and a fork's KubeadmControlPlane
// copies them from there) with its etcd Machines' addresses (EtcdadmMachineHosts), else its
// KubeadmControlPlane's clusterConfiguration.etcd.external.endpoints and no hosts.
func (r *Registry) externalEndpoints(ctx context.Context, cluster *clusterv1.Cluster) ([]string, []string, error) {
	key := client.ObjectKeyFromObject(cluster)
	ref := cluster.Spec.ControlPlaneRef
	ec, err := FindEtcdadmCluster(ctx, r.Client, r.RESTMapper, cluster)
	if err != nil {
		return nil, nil, err
	}
	if ec != nil {
		endpoints, err := EtcdadmEndpointsOf(ec)
		if err != nil {
			return nil, nil, err
		}
		hosts, err := EtcdadmMachineHosts(ctx, r.Client, cluster, ec.GetName())
		return endpoints, hosts, err
	}
	if ref.Kind != KubeadmControlPlaneKind {
		return nil, nil, fmt.Errorf("%w: backend %s reads its endpoints from the EtcdadmCluster the Cluster owns or from a KubeadmControlPlane's spec.kubeadmConfigSpec.clusterConfiguration.etcd.external; Cluster %s owns no EtcdadmCluster and its spec.controlPlaneRef is %q %q",
			etcd.ErrInvalidInput, v1alpha1.BackendExternal, key, ref.Kind, ref.Name)
	}
	obj, err := ReadControlPlane(ctx, r.Client, r.RESTMapper, cluster)
	if err != nil {
		return nil, nil, err
	}
	if obj == nil {
		return nil, nil, fmt.Errorf("%w: KubeadmControlPlane %s of Cluster %s does not exist (or its kind is not installed), and the Cluster owns no EtcdadmCluster; the external etcd endpoints are read from one of them",
			etcd.ErrInvalidInput, ref.Name, key)
	}
	kcp, err := KubeadmEtcdOf(obj)
	if err != nil {
		return nil, nil, err
	}
	if !kcp.External {
		return nil, nil, fmt.Errorf("%w: KubeadmControlPlane %s of Cluster %s runs stacked etcd (spec.kubeadmConfigSpec.clusterConfiguration.etcd.external is not set) and the Cluster owns no EtcdadmCluster; use backend %s",
			etcd.ErrInvalidInput, ref.Name, key, v1alpha1.BackendKubeadm)
	}
	return kcp.Endpoints, nil, nil
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
