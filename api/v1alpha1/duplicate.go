package v1alpha1

// One ControlPlaneEtcd per Cluster: when several name the same Cluster in spec.clusterName, the
// oldest (creation timestamp, then name) is in charge and every other one is a duplicate that
// observes nothing, holds no Machine and removes nothing, so one Cluster never has two removal
// flows.
const (
	// DuplicateReason is the reason of a duplicate ControlPlaneEtcd's Available, Degraded,
	// Progressing and EtcdClusterHealthy conditions; the message names the one in charge.
	DuplicateReason = "DuplicateControlPlaneEtcd"

	// EventDuplicate is recorded on a duplicate ControlPlaneEtcd when it is first found to be
	// one (Warning).
	EventDuplicate = "DuplicateControlPlaneEtcd"
)
