package etcd

import (
	"fmt"
	"time"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// CanRemoveMember decides whether the member hosted on nodeName may be removed now: scale-down
// and Machine deletion call it, once in preflight and again right before the removal. A nil
// snapshot (etcd could not be observed) is never safe.
func CanRemoveMember(s *Snapshot, now time.Time, nodeName string) QuorumVerdict {
	if s == nil {
		return QuorumVerdict{Reason: v1alpha1.MemberRemovalHealthUnknownReason,
			Message: "etcd could not be observed, so no member removal is known to be safe"}
	}
	m, ok := s.MemberByNode(nodeName)
	if !ok {
		return QuorumVerdict{Allowed: true, Reason: v1alpha1.MemberRemovalNoMemberReason,
			Message: fmt.Sprintf("no etcd member is hosted on Node %s; removing it does not change etcd", nodeName)}
	}
	return ProjectRemoval(AssessMembers(s, now), m.ID)
}

// CanRemediate decides whether a Machine may be remediated (deleted and replaced) without losing
// etcd quorum. A Machine without a Node, or whose Node hosts no member, does not affect etcd.
func CanRemediate(s *Snapshot, now time.Time, m Machine) QuorumVerdict {
	if m.Provisioning() {
		return QuorumVerdict{Allowed: true, Reason: v1alpha1.MemberRemovalNoMemberReason,
			Message: fmt.Sprintf("Machine %s has no Node, so it hosts no etcd member", m.Name)}
	}
	return CanRemoveMember(s, now, m.NodeName)
}
