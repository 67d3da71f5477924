package membership

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// Decision is what the members of one cluster say together: its cluster ID, its member list, its
// leader and its active alarms. Members that disagree keep their own answers as evidence, so
// pkg/etcd can name them.
type Decision struct {
	// ClusterID is the cluster's ID (see clusterIDOf).
	ClusterID uint64
	// Members is the cluster's member list (see memberListOf), not placed.
	Members []etcd.Member
	// LeaderID is the leader, zero when not known (see leaderOf).
	LeaderID uint64
	// Alarms are the cluster's active alarms (see alarmsOf).
	Alarms []etcd.ActiveAlarm
}

// ErrNoMemberList is Decide's error when no member of the cluster answered with a member list
// and none is remembered: the backend says why (see its noAnswerError).
var ErrNoMemberList = errors.New("no member of the cluster answered with a member list")

// OfCluster reports whether a is the answer of a member of the decision's cluster.
func (d Decision) OfCluster(a Answer) bool {
	return a.Answered() && a.Removed == "" && a.ClusterID != 0 && a.ClusterID == d.ClusterID
}

// Stranger reports whether a is the answer of a member of another cluster.
func (d Decision) Stranger(a Answer) bool {
	return a.Answered() && a.Removed == "" && a.ClusterID != 0 && a.ClusterID != d.ClusterID
}

// Decide builds the decision from the answers. knownID is the cluster ID the backend saw first
// (zero before it saw one): answers from another cluster never shape the decision, so a
// re-bootstrapped member answering alone does not become the cluster. last is the member list
// seen last: when only members of another cluster answered, it is the member list, and their
// answers count against its members.
//
// It fails with etcd.ErrInvalidInput when no cluster ID is known and two are reported equally
// often (see clusterIDOf), and with ErrNoMemberList when there is no member list.
func Decide(answers []Answer, knownID uint64, last []etcd.Member) (Decision, error) {
	d := Decision{ClusterID: knownID}
	if d.ClusterID == 0 {
		id, err := clusterIDOf(answers)
		if err != nil {
			return Decision{}, err
		}
		d.ClusterID = id
	}
	d.LeaderID = leaderOf(answers, d)
	d.Members = memberListOf(answers, d)
	d.Alarms = alarmsOf(answers, d)
	if d.Members == nil && last != nil && slices.ContainsFunc(answers, d.Stranger) {
		d.Members = slices.Clone(last)
	}
	if d.Members == nil {
		return Decision{}, ErrNoMemberList
	}
	return d, nil
}

// clusterIDOf is the cluster ID most members answer with; zero when none answered.
//
// Two cluster IDs reported equally often are refused (etcd.ErrInvalidInput), never guessed:
// every member of one etcd cluster reports the ID it was bootstrapped with, so two IDs mean the
// places asked reach members of two clusters (a member that lost its data and bootstrapped
// alone, endpoints that name another cluster). With equal counts nothing says which one is this
// Cluster's etcd, and picking one would let a removal act on the other. Once a backend knows
// its cluster ID it keeps it, so this only decides a backend's first observation.
func clusterIDOf(answers []Answer) (uint64, error) {
	counts := map[uint64]int{}
	for _, a := range answers {
		if a.Answered() && a.Removed == "" && a.ClusterID != 0 {
			counts[a.ClusterID]++
		}
	}
	best, bestN := mostFrequent(counts)
	var tied []string
	for id, n := range counts {
		if n == bestN {
			tied = append(tied, fmt.Sprintf("%x", id))
		}
	}
	if len(tied) > 1 {
		slices.Sort(tied)
		return 0, fmt.Errorf("%w: the etcd members asked answer for clusters %s in equal numbers; cannot tell which one is this Cluster's etcd", etcd.ErrInvalidInput, strings.Join(tied, ", "))
	}
	return best, nil
}

// leaderOf decides who leads from each member's own Status: the member that says it leads
// (Leader is its own ID), in the highest raft term, since a deposed leader that has not
// noticed yet still says so in its older term. Only when no member that answered says it
// leads does it fall back to the leader most followers name (the leader itself may be
// unreachable while it leads); MoveLeader never acts on that.
//
// Two members that say they lead in the same highest term give no leader (zero). Raft elects at
// most one leader per term (a candidate needs a majority of votes, and each member votes once
// per term), so two such claims cannot both be true of one cluster: one answer is stale or
// comes from a member that runs a raft log of its own under the same cluster ID (a copied data
// directory). Breaking the tie by member ID would be a guess; no leader is what etcd.Snapshot
// says when the leader is not known, and the member list then comes from the majority.
func leaderOf(answers []Answer, d Decision) uint64 {
	var best Answer
	contested := false
	followers := map[uint64]int{}
	for _, a := range answers {
		if !d.OfCluster(a) || a.LeaderID == 0 {
			continue
		}
		switch {
		case a.LeaderID != a.SelfID:
			followers[a.LeaderID]++
		case best.SelfID == 0 || a.RaftTerm > best.RaftTerm:
			best, contested = a, false
		case a.RaftTerm == best.RaftTerm && a.SelfID != best.SelfID:
			contested = true
		}
	}
	switch {
	case contested:
		return 0
	case best.SelfID != 0:
		return best.SelfID
	}
	id, _ := mostFrequent(followers)
	return id
}

// memberListOf is the cluster's member list: the leader's own when it answered with one, else
// the one most members report.
//
// The leader's list comes first because etcd applies a membership change when raft commits it,
// and the leader is the first to know it is committed: its list is the most current committed
// membership any member can report, while a follower may not have applied the change yet (and a
// member cut off from the leader may never). A majority of followers can still report the list
// before the change, which a count would take. The count is the fallback when no member says it
// leads (no quorum, the leader unreachable, or contested leadership), and among lists reported
// equally often the one whose key sorts first is taken, so the decision is deterministic; the
// members that report the other lists are named by the agreement check (pkg/etcd).
func memberListOf(answers []Answer, d Decision) []etcd.Member {
	counts := map[string]int{}
	byKey := map[string][]etcd.Member{}
	for _, a := range answers {
		if !d.OfCluster(a) || a.Members == nil {
			continue
		}
		if d.LeaderID != 0 && a.SelfID == d.LeaderID && a.LeaderID == a.SelfID {
			return slices.Clone(a.Members)
		}
		k := listKey(a.Members)
		counts[k]++
		if _, ok := byKey[k]; !ok {
			byKey[k] = a.Members
		}
	}
	if best, n := mostFrequent(counts); n > 0 {
		return slices.Clone(byKey[best])
	}
	return nil
}

// alarmsOf is every active alarm the members of the cluster report, once each: alarms are
// replicated through raft, so the member an alarm names has it, whoever reported it.
func alarmsOf(answers []Answer, d Decision) []etcd.ActiveAlarm {
	var out []etcd.ActiveAlarm
	for _, a := range answers {
		if !d.OfCluster(a) {
			continue
		}
		for _, al := range a.Alarms {
			if al.Alarm != "" && al.Alarm != "NONE" && !slices.Contains(out, al) {
				out = append(out, al)
			}
		}
	}
	slices.SortFunc(out, func(x, y etcd.ActiveAlarm) int {
		return cmp.Or(cmp.Compare(x.MemberID, y.MemberID), cmp.Compare(x.Alarm, y.Alarm))
	})
	return out
}

// mostFrequent returns the most frequent key and its count, the smallest key on ties; zero for
// none.
func mostFrequent[K cmp.Ordered](counts map[K]int) (K, int) {
	var best K
	bestN := 0
	for k, n := range counts {
		if n > bestN || (n == bestN && k < best) {
			best, bestN = k, n
		}
	}
	return best, bestN
}

// listKey identifies a member list by its members and their roles, in any order.
func listKey(ms []etcd.Member) string {
	parts := make([]string, 0, len(ms))
	for _, m := range ms {
		parts = append(parts, fmt.Sprintf("%x/%t", m.ID, m.IsLearner))
	}
	slices.Sort(parts)
	return strings.Join(parts, ",")
}
