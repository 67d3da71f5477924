package manager

import (
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync/atomic"

	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/controllers/clustercache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// maxNamedClusters is how many untried Clusters a readiness failure names; the rest are counted.
const maxNamedClusters = 5

// clusterConnection is what readiness needs to know of one Cluster the manager serves.
type clusterConnection struct {
	Cluster client.ObjectKey
	// InfrastructureProvisioned is the Cluster's status.initialization.infrastructureProvisioned:
	// the ClusterCache does not try to connect before it is true.
	InfrastructureProvisioned bool
	// Tried says the ClusterCache connected to the workload cluster, or failed to, at least once.
	Tried bool
}

// connectionsTried decides readiness from the served Clusters: ready once the ClusterCache tried
// to connect to every Cluster it would connect to. A failed attempt counts: the quorum guard then
// answers as the leader does for an unreachable Cluster, and a replica must not stay unready
// because one workload cluster is down, or a rolling update would never finish.
func connectionsTried(clusters []clusterConnection) error {
	var untried []string
	for _, c := range clusters {
		if c.InfrastructureProvisioned && !c.Tried {
			untried = append(untried, c.Cluster.String())
		}
	}
	if len(untried) == 0 {
		return nil
	}
	sort.Strings(untried)
	named := untried
	if len(named) > maxNamedClusters {
		named = named[:maxNamedClusters]
	}
	more := ""
	if n := len(untried) - len(named); n > 0 {
		more = fmt.Sprintf(" and %d more", n)
	}
	return fmt.Errorf("workload cluster connections not tried yet (%d of %d Clusters): %s%s",
		len(untried), len(clusters), strings.Join(named, ", "), more)
}

// clusterConnections is the readiness check of the workload cluster connections. A replica that
// is Ready serves the quorum guard; until its ClusterCache tried every Cluster, the guard there
// would let a deletion through with "health unknown" that the leader refuses. The check passes
// for good once it passed: a Cluster created later is connected to at once, on every replica.
type clusterConnections struct {
	synced       *cacheSynced
	reader       client.Reader
	clusterCache clustercache.ClusterCache
	ready        atomic.Bool
}

// Check is the readiness checker.
func (c *clusterConnections) Check(req *http.Request) error {
	if c.ready.Load() {
		return nil
	}
	if err := c.synced.Check(req); err != nil {
		return err
	}
	list := &clusterv1.ClusterList{}
	if err := c.reader.List(req.Context(), list); err != nil {
		return fmt.Errorf("failed to list Clusters: %w", err)
	}
	clusters := make([]clusterConnection, 0, len(list.Items))
	for i := range list.Items {
		key := client.ObjectKeyFromObject(&list.Items[i])
		clusters = append(clusters, clusterConnection{
			Cluster:                   key,
			InfrastructureProvisioned: ptr.Deref(list.Items[i].Status.Initialization.InfrastructureProvisioned, false),
			// Note: the ClusterCache sets LastProbeTime on its first connection attempt, whether it
			// connected or failed (controllers/clustercache/cluster_accessor.go, Connect).
			Tried: !c.clusterCache.GetHealthCheckingState(req.Context(), key).LastProbeTime.IsZero(),
		})
	}
	if err := connectionsTried(clusters); err != nil {
		return err
	}
	c.ready.Store(true)
	return nil
}
