package v1alpha1

// When etcd-adapter stops managing a Cluster's Machines (its ControlPlaneEtcd leaves Manage mode,
// or the Cluster has no ControlPlaneEtcd in charge any more and gets none by default), it hands
// the Machines back: a removal already asked for is finished first, then every etcd-adapter hook
// is taken off, so no Machine waits for a controller that no longer acts on it.
const (
	// EventHookHandedBack is recorded on a Machine (and its ControlPlaneEtcd, when there is one)
	// whose etcd-adapter hook was taken off because etcd-adapter no longer manages the Cluster.
	// On a deleting Machine it is a Warning: its member was not removed by etcd-adapter, and the
	// message names it and who removes it now.
	EventHookHandedBack = "HookHandedBack"

	// EventHookHandedBackOptedOut is recorded instead, as a Warning on the Machine and on its
	// Cluster, when the Cluster's OptOutAnnotation is what made etcd-adapter stop managing it: a
	// person switched the hook and the quorum guard off for that Cluster. The message names the
	// annotation and the field manager that set it.
	EventHookHandedBackOptedOut = "HookHandedBackOptedOut"
)
