package etcd

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// CanRemoveMember decides whether member m (as a snapshot gave it) may be removed now: scale-down
// and Machine deletion call it, once in preflight and again right before the removal. A nil
// snapshot (etcd could not be observed) is never safe.
func CanRemoveMember(s *Snapshot, now time.Time, m Member) QuorumVerdict {
	if s == nil {
		return QuorumVerdict{Reason: v1alpha1.MemberRemovalHealthUnknownReason,
			Message: "etcd could not be observed, so no member removal is known to be safe"}
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
		return QuorumVerdict{Allowed: true, Reason: v1alpha1.MemberRemovalNoMemberReason,
			Message: fmt.Sprintf("no etcd member is hosted on Node %s; removing it does not change etcd", nodeName)}
	}
	var v QuorumVerdict
	var msgs []string
	for _, t := range targets {
		if v = ProjectRemoval(members, t.ID); !v.Allowed {
			return v
		}
		msgs = append(msgs, v.Message)
		members = without(members, t.ID)
	}
	v.Message = strings.Join(msgs, "; then ")
	return v
}

// CanRemediate decides whether a Machine may be remediated (deleted and replaced) without losing
// etcd quorum. A Machine without a Node, or whose Node hosts no member, does not affect etcd.
func CanRemediate(s *Snapshot, now time.Time, m Machine) QuorumVerdict {
	if m.Provisioning() {
		return QuorumVerdict{Allowed: true, Reason: v1alpha1.MemberRemovalNoMemberReason,
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
