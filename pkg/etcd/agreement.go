package etcd

import (
	"fmt"
	"slices"
	"strings"
)

// agreement is what most answering members say about the cluster. A member that disagrees is
// the odd one out; when no view has a majority, every member is suspect.
type agreement struct {
	clusterID    uint64
	clusterIDTie bool
	memberList   string
	memberNames  string
	listsDiffer  bool
	alarms       []ActiveAlarm
}

// alarmsOn returns the cluster's active alarms that name the member.
func (a agreement) alarmsOn(id uint64) []Alarm {
	var out []Alarm
	for _, al := range a.alarms {
		if al.MemberID == id {
			out = append(out, al.Alarm)
		}
	}
	return out
}

func newAgreement(s *Snapshot) agreement {
	a := agreement{alarms: s.Alarms}
	ids := map[uint64]int{}
	for _, ev := range answered(s) {
		if ev.ClusterID != 0 {
			ids[ev.ClusterID]++
		}
	}
	a.clusterID, a.clusterIDTie = plurality(ids)

	lists := map[string]int{}
	names := map[string]string{}
	for _, ev := range answered(s) {
		if ev.Members == nil || (a.clusterID != 0 && ev.ClusterID != a.clusterID) {
			continue
		}
		key := memberListKey(ev.Members)
		lists[key]++
		names[key] = memberNames(ev.Members)
	}
	a.memberList, _ = plurality(lists)
	a.memberNames = names[a.memberList]
	a.listsDiffer = len(lists) > 1
	return a
}

// answered returns the evidence of members that answered.
func answered(s *Snapshot) []MemberEvidence {
	var out []MemberEvidence
	for _, ev := range s.Evidence {
		if ev.Contact == ContactAnswered {
			out = append(out, ev)
		}
	}
	return out
}

// plurality returns the most frequent value, and whether another value is just as frequent.
// Ties are broken by value so the result is deterministic.
func plurality[K comparable](counts map[K]int) (K, bool) {
	var best K
	bestN, tie := 0, false
	keys := make([]K, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b K) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	for _, k := range keys {
		switch n := counts[k]; {
		case n > bestN:
			best, bestN, tie = k, n, false
		case n == bestN:
			tie = true
		}
	}
	return best, tie
}

// memberListKey identifies a member list by its IDs and voting status, ignoring order and the
// fields (names, URLs) that legitimately change while a member starts.
func memberListKey(members []Member) string {
	parts := make([]string, 0, len(members))
	for _, m := range members {
		parts = append(parts, fmt.Sprintf("%x/%t", m.ID, m.IsLearner))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}
