package quorumguard

import (
	"fmt"
	"slices"
	"time"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// lastObservation is the quorum, as the ControlPlaneEtcd's status last recorded etcd's members,
// once the members of the Machines going stop.
type lastObservation struct {
	// observed is false when the status records no member: etcd-adapter never observed etcd.
	observed bool
	// quorum is etcd.AssessQuorum of the recorded members, those of the Machines going counted
	// unhealthy.
	quorum etcd.QuorumState
	// unhealthy names the members last seen unhealthy, with since when, for messages.
	unhealthy []string
}

// assessLastObservation decides on the status the controller left when etcd cannot be observed
// now. On stacked etcd that is exactly when quorum is lost: kubeadm's port-forward needs the
// workload apiserver, whose storage is that etcd, and K3s's Node list is a quorum read. A pass
// that cannot observe marks every member's health Unknown (says nothing new, so the member
// counts as healthy as last seen) but neither starts nor ends status.machineMembers[].
// unhealthySince, which is the evidence that survives. A member counts unhealthy when its Machine
// is going (failed, not removed: without a hook that removes the member first, as in Observe
// mode, that is what happens), its Machine has unhealthySince, or its recorded health is
// Unhealthy. The member of a going Machine in removedFirst (a hook removes it before the
// infrastructure goes: memberRemover) counts as removed instead, as ProjectChanges counts it when
// etcd is observed.
func assessLastObservation(st v1alpha1.ControlPlaneEtcdStatus, going, removedFirst []string) lastObservation {
	if len(st.Members) == 0 {
		return lastObservation{}
	}
	since := map[string]time.Time{}
	for _, mm := range st.MachineMembers {
		if mm.UnhealthySince != nil {
			since[mm.MachineName] = mm.UnhealthySince.Time
		}
	}
	out := lastObservation{observed: true}
	members := make([]etcd.MemberHealth, 0, len(st.Members))
	for _, ms := range st.Members {
		mh := etcd.MemberHealth{Member: etcd.Member{Name: ms.Name, NodeName: ms.NodeName, IsLearner: ms.Role == v1alpha1.MemberRoleLearner}, Health: etcd.Healthy}
		t, seen := since[ms.MachineName]
		switch {
		case ms.MachineName != "" && seen:
			out.unhealthy = append(out.unhealthy, fmt.Sprintf("%s (unhealthy since %s)", memberName(ms), t.UTC().Format(time.RFC3339)))
			mh.Health = etcd.Unhealthy
		case ms.Health == v1alpha1.MemberUnhealthy:
			out.unhealthy = append(out.unhealthy, fmt.Sprintf("%s (%s)", memberName(ms), ms.Reason))
			mh.Health = etcd.Unhealthy
		}
		if ms.MachineName != "" && slices.Contains(removedFirst, ms.MachineName) {
			continue
		}
		if ms.MachineName != "" && slices.Contains(going, ms.MachineName) {
			mh.Health = etcd.Unhealthy
		}
		members = append(members, mh)
	}
	out.quorum = etcd.AssessQuorum(members)
	return out
}

// memberName names a recorded member: by name, or by ID when it never started.
func memberName(ms v1alpha1.EtcdMemberStatus) string {
	if ms.Name != "" {
		return ms.Name
	}
	return ms.ID + " (never started)"
}
