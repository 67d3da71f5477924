// Package k3stest builds etcd Nodes as K3s writes them, and the etcd.Snapshot the K3s backend
// reads from them, for a provider's unit tests: the snapshot comes from the backend's own
// Observe over an in-memory client, so it has every property of a real K3s snapshot (synthetic
// member IDs, the blind spots of Node objects, evidence as old as the EtcdIsVoter heartbeat).
package k3stest

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/etcd-adapter/etcd-adapter/pkg/etcd"
	"github.com/etcd-adapter/etcd-adapter/pkg/k3s"
)

// Option changes a Node after Node built it.
type Option func(*corev1.Node)

// Node is the Node of a K3s etcd server as K3s writes it: the etcd role label and the member's
// name and address (K3s pkg/etcd/metadata_controller.go), Ready, and the EtcdIsVoter condition
// of a healthy voter written by the raft leader's K3s at now (K3s pkg/etcd/etcd.go). member is
// the etcd member name, "<node>-<8 hex>"; version the kubelet version, e.g. "v1.34.2+k3s1".
func Node(name, member, address, version string, now time.Time, opts ...Option) *corev1.Node {
	keys := k3s.KeysFor(program(version))
	t := metav1.NewTime(now)
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{k3s.EtcdRoleLabel: "true"},
			Annotations: map[string]string{keys.NodeName: member, keys.NodeAddress: address}},
		Status: corev1.NodeStatus{
			NodeInfo: corev1.NodeSystemInfo{KubeletVersion: version},
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: t, LastTransitionTime: t},
				{Type: k3s.EtcdIsVoterCondition, Status: corev1.ConditionTrue, Reason: k3s.ReasonMemberNotLearner,
					Message: "Node is a voting member of the etcd cluster", LastHeartbeatTime: t, LastTransitionTime: t},
			},
		},
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

// Learner makes the member a learner K3s has not promoted yet.
func Learner() Option {
	return voter(corev1.ConditionFalse, k3s.ReasonMemberIsLearner, "Node has not been promoted to voting member of the etcd cluster")
}

// Unreachable makes the member one the leader's Status call could not reach.
func Unreachable() Option {
	return voter(corev1.ConditionFalse, k3s.ReasonUnhealthy, "failed to check etcd member status: context deadline exceeded")
}

// NotAMember marks the Node as K3s marks one whose member was removed.
func NotAMember() Option {
	return voter(corev1.ConditionFalse, k3s.ReasonNotAMember, "Node is not a member of the etcd cluster")
}

// Heartbeat sets when the leader's K3s last wrote EtcdIsVoter; older than about 5m15s is stale.
func Heartbeat(at time.Time) Option {
	return func(n *corev1.Node) {
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == k3s.EtcdIsVoterCondition {
				n.Status.Conditions[i].LastHeartbeatTime = metav1.NewTime(at)
			}
		}
	}
}

// NotReady makes the kubelet NotReady since the given time.
func NotReady(since time.Time) Option {
	return func(n *corev1.Node) {
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == corev1.NodeReady {
				n.Status.Conditions[i].Status, n.Status.Conditions[i].Reason = corev1.ConditionFalse, "KubeletNotReady"
				n.Status.Conditions[i].LastHeartbeatTime, n.Status.Conditions[i].LastTransitionTime = metav1.NewTime(since), metav1.NewTime(since)
			}
		}
	}
}

func voter(status corev1.ConditionStatus, reason, message string) Option {
	return func(n *corev1.Node) {
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == k3s.EtcdIsVoterCondition {
				n.Status.Conditions[i].Status, n.Status.Conditions[i].Reason, n.Status.Conditions[i].Message = status, reason, message
			}
		}
	}
}

// Snapshot is what the K3s backend observes at now from the given Nodes.
func Snapshot(now time.Time, nodes ...*corev1.Node) (*etcd.Snapshot, error) {
	objs := make([]client.Object, 0, len(nodes))
	for _, n := range nodes {
		objs = append(objs, n.DeepCopy())
	}
	b, err := k3s.New(k3s.Config{Client: fake.NewClientBuilder().WithObjects(objs...).Build(), Now: func() time.Time { return now }})
	if err != nil {
		return nil, fmt.Errorf("failed to build the K3s backend: %w", err)
	}
	return b.Observe(context.Background())
}

func program(version string) string {
	if v, err := k3s.ParseVersion(version); err == nil {
		return v.Program
	}
	return "k3s"
}
