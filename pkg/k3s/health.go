package k3s

import (
	"fmt"
	"net"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// statusCheckFailedPrefix starts K3s's Unhealthy message when its Status call to the member
// failed (K3s pkg/etcd/etcd.go, the leader's member-status pass).
const statusCheckFailedPrefix = "failed to check etcd member status"

// report is what one etcd Node tells about its member: the member (nil when the Node hosts
// none) and the evidence about it.
type report struct {
	member   *etcd.Member
	evidence etcd.MemberEvidence
}

// clock is the time a read is made at and how much K3s's timestamps are trusted.
type clock struct {
	now time.Time
	// staleAfter is the age after which a heartbeat means K3s stopped reporting.
	staleAfter time.Duration
	// skew is how far in the future a heartbeat may be before it is not believed.
	skew time.Duration
}

// assessNodes assesses every etcd Node by the cluster's rules (rulesOf); those that host no
// member are left out. A member named by two Nodes is reported once, Unknown, on the first.
func assessNodes(nodes []*corev1.Node, c clock) []report {
	all := make([]etcdNode, 0, len(nodes))
	for _, n := range nodes {
		all = append(all, readNode(n))
	}
	rules := rulesOf(all)
	named := namedBy(all)
	var out []report
	for _, e := range all {
		r := assessNode(e, rules, c)
		if r.member == nil {
			continue
		}
		if hosts := named[e.memberName]; len(hosts) > 1 {
			if hosts[0] != e.node.Name {
				// Counted once: the problem is reported on the member's first Node.
				continue
			}
			distrust(&r, duplicateMessage(e, hosts))
		}
		if twin := prefixTwin(e, rules, all); twin != nil {
			distrust(&r, fmt.Sprintf("K3s %s matches members to Nodes by the prefix %q, which member %s of Node %s has too, so the EtcdIsVoter condition of Node %s may be about that member (exact matching came with 1.29.3 / 1.28.8 / 1.27.12 / 1.26.15)",
				rules, e.node.Name+"-", twin.memberName, twin.node.Name, e.node.Name))
		}
		out = append(out, r)
	}
	return out
}

// distrust turns a report into Unknown with msg, unless it already is Unknown.
func distrust(r *report, msg string) {
	if r.evidence.Contact == etcd.ContactUnknown {
		return
	}
	r.member.IsLearner = false
	r.evidence.Contact, r.evidence.Errors, r.evidence.Error = etcd.ContactUnknown, nil, msg
}

// namedBy maps each member name to the etcd Nodes whose node-name annotation names it, sorted.
func namedBy(all []etcdNode) map[string][]string {
	out := map[string][]string{}
	for _, e := range all {
		if e.hostsMember() {
			out[e.memberName] = append(out[e.memberName], e.node.Name)
		}
	}
	return out
}

func duplicateMessage(e etcdNode, hosts []string) string {
	return fmt.Sprintf("etcd member %s is named by the %s annotation of %d Nodes (%s): K3s's metadata controller writes it only on a server's own Node, so one of them was copied or hand-edited; the member is counted once, its health is unknown, and it is never asked to be removed",
		e.memberName, e.keys.NodeName, len(hosts), strings.Join(hosts, ", "))
}

// prefixTwin returns another etcd Node whose member K3s's prefix match would also match to e's
// Node (its member name starts with "<e's Node name>-"), or nil when there is none or the
// cluster's K3s matches exactly.
func prefixTwin(e etcdNode, rules clusterRules, all []etcdNode) *etcdNode {
	if !rules.known() || rules.exact {
		return nil
	}
	for i, o := range all {
		if o.node.Name != e.node.Name && o.hostsMember() && strings.HasPrefix(o.memberName, e.node.Name+"-") {
			return &all[i]
		}
	}
	return nil
}

// assessNode turns one etcd Node into a report, by the cluster's rules, as of c.now. Whatever
// cannot be trusted (no condition on this K3s version, a stale or future heartbeat, a status
// or reason this backend does not know, an address K3s cannot match, a Node that went NotReady
// after K3s last reported) is Contact Unknown with a reason that says which, never healthy.
func assessNode(e etcdNode, rules clusterRules, c clock) report {
	if !e.hostsMember() {
		return report{}
	}
	cond := e.voterCondition()
	if cond != nil && cond.Reason == ReasonNotAMember && cond.Status == corev1.ConditionFalse && rules.known() && rules.health && fresh(cond, c) == "" {
		// K3s says no member matches this Node: it hosts none, whatever node-name still says.
		return report{}
	}
	if msg := untrusted(e, rules, cond, c); msg != "" {
		at := c.now
		if cond != nil && !cond.LastHeartbeatTime.IsZero() && !cond.LastHeartbeatTime.After(c.now) {
			at = cond.LastHeartbeatTime.Time
		}
		m := e.member(false)
		return report{member: &m, evidence: etcd.MemberEvidence{MemberID: m.ID, NodeName: e.node.Name,
			Contact: etcd.ContactUnknown, ObservedAt: at, Error: msg}}
	}
	return fromCondition(e, rules, cond)
}

// untrusted says why the Node's condition cannot be read as evidence; "" when it can.
func untrusted(e etcdNode, rules clusterRules, cond *corev1.NodeCondition, c clock) string {
	switch {
	case !rules.known():
		return fmt.Sprintf("%v, so this backend does not know which K3s rules apply", rules.err)
	case !rules.voter:
		return fmt.Sprintf("K3s %s is older than 1.25.16 / 1.26.11 / 1.27.8 / 1.28.4 and writes no EtcdIsVoter condition, so etcd member health cannot be read from Nodes", rules)
	case e.address != "" && net.ParseIP(e.address) == nil:
		return fmt.Sprintf("Node %s's %s annotation %q is not an IP address: K3s matches a member by its peer address, so what K3s reports about this Node cannot be tied to member %s", e.node.Name, e.keys.NodeAddress, e.address, e.memberName)
	case cond == nil:
		return fmt.Sprintf("Node %s has no EtcdIsVoter condition yet; the etcd leader's K3s writes it every %s", e.node.Name, DefaultTick)
	}
	if msg := fresh(cond, c); msg != "" {
		return fmt.Sprintf("the EtcdIsVoter condition of Node %s %s", e.node.Name, msg)
	}
	if !rules.exact && !strings.HasPrefix(e.memberName, e.node.Name+"-") {
		return fmt.Sprintf("K3s %s matches members to Nodes by the prefix %q, which member %s does not have, so the EtcdIsVoter condition of Node %s may be about another member",
			rules, e.node.Name+"-", e.memberName, e.node.Name)
	}
	return statusMismatch(e, cond)
}

// fresh says why a condition's heartbeat is not believed: too old (K3s stopped reporting) or
// in the future beyond the clock-skew margin (a clock or a writer this backend cannot trust).
func fresh(cond *corev1.NodeCondition, c clock) string {
	heartbeat := cond.LastHeartbeatTime.Time
	switch age := c.now.Sub(heartbeat); {
	case heartbeat.IsZero():
		return "has no lastHeartbeatTime"
	case age > c.staleAfter:
		return fmt.Sprintf("was last refreshed %s ago; the etcd leader's K3s re-writes it at least every %s, so it stopped reporting (K3s down, no etcd leader, or no apiserver access)",
			age.Truncate(100*time.Millisecond), c.staleAfter)
	case -age > c.skew:
		return fmt.Sprintf("has a lastHeartbeatTime %s in the future, more than the %s clock skew allowed, so it is not believed", (-age).Truncate(100*time.Millisecond), c.skew)
	}
	return ""
}

// statusMismatch says why a condition's status does not go with its reason as K3s writes them
// (True only with MemberNotLearner, False with the others); "" when it does or the reason is
// unknown (fromCondition reports that).
func statusMismatch(e etcdNode, cond *corev1.NodeCondition) string {
	want := corev1.ConditionFalse
	switch cond.Reason {
	case ReasonMemberNotLearner:
		want = corev1.ConditionTrue
	case ReasonMemberIsLearner, ReasonUnhealthy, ReasonNotAMember:
	default:
		return ""
	}
	if cond.Status == want {
		return ""
	}
	return fmt.Sprintf("Node %s has an EtcdIsVoter condition with status %q and reason %s; K3s writes that reason only with status %s, so this backend does not know what it means",
		e.node.Name, cond.Status, cond.Reason, want)
}

// fromCondition reads a fresh, consistent EtcdIsVoter condition (K3s pkg/etcd/etcd.go: True
// MemberNotLearner, False MemberIsLearner, False Unhealthy with the Status error, False
// NotAMember).
func fromCondition(e etcdNode, rules clusterRules, cond *corev1.NodeCondition) report {
	heartbeat := cond.LastHeartbeatTime.Time
	m := e.member(cond.Reason == ReasonMemberIsLearner)
	ev := etcd.MemberEvidence{MemberID: m.ID, NodeName: e.node.Name, Contact: etcd.ContactAnswered, ObservedAt: heartbeat}
	switch cond.Reason {
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
		// NotAMember reaches here only where K3s cannot write it (no health reasons).
		ev.Contact, ev.Error = etcd.ContactUnknown, fmt.Sprintf("Node %s has an EtcdIsVoter condition with reason %q, which this backend does not know for K3s %s (message: %s)", e.node.Name, cond.Reason, rules, cond.Message)
		return report{member: &m, evidence: ev}
	}
	if !rules.health {
		ev.Contact, ev.Error = etcd.ContactUnknown, fmt.Sprintf("K3s %s reports etcd member %s as a %s but checks no member health (that came with 1.26.13 / 1.27.10 / 1.28.6 / 1.29.1), so its health is unknown",
			rules, m.Name, votingRole(m))
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
