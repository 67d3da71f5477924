package kubeadm

import (
	"fmt"
	"slices"
	"time"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/internal/membership"
	"github.com/etcd-adapter/etcd-adapter/pkg/kubeadm/internal/portforward"
)

// snapshot builds the Snapshot from the decision, its members placed on Nodes, and the answers
// (by Node).
//
// Evidence is filed under the ID the answering member reports about itself (Status header
// MemberId), never under a name: with a reused hostname two members carry one name, and only
// one of them is the member the Node's etcd Pod reaches. The other gets evidence that it does
// not run there. An answer from another cluster (split brain) is filed under the members the
// decided member list places on that Node, and says so, so it counts against them.
func snapshot(v membership.Decision, members []etcd.Member, answers []membership.Answer, now time.Time) *etcd.Snapshot {
	s := &etcd.Snapshot{Backend: BackendName, ObservedAt: now, Members: members, LeaderID: v.LeaderID, Alarms: slices.Clone(v.Alarms)}
	for _, a := range answers {
		s.Evidence = append(s.Evidence, evidenceOnNode(v, members, a)...)
	}
	for _, m := range members {
		if m.NodeName != "" && !slices.ContainsFunc(answers, func(a membership.Answer) bool { return a.Where == m.NodeName }) {
			s.Evidence = append(s.Evidence, etcd.MemberEvidence{
				MemberID: m.ID, NodeName: m.NodeName, ObservedAt: now, Contact: etcd.ContactUnknown,
				Error: fmt.Sprintf("Node %s runs no etcd Pod %s, so etcd member %s cannot be asked", m.NodeName, portforward.PodRef(m.NodeName), m),
			})
		}
	}
	return s
}

// sameCluster reports whether a answered with the decision's cluster ID; a removed member that has
// not applied its removal does too, and is filed under its own ID.
func sameCluster(v membership.Decision, a membership.Answer) bool {
	return a.Answered() && a.ClusterID != 0 && a.ClusterID == v.ClusterID
}

// evidenceOnNode is the evidence the answer on one Node gives.
func evidenceOnNode(v membership.Decision, members []etcd.Member, a membership.Answer) []etcd.MemberEvidence {
	on := membersOn(members, a.Where)
	var out []etcd.MemberEvidence
	switch {
	case !a.Answered():
		for _, m := range on {
			out = append(out, evidence(v, a, m.ID))
		}
	case sameCluster(v, a) && hasMember(members, a.SelfID):
		out = append(out, evidence(v, a, a.SelfID))
		for _, m := range on {
			if m.ID != a.SelfID {
				out = append(out, notRunningThere(a, m))
			}
		}
	case len(on) == 0:
		// An etcd Pod on a Node that hosts no member of this cluster: kept, so its answer is seen.
		out = append(out, evidence(v, a, a.SelfID))
	default:
		for _, m := range on {
			out = append(out, evidence(v, a, m.ID))
		}
	}
	return out
}

// evidence records what the member on a.Where said, or why it did not, filed under id.
func evidence(v membership.Decision, a membership.Answer, id uint64) etcd.MemberEvidence {
	ev := etcd.MemberEvidence{MemberID: id, NodeName: a.Where, ObservedAt: a.At}
	alarms := a.Alarms
	if !a.Answered() || sameCluster(v, a) {
		// Alarms are cluster-wide: the member an alarm names has it, whoever reported it.
		alarms = v.Alarms
	}
	for _, al := range alarms {
		if al.MemberID == id {
			ev.Alarms = append(ev.Alarms, al.Alarm)
		}
	}
	if !a.Answered() {
		ev.Contact, ev.Error = etcd.ContactUnreachable, a.Err.Error()
		return ev
	}
	ev.Contact = etcd.ContactAnswered
	ev.ClusterID, ev.Members, ev.LeaderID, ev.Errors = a.ClusterID, a.Members, a.LeaderID, a.Errors
	if v.ClusterID != 0 && a.ClusterID != v.ClusterID {
		ev.Errors = append(ev.Errors, fmt.Sprintf("etcd on Node %s answers as member %x of cluster %x, not of this cluster %x (split brain: a member that bootstrapped a cluster of its own)",
			a.Where, a.SelfID, a.ClusterID, v.ClusterID))
	} else if id != a.SelfID {
		ev.Errors = append(ev.Errors, fmt.Sprintf("etcd on Node %s answers as member %x, which is not in the member list", a.Where, a.SelfID))
	} else {
		// Only the member's own answer speaks for its database and raft log.
		ev.Status = a.Status
	}
	return ev
}

// notRunningThere is the evidence about m, which the decided member list places on a.node
// while the etcd Pod there answers as another member: a reused hostname whose old member was
// never removed.
func notRunningThere(a membership.Answer, m etcd.Member) etcd.MemberEvidence {
	return etcd.MemberEvidence{
		MemberID: m.ID, NodeName: a.Where, ObservedAt: a.At, Contact: etcd.ContactUnreachable,
		Error: fmt.Sprintf("etcd on Node %s answers as member %x; member %x (peer URLs %v) carries the same name and does not run there",
			a.Where, a.SelfID, m.ID, m.PeerURLs),
	}
}

func membersOn(members []etcd.Member, node string) []etcd.Member {
	var out []etcd.Member
	for _, m := range members {
		if node != "" && m.NodeName == node {
			out = append(out, m)
		}
	}
	return out
}

func hasMember(members []etcd.Member, id uint64) bool {
	for _, m := range members {
		if m.ID == id {
			return true
		}
	}
	return false
}
