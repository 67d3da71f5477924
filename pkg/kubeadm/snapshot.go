package kubeadm

import (
	"fmt"
	"time"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// snapshot builds the Snapshot from the view, its members placed on Nodes, and the answers.
//
// Evidence is filed under the ID the answering member reports about itself (Status header
// MemberId), never under a name: with a reused hostname two members carry one name, and only
// one of them is the member the Node's etcd Pod reaches. The other gets evidence that it does
// not run there. An answer from another cluster (split brain) is filed under the members the
// view places on that Node, and says so, so it counts against them.
func (v view) snapshot(members []etcd.Member, answers map[string]answer, now time.Time) *etcd.Snapshot {
	s := &etcd.Snapshot{Backend: BackendName, ObservedAt: now, Members: members, LeaderID: v.leaderID}
	for _, al := range v.alarms {
		s.Alarms = append(s.Alarms, etcd.ActiveAlarm{MemberID: al.memberID, Alarm: al.alarm})
	}
	for _, node := range sortedNodes(answers) {
		s.Evidence = append(s.Evidence, v.evidenceOnNode(members, answers[node])...)
	}
	for _, m := range members {
		if _, asked := answers[m.NodeName]; m.NodeName != "" && !asked {
			s.Evidence = append(s.Evidence, etcd.MemberEvidence{
				MemberID: m.ID, NodeName: m.NodeName, ObservedAt: now, Contact: etcd.ContactUnknown,
				Error: fmt.Sprintf("Node %s runs no etcd Pod %s, so etcd member %s cannot be asked", m.NodeName, podRef(m.NodeName), m),
			})
		}
	}
	return s
}

// evidenceOnNode is the evidence the answer on one Node gives.
func (v view) evidenceOnNode(members []etcd.Member, a answer) []etcd.MemberEvidence {
	on := membersOn(members, a.node)
	var out []etcd.MemberEvidence
	switch {
	case !a.answered():
		for _, m := range on {
			out = append(out, v.evidence(a, m.ID))
		}
	case v.ofCluster(a) && hasMember(members, a.selfID):
		out = append(out, v.evidence(a, a.selfID))
		for _, m := range on {
			if m.ID != a.selfID {
				out = append(out, notRunningThere(a, m))
			}
		}
	case len(on) == 0:
		// An etcd Pod on a Node that hosts no member of this cluster: kept, so its answer is seen.
		out = append(out, v.evidence(a, a.selfID))
	default:
		for _, m := range on {
			out = append(out, v.evidence(a, m.ID))
		}
	}
	return out
}

// evidence records what the member on a.node said, or why it did not, filed under id.
func (v view) evidence(a answer, id uint64) etcd.MemberEvidence {
	ev := etcd.MemberEvidence{MemberID: id, NodeName: a.node, ObservedAt: a.at}
	alarms := a.alarms
	if !a.answered() || v.ofCluster(a) {
		// Alarms are cluster-wide: the member an alarm names has it, whoever reported it.
		alarms = v.alarms
	}
	for _, al := range alarms {
		if al.memberID == id {
			ev.Alarms = append(ev.Alarms, al.alarm)
		}
	}
	if !a.answered() {
		ev.Contact, ev.Error = etcd.ContactUnreachable, a.err.Error()
		return ev
	}
	ev.Contact = etcd.ContactAnswered
	ev.ClusterID, ev.Members, ev.LeaderID, ev.Errors = a.clusterID, a.members, a.leaderID, a.errors
	if v.clusterID != 0 && a.clusterID != v.clusterID {
		ev.Errors = append(ev.Errors, fmt.Sprintf("etcd on Node %s answers as member %x of cluster %x, not of this cluster %x (split brain: a member that bootstrapped a cluster of its own)",
			a.node, a.selfID, a.clusterID, v.clusterID))
	} else if id != a.selfID {
		ev.Errors = append(ev.Errors, fmt.Sprintf("etcd on Node %s answers as member %x, which is not in the member list", a.node, a.selfID))
	} else {
		// Only the member's own answer speaks for its database and raft log.
		ev.Status = a.status
	}
	return ev
}

// notRunningThere is the evidence about m, which the view places on a.node while the etcd Pod
// there answers as another member: a reused hostname whose old member was never removed.
func notRunningThere(a answer, m etcd.Member) etcd.MemberEvidence {
	return etcd.MemberEvidence{
		MemberID: m.ID, NodeName: a.node, ObservedAt: a.at, Contact: etcd.ContactUnreachable,
		Error: fmt.Sprintf("etcd on Node %s answers as member %x; member %x (peer URLs %v) carries the same name and does not run there",
			a.node, a.selfID, m.ID, m.PeerURLs),
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
