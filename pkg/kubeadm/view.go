package kubeadm

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// view is what the members of one cluster say: its cluster ID, the member list most of them
// report, the leader and the cluster's alarms. Members that disagree keep their own answers as
// evidence, so pkg/etcd can name them.
type view struct {
	clusterID uint64
	members   []etcd.Member
	leaderID  uint64
	alarms    []memberAlarm
}

// newView builds the view of the cluster known by knownID (the cluster ID seen first by this
// backend), or, before one is known, of the most reported cluster ID. Answers from another
// cluster never shape it: a re-bootstrapped member answering alone must not become the cluster.
// Ties go to the smallest value, so the view is deterministic.
func newView(answers map[string]answer, knownID uint64) view {
	v := view{clusterID: knownID}
	if v.clusterID == 0 {
		ids := map[uint64]int{}
		for _, a := range answers {
			if a.answered() && a.clusterID != 0 {
				ids[a.clusterID]++
			}
		}
		v.clusterID = mostFrequent(ids)
	}
	lists := map[string]int{}
	byKey := map[string][]etcd.Member{}
	for _, node := range sortedNodes(answers) {
		a := answers[node]
		if !v.ofCluster(a) {
			continue
		}
		v.alarms = addAlarms(v.alarms, a.alarms)
		if a.members != nil {
			k := listKey(a.members)
			lists[k]++
			if _, ok := byKey[k]; !ok {
				byKey[k] = a.members
			}
		}
	}
	if len(lists) > 0 {
		v.members = slices.Clone(byKey[mostFrequent(lists)])
	}
	v.leaderID = leaderOf(answers, v)
	return v
}

// ofCluster reports whether a is an answer of a member of the view's cluster.
func (v view) ofCluster(a answer) bool {
	return a.answered() && a.clusterID != 0 && a.clusterID == v.clusterID
}

// leaderOf decides who leads from each member's own Status: the member that says it leads
// (Leader == its own ID), in the highest raft term when a deposed leader has not noticed yet.
// Only when no member that answered leads does it fall back to the leader the followers name
// (the leader's own Pod may be unreachable while it leads); MoveLeader never acts on that.
func leaderOf(answers map[string]answer, v view) uint64 {
	var best answer
	followers := map[uint64]int{}
	for _, node := range sortedNodes(answers) {
		a := answers[node]
		if !v.ofCluster(a) || a.leaderID == 0 {
			continue
		}
		if a.leaderID != a.selfID {
			followers[a.leaderID]++
			continue
		}
		if best.selfID == 0 || a.raftTerm > best.raftTerm || (a.raftTerm == best.raftTerm && a.selfID < best.selfID) {
			best = a
		}
	}
	if best.selfID != 0 {
		return best.selfID
	}
	return mostFrequent(followers)
}

// addAlarms adds the alarms not in to yet.
func addAlarms(to, from []memberAlarm) []memberAlarm {
	for _, al := range from {
		if al.alarm != "" && al.alarm != "NONE" && !slices.Contains(to, al) {
			to = append(to, al)
		}
	}
	slices.SortFunc(to, func(a, b memberAlarm) int {
		return cmp.Or(cmp.Compare(a.memberID, b.memberID), cmp.Compare(a.alarm, b.alarm))
	})
	return to
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
