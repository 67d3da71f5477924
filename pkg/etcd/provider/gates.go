package provider

import "github.com/etcd-adapter/etcd-adapter/pkg/etcd"

// MayScaleDown decides whether the Machine may be deleted by a scale-down or a rollout: every
// member it hosts can be removed, one after the other, keeping quorum. Call it right before
// deleting the Machine; a failed observation is never safe.
func MayScaleDown(o Observation, m etcd.Machine) etcd.QuorumVerdict {
	if m.Provisioning() {
		return etcd.CanRemediate(o.Snapshot, o.now(), m)
	}
	return etcd.CanRemoveNode(o.Snapshot, o.now(), m.NodeName)
}

// MayRemediate decides whether a Machine marked by a MachineHealthCheck may be deleted and
// replaced without losing quorum. A Machine without a Node, or whose Node hosts no member, does
// not affect etcd; a broken member counts as unhealthy, so remediating it is usually allowed
// while remediating a healthy Machine next to a broken one is refused.
func MayRemediate(o Observation, m etcd.Machine) etcd.QuorumVerdict {
	return etcd.CanRemediate(o.Snapshot, o.now(), m)
}
