package v1alpha1

// One ControlPlaneEtcd per Cluster: when several name the same Cluster in spec.clusterName, the
// oldest (creation timestamp, then name) is in charge and every other one is a duplicate that
// observes nothing, holds no Machine and removes nothing, so one Cluster never has two removal
// flows.
const (
	// ClusterNameField is the cache index of ControlPlaneEtcds by spec.clusterName. A controller
	// that looks up the one in charge of a Cluster reads the Cluster's few ControlPlaneEtcds
	// through it, not every ControlPlaneEtcd of the namespace: with 1,000 Clusters in one
	// namespace, a namespace list per pass copied about 14 MB per worker.
	ClusterNameField = "spec.clusterName"

	// DuplicateReason is the reason of a duplicate ControlPlaneEtcd's Available, Degraded,
	// Progressing and EtcdClusterHealthy conditions; the message names the one in charge.
	DuplicateReason = "DuplicateControlPlaneEtcd"

	// EventDuplicate is recorded on a duplicate ControlPlaneEtcd when it is first found to be
	// one (Warning).
	EventDuplicate = "DuplicateControlPlaneEtcd"
)
