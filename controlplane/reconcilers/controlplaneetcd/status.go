package controlplaneetcd

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cluster-api/util/conditions"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// setStatus writes everything the pass learned. It writes no timestamps of its own, so a pass
// that learned nothing new leaves the object unchanged and the patch is empty.
func setStatus(s *scope) {
	st := &s.cpe.Status
	if s.clusterID.Condition.Type != "" {
		conditions.Set(s.cpe, s.clusterID.Condition)
		st.ClusterID = s.clusterID.Record
	}
	verdict := etcd.AssessHealth(s.healthInput())
	conditions.Set(s.cpe, verdict.Cluster)
	if s.snapshot == nil {
		markMembersUnknown(st, verdict.Cluster)
		setUnobservedConditions(s, verdict.Cluster)
		setProgressing(s)
		return
	}
	st.Members = memberStatuses(s, verdict.Members)
	st.MemberCount = ptr.To(int32(len(st.Members)))
	st.Leader = ""
	if l, ok := s.snapshot.Leader(); ok {
		st.Leader = l.Name
	}
	c := countVoters(verdict.Members)
	st.Voters, st.HealthyVoters = ptr.To(c.voters), ptr.To(c.healthy)
	st.FaultTolerance = ptr.To(max(0, c.healthy-(c.voters/2+1)))
	setAvailability(s, etcd.AssessQuorum(verdict.Members), c)
	setProgressing(s)
}

func memberStatuses(s *scope, members []etcd.MemberHealth) []v1alpha1.EtcdMemberStatus {
	out := make([]v1alpha1.EtcdMemberStatus, 0, len(members))
	for _, mh := range members {
		m := mh.Member
		ms := v1alpha1.EtcdMemberStatus{
			Name: m.Name, ID: s.snapshot.EtcdMemberID(m.ID), NodeName: m.NodeName,
			Role: role(s.snapshot, m), Health: v1alpha1.MemberHealth(mh.Health), Reason: memberReason(mh.Health), Message: mh.Message,
		}
		if machine := s.machineOfMember(m); machine != nil {
			ms.MachineName = machine.Name
		}
		if ev, ok := s.snapshot.EvidenceFor(m.ID); ok {
			for _, a := range ev.Alarms {
				ms.Alarms = append(ms.Alarms, string(a))
			}
			slices.Sort(ms.Alarms)
			ms.Alarms = slices.Compact(ms.Alarms)
		}
		out = append(out, ms)
	}
	slices.SortFunc(out, func(a, b v1alpha1.EtcdMemberStatus) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
	return out
}

func role(s *etcd.Snapshot, m etcd.Member) v1alpha1.MemberRole {
	switch {
	case m.IsLearner:
		return v1alpha1.MemberRoleLearner
	case s.LeaderID != 0 && m.ID == s.LeaderID:
		return v1alpha1.MemberRoleLeader
	}
	return v1alpha1.MemberRoleVoter
}

func memberReason(h etcd.Health) string {
	switch h {
	case etcd.Healthy:
		return v1alpha1.EtcdMemberHealthyReason
	case etcd.Unhealthy:
		return v1alpha1.EtcdMemberNotHealthyReason
	}
	return v1alpha1.EtcdMemberInspectionFailedReason
}

// voterCounts count the voting members by health. noSpace are the voters Unhealthy only because
// of a NOSPACE alarm (etcd.MemberHealth.NoSpace): they refuse writes but still vote.
type voterCounts struct {
	voters, healthy, noSpace, unknown int32
}

func countVoters(members []etcd.MemberHealth) voterCounts {
	var c voterCounts
	for _, mh := range members {
		if mh.Member.IsLearner {
			continue
		}
		c.voters++
		switch {
		case mh.Health == etcd.Healthy:
			c.healthy++
		case mh.Health == etcd.Unknown:
			c.unknown++
		case mh.NoSpace:
			c.noSpace++
		}
	}
	return c
}

// clusterID is the cluster ID most members report, in hex; empty when none reports one (K3s).
func clusterID(s *etcd.Snapshot) string {
	counts := map[uint64]int{}
	var best uint64
	for _, ev := range s.Evidence {
		if ev.ClusterID == 0 {
			continue
		}
		counts[ev.ClusterID]++
		if counts[ev.ClusterID] > counts[best] || (counts[ev.ClusterID] == counts[best] && ev.ClusterID < best) {
			best = ev.ClusterID
		}
	}
	if best == 0 {
		return ""
	}
	return strconv.FormatUint(best, 16)
}

// markMembersUnknown keeps the last member list when etcd cannot be observed, but claims nothing
// about their health any more.
func markMembersUnknown(st *v1alpha1.ControlPlaneEtcdStatus, cause metav1.Condition) {
	for i := range st.Members {
		st.Members[i].Health = v1alpha1.MemberUnknown
		st.Members[i].Reason = cause.Reason
		st.Members[i].Message = cause.Message
	}
	st.HealthyVoters = ptr.To(int32(0))
	st.FaultTolerance = ptr.To(int32(0))
}

func setUnobservedConditions(s *scope, cause metav1.Condition) {
	conditions.Set(s.cpe, metav1.Condition{Type: v1alpha1.AvailableCondition, Status: metav1.ConditionUnknown,
		Reason: v1alpha1.AvailableEtcdUnreachableReason, Message: cause.Message})
	conditions.Set(s.cpe, metav1.Condition{Type: v1alpha1.DegradedCondition, Status: metav1.ConditionUnknown,
		Reason: v1alpha1.DegradedEtcdUnreachableReason, Message: cause.Message})
}

// setAvailability sets Available (can etcd commit, etcd.AssessQuorum: the rule the quorum guard
// decides on) and Degraded (is any margin lost). When the majority depends on voters whose health
// is Unknown, both conditions are Unknown (QuorumUnknown): every K3s heartbeat stale says nothing
// about etcd itself. c gives the counts the messages show.
func setAvailability(s *scope, quorum etcd.QuorumState, c voterCounts) {
	avail := metav1.Condition{Type: v1alpha1.AvailableCondition}
	degraded := metav1.Condition{Type: v1alpha1.DegradedCondition}
	counts := fmt.Sprintf("%d of %d voting members are healthy", c.healthy, c.voters)
	if c.noSpace > 0 {
		counts += fmt.Sprintf(", and %d of them refuse writes with a NOSPACE alarm but still vote", c.noSpace)
	}
	switch {
	case c.voters == 0:
		avail.Status, avail.Reason, avail.Message = metav1.ConditionFalse, v1alpha1.AvailableNoMembersReason, "Etcd reports no voting member"
		degraded.Status, degraded.Reason, degraded.Message = metav1.ConditionTrue, v1alpha1.DegradedQuorumLostReason, avail.Message
	case quorum == etcd.QuorumUnknown:
		avail.Status, avail.Reason = metav1.ConditionUnknown, v1alpha1.AvailableQuorumUnknownReason
		avail.Message = fmt.Sprintf("%s and the health of %d is unknown; whether etcd can commit depends on them", counts, c.unknown)
		degraded.Status, degraded.Reason, degraded.Message = metav1.ConditionUnknown, v1alpha1.DegradedQuorumUnknownReason, avail.Message
	case quorum == etcd.QuorumLost:
		avail.Status, avail.Reason, avail.Message = metav1.ConditionFalse, v1alpha1.AvailableQuorumLostReason, counts+"; etcd cannot commit"
		degraded.Status, degraded.Reason, degraded.Message = metav1.ConditionTrue, v1alpha1.DegradedQuorumLostReason, avail.Message
	case c.healthy < c.voters || anyUnhealthy(s.cpe.Status.Members):
		avail.Status, avail.Reason, avail.Message = metav1.ConditionTrue, v1alpha1.AvailableQuorumAvailableReason, counts
		degraded.Status, degraded.Reason, degraded.Message = metav1.ConditionTrue, v1alpha1.DegradedMembersUnhealthyReason, unhealthyNames(s.cpe.Status.Members)
	default:
		avail.Status, avail.Reason, avail.Message = metav1.ConditionTrue, v1alpha1.AvailableQuorumHealthyReason, ""
		degraded.Status, degraded.Reason = metav1.ConditionFalse, v1alpha1.DegradedAsExpectedReason
	}
	conditions.Set(s.cpe, avail)
	conditions.Set(s.cpe, degraded)
}

func anyUnhealthy(members []v1alpha1.EtcdMemberStatus) bool {
	return slices.ContainsFunc(members, func(m v1alpha1.EtcdMemberStatus) bool { return m.Health != v1alpha1.MemberHealthy })
}

func unhealthyNames(members []v1alpha1.EtcdMemberStatus) string {
	var lines []string
	for _, m := range members {
		if m.Health != v1alpha1.MemberHealthy {
			name := m.Name
			if name == "" {
				name = m.ID
			}
			lines = append(lines, fmt.Sprintf("* Member %s (%s): %s", name, m.Health, m.Message))
		}
	}
	return joinLines(lines)
}

func joinLines(lines []string) string {
	out := ""
	for i, l := range lines {
		if i > 0 {
			out += "\n"
		}
		out += l
	}
	return out
}

// setProgressing says whether a membership change is under way or blocked.
func setProgressing(s *scope) {
	if s.progressing != nil {
		conditions.Set(s.cpe, *s.progressing)
		return
	}
	conditions.Set(s.cpe, metav1.Condition{Type: v1alpha1.ProgressingCondition, Status: metav1.ConditionFalse,
		Reason: v1alpha1.ProgressingReconciledReason})
}
