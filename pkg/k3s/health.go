package k3s

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// statusCheckFailedPrefix starts K3s's Unhealthy message when its Status call to the member
// failed (K3s etcd contract, the condition's table).
const statusCheckFailedPrefix = "failed to check etcd member status"

// report is what one etcd Node tells about its member: the member (nil when the Node hosts
// none) and the evidence about it.
type report struct {
	member   *etcd.Member
	evidence etcd.MemberEvidence
}

// assessNodes assesses every etcd Node; those that host no member are left out. Before K3s
// 1.29.3 a condition may be about another Node's member (K3s matched by name prefix), and then
// it is not trusted.
func assessNodes(nodes []*corev1.Node, now time.Time, staleAfter time.Duration) []report {
	all := make([]etcdNode, 0, len(nodes))
	for _, n := range nodes {
		all = append(all, readNode(n))
	}
	var out []report
	for _, e := range all {
		r := assessNode(e, now, staleAfter)
		if r.member == nil {
			continue
		}
		if twin := prefixTwin(e, all); twin != nil && r.evidence.Contact != etcd.ContactUnknown {
			r.member.IsLearner = false
			r.evidence.Contact, r.evidence.Errors = etcd.ContactUnknown, nil
			r.evidence.Error = fmt.Sprintf("K3s %s matches members to Nodes by the prefix %q, which member %s of Node %s has too, so the EtcdIsVoter condition of Node %s may be about that member (fixed in K3s 1.29.3)",
				e.version, e.node.Name+"-", twin.memberName, twin.node.Name, e.node.Name)
		}
		out = append(out, r)
	}
	return out
}

// prefixTwin returns another etcd Node whose member K3s before 1.29.3 would also match to e's
// Node (its member name starts with "<e's Node name>-"), or nil when there is none or K3s
// matches exactly.
func prefixTwin(e etcdNode, all []etcdNode) *etcdNode {
	if e.versionErr != nil || e.version.ExactMemberMatch() {
		return nil
	}
	for i, o := range all {
		if o.node.Name != e.node.Name && o.hostsMember() && strings.HasPrefix(o.memberName, e.node.Name+"-") {
			return &all[i]
		}
	}
	return nil
}

// assessNode turns one etcd Node into a report, as of now. Whatever cannot be trusted (no
// condition on this K3s version, a stale heartbeat, an unknown reason, a Node that went
// NotReady after K3s last reported) is Contact Unknown with a reason that says which, never
// healthy.
func assessNode(e etcdNode, now time.Time, staleAfter time.Duration) report {
	if !e.hostsMember() {
		return report{}
	}
	unknown := func(observedAt time.Time, format string, args ...any) report {
		m := e.member(false)
		return report{member: &m, evidence: etcd.MemberEvidence{MemberID: m.ID, NodeName: e.node.Name,
			Contact: etcd.ContactUnknown, ObservedAt: observedAt, Error: fmt.Sprintf(format, args...)}}
	}
	cond := e.voterCondition()
	switch {
	case e.versionErr != nil:
		return unknown(now, "Node %s: %v, so this backend does not know which K3s rules apply", e.node.Name, e.versionErr)
	case !e.version.HasEtcdIsVoter():
		return unknown(now, "K3s %s on Node %s is older than 1.26.11 / 1.27.8 / 1.28.4 and writes no EtcdIsVoter condition, so etcd member health cannot be read from Nodes", e.version, e.node.Name)
	case cond == nil:
		return unknown(now, "Node %s has no EtcdIsVoter condition yet; the etcd leader's K3s writes it every %s", e.node.Name, DefaultTick)
	}
	heartbeat := cond.LastHeartbeatTime.Time
	if age := now.Sub(heartbeat); age > staleAfter {
		return unknown(heartbeat, "the EtcdIsVoter condition of Node %s was last refreshed %s ago; the etcd leader's K3s re-writes it at least every %s, so it stopped reporting (K3s down, no etcd leader, or no apiserver access)",
			e.node.Name, age.Truncate(100*time.Millisecond), staleAfter)
	}
	if !e.version.ExactMemberMatch() && !strings.HasPrefix(e.memberName, e.node.Name+"-") {
		return unknown(heartbeat, "K3s %s matches members to Nodes by the prefix %q, which member %s does not have, so the EtcdIsVoter condition of Node %s may be about another member",
			e.version, e.node.Name+"-", e.memberName, e.node.Name)
	}
	return fromCondition(e, cond)
}

// fromCondition reads a fresh EtcdIsVoter condition (K3s etcd contract, the condition's table).
func fromCondition(e etcdNode, cond *corev1.NodeCondition) report {
	heartbeat := cond.LastHeartbeatTime.Time
	m := e.member(cond.Reason == ReasonMemberIsLearner)
	ev := etcd.MemberEvidence{MemberID: m.ID, NodeName: e.node.Name, Contact: etcd.ContactAnswered, ObservedAt: heartbeat}
	switch cond.Reason {
	case ReasonNotAMember:
		// K3s says no member matches this Node: it hosts none, whatever node-name still says.
		return report{}
	case ReasonUnhealthy:
		// K3s's message is passed through as is. "failed to check etcd member status: ..." is
		// the leader's Status call failing: the member does not answer. Anything else ("etcd
		// member has status errors: ...") is a member that answered with errors.
		if strings.HasPrefix(cond.Message, statusCheckFailedPrefix) {
			ev.Contact, ev.Error = etcd.ContactUnreachable, cond.Message
		} else {
			ev.Errors = []string{cond.Message}
		}
		return report{member: &m, evidence: ev}
	case ReasonMemberIsLearner, ReasonMemberNotLearner:
	default:
		ev.Contact, ev.Error = etcd.ContactUnknown, fmt.Sprintf("Node %s has an EtcdIsVoter condition with reason %q, which this backend does not know (message: %s)", e.node.Name, cond.Reason, cond.Message)
		return report{member: &m, evidence: ev}
	}
	if !e.version.HasHealthReasons() {
		ev.Contact, ev.Error = etcd.ContactUnknown, fmt.Sprintf("K3s %s reports etcd member %s as a %s but checks no member health (that came with 1.26.13 / 1.27.10 / 1.28.6 / 1.29.1), so its health is unknown",
			e.version, m.Name, votingRole(m))
		return report{member: &m, evidence: ev}
	}
	if msg := readySince(e.node, heartbeat); msg != "" {
		ev.Contact, ev.Error = etcd.ContactUnknown, msg
	}
	return report{member: &m, evidence: ev}
}

// readySince says why a healthy-looking condition cannot be trusted: the Node stopped being
// Ready after K3s last reported on the member. K3s re-writes an unchanged condition only every
// 5 minutes, so until it reports again nothing says the member survived what stopped the Node.
func readySince(n *corev1.Node, heartbeat time.Time) string {
	ready := nodeCondition(n, corev1.NodeReady)
	if ready == nil || ready.Status == corev1.ConditionTrue || !ready.LastTransitionTime.After(heartbeat) {
		return ""
	}
	return fmt.Sprintf("Node %s is Ready=%s (%s) since %s, after K3s last reported on its etcd member at %s; its health since then is unknown",
		n.Name, ready.Status, ready.Reason, ready.LastTransitionTime.UTC().Format(time.RFC3339), heartbeat.UTC().Format(time.RFC3339))
}

func votingRole(m etcd.Member) string {
	if m.IsLearner {
		return "learner"
	}
	return "voter"
}
