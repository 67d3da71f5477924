package provider

import (
	"slices"
	"time"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Observation is one look at a control plane's etcd: the snapshot, or why there is none, and the
// control-plane Machines it is read against.
type Observation struct {
	// Snapshot is what etcd.Cluster.Observe returned; nil when Err is set.
	Snapshot *etcd.Snapshot
	// Err is Observe's error, if any.
	Err error
	// Machines are the control-plane Machines, deleting ones included.
	Machines []etcd.Machine
	// Now is the time verdicts are for; zero means time.Now().
	Now time.Time
}

func (o Observation) now() time.Time {
	if o.Now.IsZero() {
		return time.Now()
	}
	return o.Now
}

// Health computes the health verdicts of the observation: one member condition per Machine,
// the cluster condition, and the classification of every member.
func (o Observation) Health() etcd.HealthVerdict {
	return etcd.AssessHealth(etcd.HealthInput{Snapshot: o.Snapshot, ObserveErr: o.Err, Machines: o.Machines, Now: o.now()})
}

// Machine returns the Machine with the given name.
func (o Observation) Machine(name string) (etcd.Machine, bool) {
	i := slices.IndexFunc(o.Machines, func(m etcd.Machine) bool { return m.Name == name })
	if i < 0 {
		return etcd.Machine{}, false
	}
	return o.Machines[i], true
}

// machineOnNode names the Machine whose Node is node; "" when none is.
func (o Observation) machineOnNode(node string) string {
	i := slices.IndexFunc(o.Machines, func(m etcd.Machine) bool { return node != "" && m.NodeName == node })
	if i < 0 {
		return ""
	}
	return o.Machines[i].Name
}
