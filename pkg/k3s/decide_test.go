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
	tests := []struct {
		name      string
		node      *corev1.Node
		others    int
		request   bool
		state     etcd.RemovalState
		member    string
		reason    string
		expectErr bool
	}{
		{
			name: "A Node hosting a member, with others left, gets the request",
			node: etcdNodeObj("cp-1", "v1.33.4+k3s1", old), others: 2, request: true, member: old,
		},
		{
			name: "Never the last etcd Node: rejected without asking K3s",
			node: etcdNodeObj("cp-1", "v1.33.4+k3s1", old), others: 0, state: etcd.RemovalRejected, member: old, reason: "last etcd member",
		},
		{
			name: "A Node without node-name is invalid input",
			node: etcdNodeObj("cp-1", "v1.33.4+k3s1", ""), others: 2, expectErr: true,
		},
		{
			name: "A Node that is not an etcd Node is invalid input",
			node: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-0"}}, others: 2, expectErr: true,
		},
		{
			name: "A Node that is gone was removed by K3s's finalizer",
			node: nil, state: etcd.RemovalRemoved, reason: "finalizer",
		},
		{
			name:  "Requested and removed-node-name written: removed",
			node:  etcdNodeObj("cp-1", "v1.34.2+k3s1", "", recorded(old, asked), annotate(k3sKeys.RemovedNodeName, old)),
			state: etcd.RemovalRemoved, member: old,
		},
		{
			name:  "Old K3s leaves remove=true after success: removed, and not re-annotated",
			node:  etcdNodeObj("cp-1", "v1.27.10+k3s1", "", recorded(old, asked), annotate(k3sKeys.Remove, "true", k3sKeys.RemovedNodeName, old)),
			state: etcd.RemovalRemoved, member: old, reason: "not set again",
		},
		{
			name:  "remove gone without removed-node-name: K3s refused",
			node:  etcdNodeObj("cp-1", "v1.33.4+k3s1", old, recorded(old, asked)),
			state: etcd.RemovalRejected, member: old, reason: "K3s refused: it would leave too few started members",
		},
		{
			name:  "Still remove=true without removed-node-name: waiting on K3s, saying how long",
			node:  etcdNodeObj("cp-1", "v1.33.4+k3s1", old, recorded(old, asked), annotate(k3sKeys.Remove, "true")),
			state: etcd.RemovalInProgress, member: old, reason: "set 1m30s ago",
		},
		{
			name:  "Old K3s retries refusals: the wait says a long one may be a refusal",
			node:  etcdNodeObj("cp-1", "v1.27.10+k3s1", old, recorded(old, asked), annotate(k3sKeys.Remove, "true")),
			state: etcd.RemovalInProgress, member: old, reason: "not enough started members",
		},
		{
			name:  "Rejoined under a new name (legacy: remove=false): the new member is left alone",
			node:  etcdNodeObj("cp-1", "v1.27.10+k3s1", fresh, recorded(old, asked), annotate(k3sKeys.Remove, "false")),
			state: etcd.RemovalRemoved, member: old, reason: "left alone",
		},
		{
			name:  "Rejoined under a new name (current K3s: both deleted): the new member is left alone",
			node:  etcdNodeObj("cp-1", "v1.33.4+k3s1", fresh, recorded(old, asked)),
			state: etcd.RemovalRemoved, member: old, reason: "left alone",
		},
		{
			name:   "Removed by someone else before any request: removed",
			node:   etcdNodeObj("cp-1", "v1.34.2+k3s1", "", annotate(k3sKeys.RemovedNodeName, old)),
			others: 2, state: etcd.RemovalRemoved, member: old,
		},
		{
			name:   "A Node being deleted is left to K3s's finalizer",
			node:   etcdNodeObj("cp-1", "v1.33.4+k3s1", old, func(n *corev1.Node) { n.DeletionTimestamp = &metav1.Time{Time: testNow} }),
			others: 2, state: etcd.RemovalInProgress, member: old, reason: "finalizer",
		},
		{
			name:   "A stale removed-node-name from an earlier member does not stop a request",
			node:   etcdNodeObj("cp-1", "v1.34.2+k3s1", fresh, annotate(k3sKeys.RemovedNodeName, old)),
			others: 2, request: true, member: fresh,
		},
		{
			name:  "RKE2 keys are followed the same way",
			node:  etcdNodeObj("cp-1", "v1.32.10+rke2r1", "", recorded(old, asked), annotate(KeysFor("rke2").RemovedNodeName, old)),
			state: etcd.RemovalRemoved, member: old,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			step := decideRemoval("cp-1", tt.node, tt.others, testNow)
			if tt.expectErr {
				g.Expect(step.err).To(MatchError(etcd.ErrInvalidInput))
				g.Expect(step.request).To(BeFalse())
				return
			}
			g.Expect(step.err).ToNot(HaveOccurred())
			g.Expect(step.request).To(Equal(tt.request))
			if tt.request {
				g.Expect(step.member.Name).To(Equal(tt.member))
				return
			}
			g.Expect(step.result.State).To(Equal(tt.state), step.result.Reason)
			g.Expect(step.result.Member.Name).To(Equal(tt.member))
			g.Expect(step.result.Reason).To(ContainSubstring(tt.reason))
		})
	}
}
