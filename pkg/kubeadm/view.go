package kubeadm

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// view is what the majority of answering members say: the cluster ID, the member list and the
// leader. Disagreeing members keep their own answers as evidence, so pkg/etcd can name them.
type view struct {
	clusterID uint64
	members   []etcd.Member
	leaderID  uint64
}

// newView picks the most reported cluster ID, then the most reported member list among
// members of that cluster, then the most reported leader. Ties go to the smallest value, so
// the view is deterministic.
func newView(answers map[string]answer) view {
	var v view
	ids := map[uint64]int{}
	for _, a := range answers {
		if a.answered() && a.clusterID != 0 {
			ids[a.clusterID]++
		}
	}
	v.clusterID = mostFrequent(ids)
	lists, leaders := map[string]int{}, map[uint64]int{}
	byKey := map[string][]etcd.Member{}
	for _, node := range sortedNodes(answers) {
		a := answers[node]
		if !a.answered() || a.clusterID != v.clusterID {
			continue
		}
		if a.leaderID != 0 {
			leaders[a.leaderID]++
		}
		if a.members != nil {
			k := listKey(a.members)
			lists[k]++
			if _, ok := byKey[k]; !ok {
				byKey[k] = a.members
			}
		}
	}
	if len(lists) > 0 {
		v.members = byKey[mostFrequent(lists)]
	}
	v.leaderID = mostFrequent(leaders)
	return v
}

// mostFrequent returns the most frequent key, the smallest on ties; zero for none.
func mostFrequent[K cmp.Ordered](counts map[K]int) K {
	var best K
	bestN := 0
	for k, n := range counts {
		if n > bestN || (n == bestN && k < best) {
			best, bestN = k, n
		}
	}
	return best
}

func listKey(ms []etcd.Member) string {
	parts := make([]string, 0, len(ms))
	for _, m := range ms {
		parts = append(parts, fmt.Sprintf("%x/%t", m.ID, m.IsLearner))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}

// nodes returns the Nodes hosting the view's started members.
func (v view) nodes() []string {
	var out []string
	for _, m := range v.members {
		if m.NodeName != "" {
			out = append(out, m.NodeName)
		}
	}
	return out
}

// memberOnNode returns the view's member hosted on node.
func (v view) memberOnNode(node string) (etcd.Member, bool) {
	for _, m := range v.members {
		if m.NodeName == node {
			return m, true
		}
	}
	return etcd.Member{}, false
}

// snapshot builds the Snapshot: the view's members and leader, and one piece of evidence per
// Node asked. Evidence is filed under the member the view places on that Node, so an answer
// from another cluster on that Node (split brain) counts against that member.
func (v view) snapshot(answers map[string]answer, now time.Time) *etcd.Snapshot {
	s := &etcd.Snapshot{Backend: BackendName, ObservedAt: now, Members: v.members, LeaderID: v.leaderID}
	for _, node := range sortedNodes(answers) {
		a := answers[node]
		id := a.selfID
		if m, ok := v.memberOnNode(node); ok {
			id = m.ID
		}
		if id == 0 {
			// Nothing on this Node is a member and it did not answer: nothing to say.
			continue
		}
		s.Evidence = append(s.Evidence, evidence(a, id))
	}
	return s
}

// evidence records what the member on a.node said, or why it did not.
func evidence(a answer, id uint64) etcd.MemberEvidence {
	ev := etcd.MemberEvidence{MemberID: id, NodeName: a.node, ObservedAt: a.at}
	if !a.answered() {
		ev.Contact, ev.Error = etcd.ContactUnreachable, a.err.Error()
		return ev
	}
	ev.Contact = etcd.ContactAnswered
	ev.ClusterID, ev.Members, ev.LeaderID, ev.Errors = a.clusterID, a.members, a.leaderID, a.errors
	for _, al := range a.alarms {
		if al.memberID == a.selfID && al.alarm != "NONE" {
			ev.Alarms = append(ev.Alarms, al.alarm)
		}
	}
	return ev
}
