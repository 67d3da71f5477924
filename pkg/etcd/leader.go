package etcd

import (
	"cmp"
	"slices"
)

// LeaderCandidates orders the members that may take leadership from the leaving member, best
// first: a healthy member first, then a Machine whose health checks pass, then
// an up-to-date Machine, then the newest Machine (it will be the last to be rolled out). Learners,
// never-started members, members of deleting Machines and the leaving member are not candidates:
// etcd cannot move leadership to a learner, and moving it to a Machine on its way out only
// causes another move. A caller tries them in order until one succeeds.
func LeaderCandidates(members []MemberHealth, machines []Machine, leaving Member) []Member {
	type candidate struct {
		member  Member
		healthy bool
		machine Machine
	}
	var cs []candidate
	for _, mh := range members {
		m := mh.Member
		if m.IsLearner || !m.Started() || m.NodeName == "" || m.ID == leaving.ID || m.NodeName == leaving.NodeName {
			continue
		}
		machine, ok := machineOnNode(machines, m.NodeName)
		if !ok || machine.Deleting {
			continue
		}
		cs = append(cs, candidate{member: m, healthy: mh.Health == Healthy, machine: machine})
	}
	slices.SortFunc(cs, func(a, b candidate) int {
		return cmp.Or(
			preferTrue(a.healthy, b.healthy),
			preferTrue(a.machine.HealthCheckSucceeded, b.machine.HealthCheckSucceeded),
			preferTrue(a.machine.UpToDate, b.machine.UpToDate),
			b.machine.Created.Compare(a.machine.Created),
			cmp.Compare(a.member.NodeName, b.member.NodeName),
			cmp.Compare(a.member.ID, b.member.ID),
		)
	})
	out := make([]Member, 0, len(cs))
	for _, c := range cs {
		out = append(out, c.member)
	}
	return out
}

func preferTrue(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

func machineOnNode(machines []Machine, nodeName string) (Machine, bool) {
	for _, m := range machines {
		if m.NodeName == nodeName {
			return m, true
		}
	}
	return Machine{}, false
}
