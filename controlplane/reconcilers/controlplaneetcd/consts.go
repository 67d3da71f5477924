package controlplaneetcd

import "time"

const (
	// controllerName names the controller, its events and its ClusterCache watches.
	controllerName = "controlplaneetcd"

	// DefaultCallTimeout bounds one observation of a workload cluster's etcd, so one slow or dead
	// workload cluster holds a worker for at most this long.
	DefaultCallTimeout = 10 * time.Second

	// removalPollInterval re-checks a removal that is in progress. K3s removals are also woken
	// by the Node watch; kubeadm removals finish within a pass or two.
	removalPollInterval = 2 * time.Second

	// blockedRecheckInterval re-checks a deleting Machine whose member removal is not safe yet.
	// Health changes of K3s members arrive as Node events sooner.
	blockedRecheckInterval = 5 * time.Second

	// confirmRequeueAfter comes back at once for the next step of a removal (after a leadership
	// move, a snapshot, a removal), on a fresh observation.
	confirmRequeueAfter = 100 * time.Millisecond

	// unreachableRetryInterval re-observes a workload cluster that could not be reached, for
	// status only; it is bounded by the observation interval.
	unreachableRetryInterval = 10 * time.Second
)
