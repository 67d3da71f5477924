package provider

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Problem is one finding that makes etcd not healthy enough to scale or roll out.
type Problem struct {
	// Machine is the Machine the finding is about; empty when it is about no Machine (a member
	// no Machine hosts, an alarm, the leader).
	Machine string
	// Member is the member the finding is about; zero when it is about no single member.
	Member etcd.Member
	// Health is the member's health (Unhealthy or Unknown, or Healthy for a learner, which is not
	// a voter yet); empty when the finding is about no single member.
	Health etcd.Health
	// Message says what is wrong.
	Message string
}

// PreflightResult says whether a scale-down, rollout or scale-up may start from the current etcd
// state.
type PreflightResult struct {
	// Healthy is true when etcd was observed and, leaving out the Machines being removed, every
	// member is a healthy voter, every Machine hosts one, no member lacks a Machine, no alarm
	// names a member that stays and a leader is known.
	Healthy bool
	// Problems lists every finding, in the order: members, Machines, cluster.
	Problems []Problem
	// LeftOut names the Machines whose members were not looked at, as the caller asked.
	LeftOut []string
}

// String summarises the result for logs and condition messages.
func (r PreflightResult) String() string {
	if r.Healthy {
		return "etcd is healthy"
	}
	parts := make([]string, 0, len(r.Problems))
	for _, p := range r.Problems {
		parts = append(parts, p.Message)
	}
	return strings.Join(parts, "; ")
}

// Preflight decides whether etcd is healthy enough to scale down, roll out or scale up, leaving
// out the Machines being removed (by name): scaling down or rolling out a Machine whose member is
// broken is how it gets fixed, so its member does not block its own removal. KubeadmControlPlane
// does the same (cluster-api v1.14.2,
// controlplane/kubeadm/reconcilers/kubeadmcontrolplane/preflight.go: preflightChecks and
// checkHealthiness skip the excludeFor Machines, which scale.go's scaleDownControlPlane passes as
// the Machine to delete), and so does cluster-api-k3s (controlplane/controllers/scale.go,
// preflightChecks with excludeFor). Pass no Machine for a scale-up. Whether removing the Machine
// keeps quorum is MayScaleDown's question, not this one's. A failed observation is not healthy.
func Preflight(o Observation, removing ...string) PreflightResult {
	r := PreflightResult{LeftOut: slices.Clone(removing)}
	if o.Snapshot == nil {
		r.Problems = []Problem{{Message: o.Health().Cluster.Message}}
		return r
	}
	v := o.Health()
	leaving := o.membersOf(removing)
	isLeaving := func(m etcd.Member) bool {
		return slices.ContainsFunc(leaving, func(l etcd.Member) bool { return l.ID == m.ID })
	}
	r.Problems = append(r.Problems, o.memberProblems(v.Members, isLeaving)...)
	r.Problems = append(r.Problems, o.machineProblems(v, removing, r.Problems)...)
	r.Problems = append(r.Problems, o.clusterProblems(v.Members, isLeaving)...)
	r.Healthy = len(r.Problems) == 0
	return r
}

// membersOf returns every member of the named Machines: on their Nodes, or theirs by name or
// address (etcd.MembersOfMachine).
func (o Observation) membersOf(names []string) []etcd.Member {
	var out []etcd.Member
	for _, name := range names {
		m, ok := o.Machine(name)
		if !ok {
			continue
		}
		out = append(out, etcd.MembersOfMachine(o.Snapshot.Members, o.Machines, m)...)
	}
	return out
}

func (o Observation) memberProblems(members []etcd.MemberHealth, leaving func(etcd.Member) bool) []Problem {
	var out []Problem
	for _, mh := range members {
		if leaving(mh.Member) {
			continue
		}
		msg := mh.Message
		switch {
		case mh.Health != etcd.Healthy:
		case mh.Member.IsLearner:
			msg = fmt.Sprintf("etcd member %s is a learner, waiting to be promoted", mh.Member)
		case len(mh.Problems) > 0:
			msg = strings.Join(mh.Problems, "; ")
		default:
			continue
		}
		out = append(out, Problem{Machine: o.machineOnNode(mh.Member.NodeName), Member: mh.Member, Health: mh.Health, Message: msg})
	}
	return out
}

// machineProblems are the Machines that stay, are not deleting and whose member condition is not
// True, unless a member finding already names them: a Machine without a Node yet (as KCP's
// preflight, which refuses while a Machine has no nodeRef), or whose Node hosts no member.
func (o Observation) machineProblems(v etcd.HealthVerdict, removing []string, found []Problem) []Problem {
	var out []Problem
	for _, m := range o.Machines {
		c, ok := v.Machines[m.Name]
		switch {
		case !ok || m.Deleting || slices.Contains(removing, m.Name) || c.Status == metav1.ConditionTrue:
			continue
		case slices.ContainsFunc(found, func(p Problem) bool { return p.Machine == m.Name }):
			continue
		}
		out = append(out, Problem{Machine: m.Name, Message: fmt.Sprintf("Machine %s: %s", m.Name, c.Message)})
	}
	return out
}

// clusterProblems are the findings about no single staying Machine: members no Machine hosts,
// active alarms, and a missing leader. A CORRUPT alarm raised by a member being removed is left
// out (removing the corrupt member is the fix); every other alarm counts, since etcd's alarms are
// cluster-wide and removing the member that raised NOSPACE frees no space.
func (o Observation) clusterProblems(members []etcd.MemberHealth, leaving func(etcd.Member) bool) []Problem {
	s := o.Snapshot
	var out []Problem
	provisioning := slices.ContainsFunc(o.Machines, etcd.Machine.Provisioning)
	for _, mh := range members {
		if !leaving(mh.Member) && mh.Member.Started() && !provisioning && o.machineOnNode(mh.Member.NodeName) == "" {
			out = append(out, Problem{Member: mh.Member, Health: mh.Health, Message: fmt.Sprintf("etcd member %s has no corresponding Machine", mh.Member)})
		}
	}
	for _, al := range s.Alarms {
		if m, ok := s.MemberByID(al.MemberID); ok && leaving(m) && al.Alarm == etcd.AlarmCorrupt {
			continue
		}
		out = append(out, Problem{Message: fmt.Sprintf("etcd alarm %s is active, raised by member %s", al.Alarm, alarmMember(s, al.MemberID))})
	}
	if s.LeaderID == 0 && !s.Blind(etcd.BlindSpotLeader) && len(s.Members) > 0 {
		out = append(out, Problem{Message: "etcd has no leader"})
	}
	return out
}

func alarmMember(s *etcd.Snapshot, id uint64) string {
	if m, ok := s.MemberByID(id); ok {
		return m.String()
	}
	return fmt.Sprintf("%x, which is no longer a member", id)
}
