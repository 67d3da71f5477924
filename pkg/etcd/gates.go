package etcd

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// CanRemoveMember decides whether member m (as a snapshot gave it) may be removed now: scale-down
// and Machine deletion call it, once in preflight and again right before the removal. A nil
// snapshot (etcd could not be observed) is never safe.
func CanRemoveMember(s *Snapshot, now time.Time, m Member) QuorumVerdict {
	if s == nil {
		return QuorumVerdict{Reason: RemovalHealthUnknownReason,
			Message: "etcd could not be observed, so no member removal is known to be safe"}
	}
	if _, ok := s.MemberByID(m.ID); !ok {
		// Named as the caller named it: ProjectRemoval knows only the ID, which may be one etcd
		// did not assign (Snapshot.SyntheticMemberIDs).
		return QuorumVerdict{Allowed: true, Reason: RemovalNoMemberReason,
			Message: fmt.Sprintf("etcd member %s is not in the cluster; removing it changes nothing", m)}
	}
	return ProjectRemoval(AssessMembers(s, now), m.ID)
}

// CanRemoveNode decides whether every member hosted on nodeName may be removed now, one after the
// other: a Node hosts more than one member when a reused hostname left an old member behind.
// They are projected in the order a controller removes them (learners and unhealthy members
// first), each on the member set the previous removal leaves.
func CanRemoveNode(s *Snapshot, now time.Time, nodeName string) QuorumVerdict {
	if s == nil {
		return CanRemoveMember(nil, now, Member{})
	}
	members := AssessMembers(s, now)
	targets := RemovalOrder(members, s.MembersOnNode(nodeName))
	if len(targets) == 0 {
		return QuorumVerdict{Allowed: true, Reason: RemovalNoMemberReason,
			Message: fmt.Sprintf("no etcd member is hosted on Node %s; removing it does not change etcd", nodeName)}
	}
	return ProjectRemovals(members, targets)
}

// CanRemoveMachines decides whether the Machines in going may be deleted together: the etcd
// members of each one that has a MemberRemover are removed, one after the other in RemovalOrder
// over all of them (learners, then members that are not healthy, then healthy ones); the members
// of each one without a remover stay in the cluster and stop answering once its infrastructure
// is deleted (ProjectChanges). That is the order the removals can happen in: the ControlPlaneEtcd
// controller takes its deleting Machines oldest first, but one whose removal is not safe yet does
// not hold up a later one whose removal is (the repair path: a broken member's Machine deleted to
// replace it goes first, which makes room for the healthy one deleted before it), and every
// removal is checked again right before it is made. The quorum guard asks it about the deletions
// already under way plus the one it is asked to admit, so that deletions that are each safe alone
// but not together cannot all pass.
//
// A Machine's members are the ones MembersOfMachine finds among all the Cluster's control-plane
// Machines (all): by Node, by name, and by peer URL on one of its addresses when no other Machine
// names the member. So a Machine whose Node is missing, or was never registered while its member
// joined, counts with its member, as the ControlPlaneEtcd controller will remove it.
func CanRemoveMachines(s *Snapshot, now time.Time, going, all []Machine) QuorumVerdict {
	if s == nil {
		return CanRemoveMember(nil, now, Member{})
	}
	members := AssessMembers(s, now)
	var targets, failing []Member
	for _, m := range going {
		if m.MemberRemover == "" {
			failing = append(failing, MembersOfMachine(s.Members, all, m)...)
			continue
		}
		targets = append(targets, MembersOfMachine(s.Members, all, m)...)
	}
	return ProjectChanges(members, RemovalOrder(members, targets), failing)
}

// ProjectChanges decides whether the members in failing may stop answering while they stay in
// the cluster (the infrastructure of their Machine is deleted and nothing removes them first),
// and the targets then be removed one after the other, in the order given (ProjectRemovals).
//
// A member that stops answering is still a voter: it counts toward the quorum size and not as
// healthy, so after it healthy voters must stay a strict majority of voters even if every learner
// were promoted, as after a removal. A member that is not a healthy voter already counts so, and
// its stopping changes nothing. The failures are projected before the removals: whatever order
// they happen in, every state they pass through has at least as many healthy voters, so that
// order is the one to check.
//
// Worked cases (all voters): 3 healthy, one stops answering: 2 of 3, allowed; two stop: 1 of 3,
// refused. 3 healthy, one removed and one stops answering: once the other stops, removing the
// first leaves 1 of 2, refused. 3 with 1 down, the down one's Machine deleted without a remover:
// nothing changes, allowed.
func ProjectChanges(members []MemberHealth, targets, failing []Member) QuorumVerdict {
	after, stopping := stopAnswering(members, failing)
	if len(stopping) == 0 {
		v := ProjectRemovals(members, targets)
		if v.Reason == RemovalNoMemberReason && len(failing) > 0 {
			v.Message = "none of the etcd members that stop answering is a healthy voter, and none is removed; the quorum counts do not change"
		}
		return v
	}
	stopped := fmt.Sprintf("once %s, which nothing removes before %s infrastructure is deleted, %s answering",
		removedList(stopping), verb(stopping, "its Machine's", "their Machines'"), verb(stopping, "stops", "stop"))
	if before := countQuorum(members); !before.canCommit() {
		if before.mayCommit() {
			return QuorumVerdict{Reason: RemovalHealthUnknownReason,
				Message: fmt.Sprintf("whether etcd has quorum is unknown: %s; no member is known to be safe to lose until enough of them are known to be healthy", before)}
		}
		return QuorumVerdict{Reason: RemovalQuorumLostReason,
			Message: fmt.Sprintf("quorum is already lost: %s", before)}
	}
	if c := countQuorum(after); !c.keepsMajority() {
		return lastMemberOr(members, targets, failing, QuorumVerdict{Reason: RemovalWouldLoseQuorumReason,
			Message: fmt.Sprintf("%s, quorum is lost: %s", stopped, c)})
	}
	v := ProjectRemovals(after, targets)
	switch {
	case v.Reason == RemovalWouldLoseQuorumReason:
		return lastMemberOr(members, targets, failing, QuorumVerdict{Reason: v.Reason, Message: fmt.Sprintf("%s, %s", stopped, v.Message)})
	case v.Reason == RemovalNoMemberReason:
		return QuorumVerdict{Allowed: true, Reason: RemovalSafeReason,
			Message: fmt.Sprintf("%s, quorum holds: %s", stopped, countQuorum(after))}
	case v.Allowed:
		v.Message = fmt.Sprintf("%s, quorum holds: %s; then %s", stopped, countQuorum(after), v.Message)
	default:
		v.Message = fmt.Sprintf("%s, %s", stopped, v.Message)
	}
	return v
}

// lastMemberOr says LastMember instead of the refusal v when every member is removed or stops
// answering: no member that answers is left, and the cluster is destroyed.
func lastMemberOr(members []MemberHealth, targets, failing []Member, v QuorumVerdict) QuorumVerdict {
	for _, mh := range members {
		going := func(m Member) bool { return m.ID == mh.Member.ID }
		if !slices.ContainsFunc(targets, going) && !slices.ContainsFunc(failing, going) {
			return v
		}
	}
	return QuorumVerdict{Reason: RemovalLastMemberReason,
		Message: "every etcd member is removed or stops answering, which destroys the cluster: " + v.Message}
}

// stopAnswering returns the members with every member of failing counted unhealthy, and the
// voters among failing that still vote (healthy, or with only a NOSPACE alarm): the ones whose
// stopping changes the quorum counts.
func stopAnswering(members []MemberHealth, failing []Member) ([]MemberHealth, []Member) {
	out := append([]MemberHealth(nil), members...)
	var stopping []Member
	for i, mh := range out {
		if !slices.ContainsFunc(failing, func(f Member) bool { return f.ID == mh.Member.ID }) {
			continue
		}
		if !mh.Member.IsLearner && (mh.Health == Healthy || mh.NoSpace) {
			stopping = append(stopping, mh.Member)
		}
		out[i].Health, out[i].NoSpace = Unhealthy, false
		out[i].Message = "stops answering: its Machine's infrastructure is deleted while it is a member"
	}
	return out, stopping
}

// removedList names members for "once ... stops answering".
func removedList(ms []Member) string {
	if len(ms) == 1 {
		return fmt.Sprintf("etcd member %s", ms[0])
	}
	return fmt.Sprintf("etcd members %s", memberList(ms))
}

// verb picks the singular or plural form for the members.
func verb(ms []Member, one, many string) string {
	if len(ms) == 1 {
		return one
	}
	return many
}

// ProjectRemovals decides whether the targets may be removed one after the other, in the order
// given, each projected with ProjectRemoval on the member set the removals before it leave.
// Targets that are not members, and repeated ones, change nothing. Removing every member is
// refused as LastMember before any health is looked at: whatever the order and however healthy
// the members, the last removal destroys the cluster.
//
// Worked cases (all voters): 3 healthy, remove two: 2 of 2, then 1 of 1, allowed; remove all
// three: refused (LastMember). 4 with 1 down, remove two healthy ones: 2 of 3 after the first,
// then 1 of 2, refused; remove a healthy one and the down one: allowed in either order.
func ProjectRemovals(members []MemberHealth, targets []Member) QuorumVerdict {
	var present []Member
	for _, t := range targets {
		if _, ok := findMember(members, t.ID); ok && !slices.ContainsFunc(present, func(p Member) bool { return p.ID == t.ID }) {
			present = append(present, t)
		}
	}
	if len(present) == 0 {
		return QuorumVerdict{Allowed: true, Reason: RemovalNoMemberReason,
			Message: "none of the etcd members to remove is in the cluster; removing them changes nothing"}
	}
	if len(present) > 1 && len(present) == len(members) {
		return QuorumVerdict{Reason: RemovalLastMemberReason,
			Message: fmt.Sprintf("removing etcd members %s would remove every member; removing the last one would destroy the cluster", memberList(present))}
	}
	var msgs []string
	for i, t := range present {
		v := ProjectRemoval(members, t.ID)
		if !v.Allowed {
			if i > 0 {
				v.Message = fmt.Sprintf("once %s removed, %s", removedBefore(present[:i]), v.Message)
			}
			return v
		}
		msgs = append(msgs, v.Message)
		members = without(members, t.ID)
	}
	return QuorumVerdict{Allowed: true, Reason: RemovalSafeReason, Message: strings.Join(msgs, "; then ")}
}

// removedBefore names the members removed before a step, for "once ... removed".
func removedBefore(ms []Member) string {
	if len(ms) == 1 {
		return fmt.Sprintf("etcd member %s is", ms[0])
	}
	return fmt.Sprintf("etcd members %s are", memberList(ms))
}

// memberList names members for messages, in the order given.
func memberList(ms []Member) string {
	names := make([]string, 0, len(ms))
	for _, m := range ms {
		names = append(names, m.String())
	}
	return strings.Join(names, ", ")
}

// CanRemediate decides whether a Machine may be remediated (deleted and replaced) without losing
// etcd quorum. A Machine without a Node, or whose Node hosts no member, does not affect etcd.
func CanRemediate(s *Snapshot, now time.Time, m Machine) QuorumVerdict {
	if m.Provisioning() {
		return QuorumVerdict{Allowed: true, Reason: RemovalNoMemberReason,
			Message: fmt.Sprintf("Machine %s has no Node, so it hosts no etcd member", m.Name)}
	}
	return CanRemoveNode(s, now, m.NodeName)
}

// RemovalOrder sorts the given members in the order they should be removed when several must go:
// learners first, then members that are not healthy, then the rest, the leader never before a
// follower; ties by ID so every pass picks the same one.
func RemovalOrder(assessed []MemberHealth, targets []Member) []Member {
	rank := func(m Member) int {
		mh, ok := findMember(assessed, m.ID)
		switch {
		case m.IsLearner:
			return 0
		case !ok || mh.Health != Healthy:
			return 1
		}
		return 2
	}
	out := append([]Member(nil), targets...)
	slices.SortStableFunc(out, func(a, b Member) int {
		if d := rank(a) - rank(b); d != 0 {
			return d
		}
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	return out
}
