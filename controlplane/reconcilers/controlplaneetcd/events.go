package controlplaneetcd

import (
	"fmt"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
)

// event records one step of a Machine's removal flow on the Machine and, naming the Machine, on
// the ControlPlaneEtcd: a person looking at either (`kubectl describe`, or `kubectl events
// --for`) sees the whole flow, also after the Machine is gone.
func (r *Reconciler) event(s *scope, m *clusterv1.Machine, eventType, reason, msg string) {
	r.Recorder.Event(m, eventType, reason, msg)
	r.Recorder.Event(s.cpe, eventType, reason, fmt.Sprintf("Machine %s: %s", m.Name, msg))
}
