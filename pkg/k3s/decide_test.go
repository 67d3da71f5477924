package k3s

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
)

func Test_decideRemoval(t *testing.T) {
	const (
		old   = "cp-1-1a2b3c4d"
		fresh = "cp-1-5e6f7a8b"
	)
	asked := testNow.Add(-90 * time.Second)
	after, before := asked.Add(10*time.Second), asked.Add(-10*time.Second)
	current := rulesFor("v1.33.4+k3s1")
	tests := []struct {
		name      string
		target    string
		node      *corev1.Node
		view      clusterView
		request   bool
		confirm   bool
		recheck   time.Time
		state     etcd.RemovalState
		reason    string
		expectErr string
	}{
		{
			name: "A Node hosting the member, with others left, gets the request",
			node: etcdNodeObj("cp-1", "v1.33.4+k3s1", old), view: clusterView{rules: current, others: 2}, request: true,
		},
		{
			name: "Never the last etcd Node: rejected without asking K3s",
			node: etcdNodeObj("cp-1", "v1.33.4+k3s1", old), view: clusterView{rules: current}, state: etcd.RemovalRejected, reason: "last etcd member",
		},
		{
			name: "A Node without node-name is invalid input",
			node: etcdNodeObj("cp-1", "v1.33.4+k3s1", ""), view: clusterView{rules: current, others: 2}, expectErr: "has no",
		},
		{
			name: "A Node that is not an etcd Node is invalid input",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cp-1"}}, view: clusterView{others: 2}, expectErr: "not an etcd Node",
		},
		{
			name: "A Node whose node-name names another member is not touched: identity is re-checked",
			node: etcdNodeObj("cp-1", "v1.33.4+k3s1", fresh), view: clusterView{rules: current, others: 2}, expectErr: "hosts etcd member " + fresh + ", not " + old,
		},
		{
			name: "A member named by two Nodes is never asked to be removed",
			node: etcdNodeObj("cp-1", "v1.33.4+k3s1", old), view: clusterView{rules: current, others: 2, twins: []string{"cp-9"}}, expectErr: "cp-9",
		},
		{
			name: "A node-address that is not an IP is never asked: K3s would claim a removal it never made",
			node: etcdNodeObj("cp-1", "v1.33.4+k3s1", old, annotate(k3sKeys.NodeAddress, "cp-1.example.com")),
			view: clusterView{rules: current, others: 2}, expectErr: "not an IP address",
		},
		{
			name: "A Node that is gone was removed by K3s's finalizer",
			node: nil, state: etcd.RemovalRemoved, reason: "finalizer",
		},
		{
			name:  "removed-node-name alone is K3s's claim: in progress, saying the evidence it waits for",
			node:  etcdNodeObj("cp-1", "v1.34.2+k3s1", "", recorded(old, asked), annotate(k3sKeys.RemovedNodeName, old)),
			view:  clusterView{rules: rulesFor("v1.34.2+k3s1"), others: 2},
			state: etcd.RemovalInProgress, reason: "NotAMember on its next pass",
		},
		{
			name:  "removed-node-name and NotAMember since the request: removed, and the confirmation is recorded",
			node:  etcdNodeObj("cp-1", "v1.34.2+k3s1", "", recorded(old, asked), annotate(k3sKeys.RemovedNodeName, old), voter(ReasonNotAMember, "", after)),
			view:  clusterView{rules: rulesFor("v1.34.2+k3s1"), others: 2},
			state: etcd.RemovalRemoved, confirm: true, reason: "marked Node cp-1 NotAMember",
		},
		{
			name:  "A NotAMember that has not yet lasted one pass of K3s's leader is no evidence yet (a running server writes node-name back)",
			node:  etcdNodeObj("cp-1", "v1.34.2+k3s1", "", recorded(old, asked), annotate(k3sKeys.RemovedNodeName, old), voter(ReasonNotAMember, "", testNow.Add(-5*time.Second))),
			view:  clusterView{rules: rulesFor("v1.34.2+k3s1"), others: 2, tick: DefaultTick},
			state: etcd.RemovalInProgress, reason: "waiting for evidence", recheck: testNow.Add(10 * time.Second),
		},
		{
			name:  "A fresh NotAMember together with the Node gone NotReady since the request: removed at once",
			node:  etcdNodeObj("cp-1", "v1.34.2+k3s1", "", recorded(old, asked), annotate(k3sKeys.RemovedNodeName, old), voter(ReasonNotAMember, "", testNow.Add(-5*time.Second)), ready(corev1.ConditionUnknown, testNow.Add(-4*time.Second))),
			view:  clusterView{rules: rulesFor("v1.34.2+k3s1"), others: 2, tick: DefaultTick},
			state: etcd.RemovalRemoved, confirm: true, reason: "the removed server stopped",
		},
		{
			name:  "A NotAMember older than the request is no evidence",
			node:  etcdNodeObj("cp-1", "v1.34.2+k3s1", "", recorded(old, asked), annotate(k3sKeys.RemovedNodeName, old), voter(ReasonNotAMember, "", before)),
			view:  clusterView{rules: rulesFor("v1.34.2+k3s1"), others: 2},
			state: etcd.RemovalInProgress, reason: "waiting for evidence",
		},
		{
			name:  "A member already down when the removal was asked: NotAMember (only its reason changed) on a Node still NotReady from before is evidence",
			node:  etcdNodeObj("cp-1", "v1.34.2+k3s1", "", recorded(old, asked), annotate(k3sKeys.RemovedNodeName, old), voter(ReasonNotAMember, "", before), ready(corev1.ConditionFalse, before)),
			view:  clusterView{rules: rulesFor("v1.34.2+k3s1"), others: 2, tick: DefaultTick},
			state: etcd.RemovalRemoved, confirm: true, reason: "the Node is not Ready",
		},
		{
			name:  "An old NotAMember on a Ready Node is still no evidence (K3s's claim after an address change)",
			node:  etcdNodeObj("cp-1", "v1.34.2+k3s1", "", recorded(old, asked), annotate(k3sKeys.RemovedNodeName, old), voter(ReasonNotAMember, "", before), ready(corev1.ConditionTrue, before)),
			view:  clusterView{rules: rulesFor("v1.34.2+k3s1"), others: 2, tick: DefaultTick},
			state: etcd.RemovalInProgress, reason: "waiting for evidence",
		},
		{
			name:  "Claim confirmed earlier: removed without new evidence",
			node:  etcdNodeObj("cp-1", "v1.34.2+k3s1", "", recorded(old, asked), annotate(k3sKeys.RemovedNodeName, old, RemovalConfirmedAnnotation, old)),
			view:  clusterView{rules: rulesFor("v1.34.2+k3s1"), others: 2},
			state: etcd.RemovalRemoved, reason: "confirmed earlier",
		},
		{
			name:  "K3s claimed but the member's server wrote node-name back (the Node's IP changed): rejected, never Removed",
			node:  etcdNodeObj("cp-1", "v1.34.2+k3s1", old, recorded(old, asked), annotate(k3sKeys.RemovedNodeName, old), voter(ReasonNotAMember, "", after)),
			view:  clusterView{rules: rulesFor("v1.34.2+k3s1"), others: 2},
			state: etcd.RemovalRejected, reason: "still running",
		},
		{
			name:  "Without NotAMember (K3s before 1.29.1 / 1.28.6), the removed server going NotReady is the evidence",
			node:  etcdNodeObj("cp-1", "v1.27.7+k3s1", "", recorded(old, asked), annotate(k3sKeys.Remove, "true", k3sKeys.RemovedNodeName, old), ready(corev1.ConditionUnknown, after)),
			view:  clusterView{rules: rulesFor("v1.27.7+k3s1"), others: 2},
			state: etcd.RemovalRemoved, confirm: true, reason: "the removed server stopped",
		},
		{
			name:  "Without NotAMember and with the Node still Ready: in progress",
			node:  etcdNodeObj("cp-1", "v1.27.7+k3s1", "", recorded(old, asked), annotate(k3sKeys.Remove, "true", k3sKeys.RemovedNodeName, old), ready(corev1.ConditionTrue, before)),
			view:  clusterView{rules: rulesFor("v1.27.7+k3s1"), others: 2},
			state: etcd.RemovalInProgress, reason: "writes no NotAMember",
		},
		{
			name:  "remove gone without removed-node-name: K3s refused",
			node:  etcdNodeObj("cp-1", "v1.33.4+k3s1", old, recorded(old, asked)),
			view:  clusterView{rules: current, others: 2},
			state: etcd.RemovalRejected, reason: "K3s refused: it would leave too few started members",
		},
		{
			name:  "Still remove=true without removed-node-name: waiting on K3s, saying how long",
			node:  etcdNodeObj("cp-1", "v1.33.4+k3s1", old, recorded(old, asked), annotate(k3sKeys.Remove, "true")),
			view:  clusterView{rules: current, others: 2},
			state: etcd.RemovalInProgress, reason: "set 1m30s ago",
		},
		{
			name:  "Waiting while another member is not healthy: etcd's \"unhealthy cluster\", a standing order that can be withdrawn",
			node:  etcdNodeObj("cp-1", "v1.33.4+k3s1", old, recorded(old, asked), annotate(k3sKeys.Remove, "true")),
			view:  clusterView{rules: current, others: 2, notHealthy: []string{"cp-2-00000000 on Node cp-2: failed to check etcd member status"}},
			state: etcd.RemovalInProgress, reason: "standing order that removes " + old + " whenever the cluster recovers, even if you gave up; withdraw it with WithdrawRemoval",
		},
		{
			name:  "Old K3s retries refusals: the wait says a long one may be a refusal",
			node:  etcdNodeObj("cp-1", "v1.27.6+k3s1", old, recorded(old, asked), annotate(k3sKeys.Remove, "true")),
			view:  clusterView{rules: rulesFor("v1.27.6+k3s1"), others: 2},
			state: etcd.RemovalInProgress, reason: "not enough started members",
		},
		{
			name:  "In a mixed cluster the oldest server's rules apply: a 1.27.6 server makes refusals look like waits on a 1.33 Node",
			node:  etcdNodeObj("cp-1", "v1.33.4+k3s1", old, recorded(old, asked), annotate(k3sKeys.Remove, "true")),
			view:  clusterView{rules: rulesFor("v1.33.4+k3s1", "v1.27.6+k3s1"), others: 2},
			state: etcd.RemovalInProgress, reason: "K3s v1.27.6+k3s1 (the oldest",
		},
		{
			name:  "Rejoined after a confirmed removal: the new member is left alone",
			node:  etcdNodeObj("cp-1", "v1.33.4+k3s1", fresh, recorded(old, asked), annotate(RemovalConfirmedAnnotation, old)),
			view:  clusterView{rules: current, others: 2},
			state: etcd.RemovalRemoved, reason: "left alone",
		},
		{
			name:  "Rejoined on legacy K3s (remove=false is its answer to a rejoin after a removal): removed",
			node:  etcdNodeObj("cp-1", "v1.27.6+k3s1", fresh, recorded(old, asked), annotate(k3sKeys.Remove, "false")),
			view:  clusterView{rules: rulesFor("v1.27.6+k3s1"), others: 2},
			state: etcd.RemovalRemoved, reason: "left alone",
		},
		{
			name:  "Renamed without a confirmed removal (a cluster reset renames the survivor and wipes the annotations): never Removed",
			node:  etcdNodeObj("cp-1", "v1.33.4+k3s1", fresh, recorded(old, asked)),
			view:  clusterView{rules: current, others: 2},
			state: etcd.RemovalRejected, reason: "cluster reset",
		},
		{
			name:   "An old record does not block removing the member that rejoined on the Node",
			target: fresh,
			node:   etcdNodeObj("cp-1", "v1.33.4+k3s1", fresh, recorded(old, asked), annotate(RemovalConfirmedAnnotation, old)),
			view:   clusterView{rules: current, others: 2}, request: true,
		},
		{
			name:  "Removed by someone else before any request, with evidence: removed",
			node:  etcdNodeObj("cp-1", "v1.34.2+k3s1", "", annotate(k3sKeys.RemovedNodeName, old), voter(ReasonNotAMember, "", after)),
			view:  clusterView{rules: rulesFor("v1.34.2+k3s1"), others: 2},
			state: etcd.RemovalRemoved, confirm: true,
		},
		{
			name:  "A Node being deleted is left to K3s's finalizer",
			node:  etcdNodeObj("cp-1", "v1.33.4+k3s1", old, func(n *corev1.Node) { n.DeletionTimestamp = &metav1.Time{Time: testNow} }),
			view:  clusterView{rules: current, others: 2},
			state: etcd.RemovalInProgress, reason: "finalizer",
		},
		{
			name:   "A stale removed-node-name from an earlier member does not stop a request",
			target: fresh,
			node:   etcdNodeObj("cp-1", "v1.34.2+k3s1", fresh, annotate(k3sKeys.RemovedNodeName, old)),
			view:   clusterView{rules: rulesFor("v1.34.2+k3s1"), others: 2}, request: true,
		},
		{
			name:  "RKE2 keys are followed the same way",
			node:  etcdNodeObj("cp-1", "v1.32.10+rke2r1", "", recorded(old, asked), annotate(KeysFor("rke2").RemovedNodeName, old), voter(ReasonNotAMember, "", after)),
			view:  clusterView{rules: rulesFor("v1.32.10+rke2r1"), others: 2},
			state: etcd.RemovalRemoved, confirm: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			target := tt.target
			if target == "" {
				target = old
			}
			m := etcd.Member{ID: MemberID(target), Name: target, NodeName: "cp-1"}
			step := decideRemoval(m, tt.node, tt.view, testNow)
			if tt.expectErr != "" {
				g.Expect(step.err).To(MatchError(etcd.ErrInvalidInput))
				g.Expect(step.err.Error()).To(ContainSubstring(tt.expectErr))
				g.Expect(step.request).To(BeFalse())
				return
			}
			g.Expect(step.err).ToNot(HaveOccurred())
			g.Expect(step.request).To(Equal(tt.request))
			if tt.request {
				g.Expect(step.member.Name).To(Equal(target))
				return
			}
			g.Expect(step.confirm).To(Equal(tt.confirm))
			g.Expect(step.recheckAt).To(Equal(tt.recheck))
			g.Expect(step.result.State).To(Equal(tt.state), step.result.Reason)
			g.Expect(step.result.Member.Name).To(Equal(target))
			g.Expect(step.result.Reason).To(ContainSubstring(tt.reason))
		})
	}
}

// rulesFor is the cluster rules of etcd Nodes running the given versions.
func rulesFor(versions ...string) clusterRules {
	var all []etcdNode
	for i, v := range versions {
		all = append(all, readNode(etcdNodeObj("n"+string(rune('0'+i)), v, "m")))
	}
	return rulesOf(all)
}
