package k3s

import (
	"fmt"
	"net"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// removalStep is what RemoveMember must do for a Node as it is now: report a result, fail,
// request the removal from K3s, or record that K3s's claim was confirmed.
type removalStep struct {
	result  etcd.Removal
	err     error
	request bool
	// confirm asks to record (K3sRemovalConfirmedAnnotation) that the removal of the recorded
	// member was confirmed, so a later rename is told apart from a cluster reset.
	confirm bool
	// member is the member to record and remove when request is set.
	member etcd.Member
	// recheckAt, when set, is when the evidence awaited is due without a Node event (a
	// NotAMember condition that must survive one more pass of K3s's leader).
	recheckAt time.Time
}

// clusterView is what the other etcd Nodes tell about a removal on one Node.
type clusterView struct {
	// rules are the cluster's K3s rules (rulesOf).
	rules clusterRules
	// others is how many other etcd Nodes host a member.
	others int
	// twins are the other etcd Nodes whose node-name names the same member.
	twins []string
	// notHealthy describes the other members that are not reported healthy.
	notHealthy []string
	// tick is how often K3s's leader re-checks members (Config.Tick).
	tick time.Duration
}

// decideRemoval applies the client rule that works on every K3s version to the Node that hosts (or hosted)
// member m, n being nil when the Node does not exist: record node-name before setting remove;
// K3s's removed-node-name is a claim that counts only with evidence that agrees; rejected when
// remove disappeared and removed-node-name did not appear. It acts only while the Node's
// node-name still names m. It does no I/O.
func decideRemoval(m etcd.Member, n *corev1.Node, v clusterView, now time.Time) removalStep {
	if n == nil {
		return done(m, fmt.Sprintf("Node %s does not exist; K3s's finalizer removes a Node's etcd member before it lets the Node go", m.NodeName))
	}
	e := readNode(n)
	if n.Annotations[RemovingMemberAnnotation] == m.Name {
		return followRemoval(e, m, v, now)
	}
	return startRemoval(e, m, v, now)
}

// followRemoval reports on the removal of m this project requested.
func followRemoval(e etcdNode, m etcd.Member, v clusterView, now time.Time) removalStep {
	k, n := e.keys, e.node
	m = etcd.Member{ID: MemberID(m.Name), Name: m.Name, NodeName: n.Name}
	remove := n.Annotations[k.Remove]
	switch {
	case n.Annotations[k.RemovedNodeName] == m.Name:
		return judgeClaim(e, m, v, requestedAt(n), now)
	case e.memberName != "" && e.memberName != m.Name:
		return renamed(e, m)
	case isTrue(remove):
		return inProgress(m, waitingMessage(e, m.Name, v, now))
	}
	return removalStep{result: etcd.Removal{State: etcd.RemovalRejected, Member: m, Reason: fmt.Sprintf(
		"K3s refused: it would leave too few started members (K3s deleted %s without writing %s; the detail is only in K3s's log). The removal of etcd member %s is not requested again until the request is withdrawn (annotation %s deleted, as a retry does)",
		k.Remove, k.RemovedNodeName, m.Name, RemovingMemberAnnotation)}}
}

// judgeClaim weighs K3s's removed-node-name claim against what else the Node shows. K3s writes
// the claim also when no member matched the Node's node-address (the Node's IP changed after
// its member joined): then the member's server still runs and its metadata controller writes
// node-name back. A real removal stops the server; on K3s with the NotAMember reason the
// leader's next pass marks the Node NotAMember, before that the Node goes NotReady.
func judgeClaim(e etcdNode, m etcd.Member, v clusterView, asked, now time.Time) removalStep {
	k, n := e.keys, e.node
	if e.memberName == m.Name {
		return removalStep{result: etcd.Removal{State: etcd.RemovalRejected, Member: m, Reason: fmt.Sprintf(
			"K3s wrote %s=%s but member %s is still running: its server wrote %s back. K3s removes only a member whose peer address is %s=%s, and counts no match as success, so the Node's address probably changed after the member joined. K3s will not try again; the member must be removed through etcd",
			k.RemovedNodeName, m.Name, m.Name, k.NodeName, k.NodeAddress, e.address)}}
	}
	if n.Annotations[RemovalConfirmedAnnotation] == m.Name {
		return done(m, fmt.Sprintf("K3s removed etcd member %s (%s=%s, confirmed earlier)", m.Name, k.RemovedNodeName, m.Name))
	}
	ev, recheckAt := claimEvidence(n, v.rules, asked, now, v.tick)
	if ev != "" {
		r := done(m, fmt.Sprintf("K3s removed etcd member %s (%s=%s, and %s)", m.Name, k.RemovedNodeName, m.Name, ev))
		r.confirm = true
		return r
	}
	r := inProgress(m, fmt.Sprintf(
		"K3s wrote %s=%s, which it also writes when no member matched the Node's address; waiting for evidence that agrees: %s",
		k.RemovedNodeName, m.Name, missingEvidence(v.rules)))
	r.recheckAt = recheckAt
	return r
}

// claimEvidence returns the evidence that a claimed removal happened, "" when there is none
// yet, and when to look again without an event. Where K3s writes NotAMember: a NotAMember
// condition written since the request that stayed through one more pass of the leader (every
// tick): a server whose member is still there writes node-name back at once, and the next pass
// then matches its member again. Where K3s writes no NotAMember: the Node gone NotReady since
// the request (the removed server's apiserver lost its etcd).
func claimEvidence(n *corev1.Node, rules clusterRules, asked, now time.Time, tick time.Duration) (string, time.Time) {
	if rules.known() && rules.health {
		cond := nodeCondition(n, EtcdIsVoterCondition)
		notAMember := cond != nil && cond.Reason == ReasonNotAMember
		if notAMember && !cond.LastTransitionTime.Time.Before(asked) {
			marked := fmt.Sprintf("the etcd leader's K3s has marked Node %s NotAMember since %s", n.Name, cond.LastTransitionTime.UTC().Format(time.RFC3339))
			if stopped := serverStopped(n, asked); stopped != "" {
				return marked + ", and " + stopped, time.Time{}
			}
			if settled := cond.LastTransitionTime.Add(tick); now.Before(settled) && !notReady(n) {
				return "", settled
			}
			return marked, time.Time{}
		}
		if notAMember && notReady(n) {
			// A member that was already down when the removal was asked: its condition was False
			// before and only its reason changed (a reason change keeps lastTransitionTime), and
			// its Node went NotReady before too. NotAMember on a Node that is not Ready now says
			// the same as a fresh one: no member is left for it, and its server is not running to
			// write node-name back.
			return fmt.Sprintf("the etcd leader's K3s marks Node %s NotAMember and the Node is not Ready: its server is down and has no member", n.Name), time.Time{}
		}
		return "", time.Time{}
	}
	return serverStopped(n, asked), time.Time{}
}

// notReady reports whether the Node's Ready condition is present and not True.
func notReady(n *corev1.Node) bool {
	ready := nodeCondition(n, corev1.NodeReady)
	return ready != nil && ready.Status != corev1.ConditionTrue
}

// serverStopped says that the Node went NotReady since the request: the removed server's
// apiserver lost its etcd, and its kubelet its API; "" when it did not.
func serverStopped(n *corev1.Node, asked time.Time) string {
	ready := nodeCondition(n, corev1.NodeReady)
	if ready == nil || ready.Status == corev1.ConditionTrue || ready.LastTransitionTime.Time.Before(asked) {
		return ""
	}
	return fmt.Sprintf("Node %s went Ready=%s at %s: the removed server stopped", n.Name, ready.Status, ready.LastTransitionTime.UTC().Format(time.RFC3339))
}

func missingEvidence(rules clusterRules) string {
	if rules.known() && rules.health {
		return fmt.Sprintf("the etcd leader's K3s marks a Node whose member is gone NotAMember on its next pass (every %s)", DefaultTick)
	}
	return fmt.Sprintf("K3s %s writes no NotAMember, so the removed server stopping (its Node going NotReady) is awaited", rules)
}

// renamed reports a Node whose node-name changed away from the recorded member. K3s renames a
// member when a removed server rejoins, and when a cluster reset renames the surviving member
// (then it also deletes remove and removed-node-name everywhere): only a confirmed claim, or
// legacy K3s's remove="false" (its answer to a rejoin after a removal), tells a removal.
func renamed(e etcdNode, m etcd.Member) removalStep {
	k, n := e.keys, e.node
	if n.Annotations[RemovalConfirmedAnnotation] == m.Name || n.Annotations[k.Remove] == "false" {
		return done(m, fmt.Sprintf("etcd member %s was removed and Node %s rejoined etcd as the new member %s, which is left alone; remove it by its new name",
			m.Name, n.Name, e.memberName))
	}
	return removalStep{result: etcd.Removal{State: etcd.RemovalRejected, Member: m, Reason: fmt.Sprintf(
		"Node %s now hosts etcd member %s, and the removal of %s was never confirmed: a cluster reset renames the surviving member (and deletes %s and %s), so %s may be %s under a new name. Not reported removed; the new member is left alone",
		n.Name, e.memberName, m.Name, k.Remove, k.RemovedNodeName, e.memberName, m.Name)}}
}

// waitingMessage says what a removal waits on, and since when.
func waitingMessage(e etcdNode, member string, v clusterView, now time.Time) string {
	since := "an unknown time"
	if at := requestedAt(e.node); !at.IsZero() {
		since = now.Sub(at).Round(time.Second).String()
	}
	msg := fmt.Sprintf("waiting on K3s to remove etcd member %s: %s=true was set %s ago and K3s has not written %s yet (K3s's member controller runs leader-elected on the servers, Lease %s)",
		member, e.keys.Remove, since, e.keys.RemovedNodeName, v.rules.leaseName())
	if len(v.notHealthy) > 0 {
		msg += fmt.Sprintf("; another member is not healthy (%s), and etcd refuses to remove a member then (\"etcdserver: unhealthy cluster\"): K3s retries with backoff and keeps %s=true as a standing order that removes %s whenever the cluster recovers, even if you gave up; withdraw it with WithdrawRemoval",
			strings.Join(v.notHealthy, "; "), e.keys.Remove, member)
	}
	if v.rules.known() && v.rules.retriesRejection {
		msg += fmt.Sprintf("; K3s %s retries a refused removal instead of clearing %s, so a long wait may be a refusal: look for \"not enough started members\" in K3s's log", v.rules, e.keys.Remove)
	}
	return msg
}

// startRemoval decides whether to request the removal of member m on its Node. A record of an
// earlier member (the Node rejoined under a new name) does not block it.
func startRemoval(e etcdNode, m etcd.Member, v clusterView, now time.Time) removalStep {
	k, n := e.keys, e.node
	removed := n.Annotations[k.RemovedNodeName]
	switch {
	case !n.DeletionTimestamp.IsZero():
		return inProgress(e.member(false), fmt.Sprintf("Node %s is being deleted; K3s's finalizer removes its etcd member before the Node goes", n.Name))
	case !isEtcdNode(n):
		return fail("Node %s is not an etcd Node (no %s=true label)", n.Name, EtcdRoleLabel)
	case removed == m.Name && e.memberName != m.Name:
		// Removed earlier, not at this backend's request: the claim needs evidence too.
		return judgeClaim(e, m, v, time.Time{}, now)
	case !e.hostsMember():
		return fail("Node %s has no %s annotation: K3s has not registered an etcd member on it", n.Name, k.NodeName)
	case e.memberName != m.Name:
		return fail("Node %s hosts etcd member %s, not %s: observe again and name the member as the new snapshot gives it", n.Name, e.memberName, m.Name)
	}
	if err := unfitForRemoval(e, v); err != nil {
		return removalStep{err: err}
	}
	if removed == e.memberName {
		return judgeClaim(e, m, v, time.Time{}, now)
	}
	if v.others == 0 {
		return removalStep{result: etcd.Removal{State: etcd.RemovalRejected, Member: e.member(false), Reason: fmt.Sprintf(
			"Node %s hosts the last etcd member (%s): this backend never asks K3s to remove the last etcd Node's member", n.Name, e.memberName)}}
	}
	return removalStep{request: true, member: e.member(false)}
}

// unfitForRemoval refuses Nodes on which K3s would claim a removal it did not make, or remove
// another member: a member named by several Nodes, and a node-address that is missing or not
// an IP (K3s matches the member by peer address, and counts no match as success).
func unfitForRemoval(e etcdNode, v clusterView) error {
	switch {
	case len(v.twins) > 0:
		return fmt.Errorf("%w: etcd member %s is named by the %s annotation of Node %s and of %s; this backend does not ask K3s to remove a member whose Node it cannot tell",
			etcd.ErrInvalidInput, e.memberName, e.keys.NodeName, e.node.Name, strings.Join(v.twins, ", "))
	case net.ParseIP(e.address) == nil:
		return fmt.Errorf("%w: Node %s's %s annotation %q is not an IP address: K3s would match no member and claim a removal it never made",
			etcd.ErrInvalidInput, e.node.Name, e.keys.NodeAddress, e.address)
	}
	return nil
}

// requestedAt is when this backend requested the removal on n; zero when unknown.
func requestedAt(n *corev1.Node) time.Time {
	at, err := time.Parse(time.RFC3339, n.Annotations[RemovalRequestedAtAnnotation])
	if err != nil {
		return time.Time{}
	}
	return at
}

func inProgress(m etcd.Member, reason string) removalStep {
	return removalStep{result: etcd.Removal{State: etcd.RemovalInProgress, Member: m, Reason: reason}}
}

func done(m etcd.Member, reason string) removalStep {
	return removalStep{result: etcd.Removal{State: etcd.RemovalRemoved, Member: m, Reason: reason}}
}

func fail(format string, args ...any) removalStep {
	return removalStep{err: fmt.Errorf("%w: "+format, append([]any{etcd.ErrInvalidInput}, args...)...)}
}
