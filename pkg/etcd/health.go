package etcd

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// Health is a tri-state verdict: unknown is never treated as healthy.
type Health string

// Health values.
const (
	Healthy   Health = "Healthy"
	Unhealthy Health = "Unhealthy"
	Unknown   Health = "Unknown"
)

// MemberHealth is the verdict on one member. A learner can be Healthy: being a learner is a fact
// about voting, which the quorum projection and the Machine condition treat on their own.
type MemberHealth struct {
	Member  Member
	Health  Health
	Message string
	// Problems are findings about the member that a person must resolve but that do not change
	// whether the member itself serves (so they do not change the quorum projection): for
	// example, another member carries the same name.
	Problems []string
	// NoSpace is true when the member is Unhealthy only because of a NOSPACE alarm: it answers,
	// agrees with the majority and knows a leader. etcd refuses its writes while the alarm is
	// raised, but the member still votes: the alarm limits what etcd applies, not what raft
	// commits, so membership changes, deletes and compactions still commit through it
	// (go.etcd.io/etcd/server/v3 etcdserver/apply, applierV3Capped).
	NoSpace bool
}

// AssessMembers classifies every member of the snapshot as of now. It never fails: what it
// cannot tell is Unknown, with a message that says why.
func AssessMembers(s *Snapshot, now time.Time) []MemberHealth {
	out := assessMembers(s, now)
	if hasNoSpace(s) {
		for i, mh := range assessMembers(withoutNoSpace(s), now) {
			out[i].NoSpace = out[i].Health == Unhealthy && mh.Health == Healthy
		}
	}
	return out
}

func assessMembers(s *Snapshot, now time.Time) []MemberHealth {
	v := newAgreement(s)
	out := make([]MemberHealth, 0, len(s.Members))
	for _, m := range s.Members {
		health, msg := assessMember(s, v, m, now)
		out = append(out, MemberHealth{Member: m, Health: health, Message: msg})
	}
	markSharedNames(out, s.SyntheticMemberIDs)
	return out
}

// markSharedNames adds a problem to every started member whose name another member carries too.
// etcd does not refuse a second member with a name in use: a reused hostname whose old member
// was never removed leaves two, and only their IDs and peer URLs tell them apart. Health stays
// as the evidence says, so a live member is not counted down and the stale one stays removable.
// When the IDs are not etcd's (synthetic), the members are told apart by their Nodes instead.
func markSharedNames(members []MemberHealth, synthetic bool) {
	byName := map[string][]Member{}
	for _, mh := range members {
		if mh.Member.Started() {
			byName[mh.Member.Name] = append(byName[mh.Member.Name], mh.Member)
		}
	}
	for i, mh := range members {
		if same := byName[mh.Member.Name]; mh.Member.Started() && len(same) > 1 {
			members[i].Problems = append(members[i].Problems, sharedNameProblem(same, synthetic))
		}
	}
}

func sharedNameProblem(same []Member, synthetic bool) string {
	if synthetic {
		nodes := make([]string, 0, len(same))
		for _, m := range same {
			nodes = append(nodes, m.NodeName)
		}
		slices.Sort(nodes)
		nodes = slices.Compact(nodes)
		where := "Node " + nodes[0]
		if len(nodes) > 1 {
			where = "Nodes " + strings.Join(nodes, " and ")
		}
		return fmt.Sprintf("%d etcd members on %s share the name %s", len(same), where, same[0].Name)
	}
	ids := make([]string, 0, len(same))
	for _, m := range same {
		ids = append(ids, fmt.Sprintf("%x (peer URLs %s)", m.ID, strings.Join(m.PeerURLs, ", ")))
	}
	slices.Sort(ids)
	return fmt.Sprintf("etcd members %s share the name %s: remove the one that is not running by its ID", strings.Join(ids, " and "), same[0].Name)
}

func assessMember(s *Snapshot, v agreement, m Member, now time.Time) (Health, string) {
	if !m.Started() {
		return Unhealthy, fmt.Sprintf("etcd member %x was added but never started", m.ID)
	}
	ev, ok := s.EvidenceFor(m.ID)
	if !ok {
		if m.NodeName == "" {
			return Unknown, fmt.Sprintf("etcd member %s is hosted on no Node, so it could not be asked", m.Name)
		}
		return Unknown, fmt.Sprintf("etcd member %s was not asked", m.Name)
	}
	if age, ttl := now.Sub(ev.ObservedAt), s.evidenceTTL(); age > ttl {
		return Unknown, fmt.Sprintf("the last evidence about etcd member %s is %s old, older than the %s it can be trusted", m.Name, age.Round(time.Second), ttl)
	}
	switch ev.Contact {
	case ContactUnreachable:
		return Unhealthy, fmt.Sprintf("etcd member %s is not answering: %s", m.Name, ev.Error)
	case ContactUnknown:
		return Unknown, fmt.Sprintf("the health of etcd member %s is unknown: %s", m.Name, ev.Error)
	}
	return assessAnswer(v, m, ev)
}

func assessAnswer(v agreement, m Member, ev MemberEvidence) (Health, string) {
	if len(ev.Errors) > 0 {
		return Unhealthy, fmt.Sprintf("etcd member %s is listening but unhealthy: %s", m.Name, strings.Join(ev.Errors, "; "))
	}
	if alarms := append(append([]Alarm(nil), ev.Alarms...), v.alarmsOn(m.ID)...); len(alarms) > 0 {
		return Unhealthy, fmt.Sprintf("etcd member %s reports alarms: %s", m.Name, joinAlarms(alarms))
	}
	if ev.ClusterID != 0 && v.clusterID != 0 && ev.ClusterID != v.clusterID {
		return Unhealthy, fmt.Sprintf("etcd member %s reports cluster ID %x while the majority reports %x (split brain)", m.Name, ev.ClusterID, v.clusterID)
	}
	if ev.ClusterID != 0 && v.clusterIDTie {
		return Unhealthy, fmt.Sprintf("etcd member %s reports cluster ID %x and no cluster ID has a majority (split brain)", m.Name, ev.ClusterID)
	}
	if ev.Members != nil && v.memberList != "" && memberListKey(ev.Members) != v.memberList {
		return Unhealthy, fmt.Sprintf("etcd member %s reports members %s, which differs from the majority's %s", m.Name, memberNames(ev.Members), v.memberNames)
	}
	if ev.Members != nil && ev.LeaderID == 0 {
		return Unhealthy, fmt.Sprintf("etcd member %s knows no leader", m.Name)
	}
	return Healthy, ""
}

func (s *Snapshot) evidenceTTL() time.Duration {
	if s.EvidenceTTL > 0 {
		return s.EvidenceTTL
	}
	return DefaultEvidenceTTL
}

func joinAlarms(alarms []Alarm) string {
	names := make([]string, 0, len(alarms))
	for _, a := range alarms {
		names = append(names, string(a))
	}
	slices.Sort(names)
	return strings.Join(slices.Compact(names), ", ")
}

// memberNames lists members by name (never-started ones by ID), sorted, for messages.
func memberNames(members []Member) string {
	names := make([]string, 0, len(members))
	for _, m := range members {
		names = append(names, m.String())
	}
	slices.Sort(names)
	return "[" + strings.Join(names, ", ") + "]"
}
