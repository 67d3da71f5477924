package controlplaneetcd

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

// connectionLostBuffer is how many wake-ups can wait to be enqueued. Each kubeadm backend sends
// at most one per 5 s (it coalesces its lost connections) and the controller's source moves them
// to the work queue as they come, so this covers a fleet of that many Clusters losing a member
// at the same moment.
const connectionLostBuffer = 1024

// ConnectionLost wakes the controller for a Cluster whose etcd backend lost a member
// connection (backends.Registry.ConnectionLost), so that the member that failed shows in the
// status at once rather than at the next periodic observation. Create it with
// NewConnectionLost, pass Notify to the Registry and the ConnectionLost to the Reconciler.
type ConnectionLost struct {
	events chan event.GenericEvent
}

// NewConnectionLost returns a ConnectionLost with room for connectionLostBuffer Clusters.
func NewConnectionLost() *ConnectionLost {
	return &ConnectionLost{events: make(chan event.GenericEvent, connectionLostBuffer)}
}

// Notify asks for the Cluster's ControlPlaneEtcds to be reconciled. It never blocks: it runs on
// the gRPC goroutine that saw the connection end.
//
// Note: when the buffer is full (or the controller does not run on this replica and nothing
// reads it), the wake-up is dropped. That only delays the status: the periodic observation
// (spec.observationInterval) still finds the failed member.
func (c *ConnectionLost) Notify(cluster client.ObjectKey) {
	e := event.GenericEvent{Object: &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: cluster.Namespace, Name: cluster.Name}}}
	select {
	case c.events <- e:
	default:
	}
}
