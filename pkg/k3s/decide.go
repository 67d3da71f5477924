package k3s

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

// removalStep is what RemoveMember must do for a Node as it is now: report a result, fail, or
// request the removal from K3s (and then report what the patched Node says).
type removalStep struct {
	result  etcd.Removal
	err     error
	request bool
	// member is the member to record and remove when request is set.
	member etcd.Member
}

// decideRemoval applies the K3s contract's client rule to a Node (nil when it does not exist):
// record node-name before setting remove; done when removed-node-name is non-empty; rejected
// when remove disappeared and removed-node-name did not appear; never rely on remove staying.
// otherMembers is how many other etcd Nodes host a member. It does no I/O.
func decideRemoval(name string, n *corev1.Node, otherMembers int, now time.Time) removalStep {
	if n == nil {
		return done(etcd.Member{NodeName: name}, fmt.Sprintf("Node %s does not exist; K3s's finalizer removes a Node's etcd member before it lets the Node go", name))
	}
	e := readNode(n)
	if recorded := n.Annotations[v1alpha1.K3sRemovingMemberAnnotation]; recorded != "" {
		return followRemoval(e, recorded, now)
	}
	return startRemoval(e, otherMembers)
}

// followRemoval reports on a removal this project requested for member recorded.
func followRemoval(e etcdNode, recorded string, now time.Time) removalStep {
	k, n := e.keys, e.node
	m := etcd.Member{ID: MemberID(recorded), Name: recorded, NodeName: n.Name}
	removed, remove, hasRemove := n.Annotations[k.RemovedNodeName], n.Annotations[k.Remove], hasKey(n, k.Remove)
	switch {
	case removed == recorded:
		msg := fmt.Sprintf("K3s removed etcd member %s (%s=%s)", recorded, k.RemovedNodeName, removed)
		if isTrue(remove) {
			msg += fmt.Sprintf("; %s=true stays on this K3s version and is not set again", k.Remove)
		}
		return done(m, msg)
	case e.memberName != "" && e.memberName != recorded:
		// K3s picks a new member name only when a removed server starts again, so the recorded
		// member is gone; the new one must not be removed on the strength of an old request.
		return done(m, fmt.Sprintf("etcd member %s was removed and Node %s rejoined etcd as the new member %s, which is left alone; delete annotation %s to allow removing it",
			recorded, n.Name, e.memberName, v1alpha1.K3sRemovingMemberAnnotation))
	case hasRemove && isTrue(remove):
		return removalStep{result: etcd.Removal{State: etcd.RemovalInProgress, Member: m, Reason: waitingMessage(e, recorded, now)}}
	}
	return removalStep{result: etcd.Removal{State: etcd.RemovalRejected, Member: m, Reason: fmt.Sprintf(
		"K3s refused: it would leave too few started members (K3s deleted %s without writing %s; the detail is only in K3s's log). The removal of etcd member %s is not requested again; delete annotation %s to allow a new request",
		k.Remove, k.RemovedNodeName, recorded, v1alpha1.K3sRemovingMemberAnnotation)}}
}

// waitingMessage says what a removal waits on, and since when.
func waitingMessage(e etcdNode, recorded string, now time.Time) string {
	since := "an unknown time"
	if at, err := time.Parse(time.RFC3339, e.node.Annotations[v1alpha1.K3sRemovalRequestedAtAnnotation]); err == nil {
		since = now.Sub(at).Round(time.Second).String()
	}
	msg := fmt.Sprintf("waiting on K3s to remove etcd member %s: %s=true was set %s ago and K3s has not written %s yet (K3s's member controller runs leader-elected on the servers, Lease kube-system/k3s-etcd)",
		recorded, e.keys.Remove, since, e.keys.RemovedNodeName)
	if e.versionErr == nil && e.version.RetriesRejection() {
		msg += fmt.Sprintf("; K3s %s retries a refused removal instead of clearing %s, so a long wait may be a refusal: look for \"not enough started members\" in K3s's log", e.version, e.keys.Remove)
	}
	return msg
}

// startRemoval decides whether to request the removal of the member a Node hosts.
func startRemoval(e etcdNode, otherMembers int) removalStep {
	k, n := e.keys, e.node
	removed := n.Annotations[k.RemovedNodeName]
	switch {
	case !n.DeletionTimestamp.IsZero():
		return removalStep{result: etcd.Removal{State: etcd.RemovalInProgress, Member: e.member(false),
			Reason: fmt.Sprintf("Node %s is being deleted; K3s's finalizer removes its etcd member before the Node goes", n.Name)}}
	case !e.hostsMember() && removed != "":
		return done(etcd.Member{ID: MemberID(removed), Name: removed, NodeName: n.Name},
			fmt.Sprintf("etcd member %s was already removed (%s), not at this backend's request", removed, k.RemovedNodeName))
	case !isEtcdNode(n):
		return fail("Node %s is not an etcd Node (no %s=true label)", n.Name, EtcdRoleLabel)
	case !e.hostsMember():
		return fail("Node %s has no %s annotation: K3s has not registered an etcd member on it", n.Name, k.NodeName)
	case removed == e.memberName:
		return done(e.member(false), fmt.Sprintf("etcd member %s was already removed (%s)", removed, k.RemovedNodeName))
	case otherMembers == 0:
		return removalStep{result: etcd.Removal{State: etcd.RemovalRejected, Member: e.member(false), Reason: fmt.Sprintf(
			"Node %s hosts the last etcd member (%s): this backend never asks K3s to remove the last etcd Node's member", n.Name, e.memberName)}}
	}
	return removalStep{request: true, member: e.member(false)}
}

func done(m etcd.Member, reason string) removalStep {
	return removalStep{result: etcd.Removal{State: etcd.RemovalRemoved, Member: m, Reason: reason}}
}

func fail(format string, args ...any) removalStep {
	return removalStep{err: fmt.Errorf("%w: "+format, append([]any{etcd.ErrInvalidInput}, args...)...)}
}

func hasKey(n *corev1.Node, key string) bool {
	_, ok := n.Annotations[key]
	return ok
}
