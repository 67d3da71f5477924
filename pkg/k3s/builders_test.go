package k3s

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testNow is the fixed time of the pure tests.
var testNow = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

var k3sKeys = KeysFor("k3s")

// etcdNodeObj builds a K3s etcd Node named name hosting member, at version.
func etcdNodeObj(name, version, member string, opts ...func(*corev1.Node)) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{EtcdRoleLabel: "true"}, Annotations: map[string]string{}},
		Status:     corev1.NodeStatus{NodeInfo: corev1.NodeSystemInfo{KubeletVersion: version}},
	}
	keys := KeysFor(programOfVersion(version))
	if member != "" {
		n.Annotations[keys.NodeName] = member
		n.Annotations[keys.NodeAddress] = "10.0.0.1"
	}
	for _, o := range opts {
		o(n)
	}
	return n
}

func programOfVersion(v string) string {
	if p, err := ParseVersion(v); err == nil {
		return p.Program
	}
	return "k3s"
}

func voter(reason, message string, heartbeat time.Time) func(*corev1.Node) {
	return func(n *corev1.Node) {
		status := corev1.ConditionFalse
		if reason == ReasonMemberNotLearner {
			status = corev1.ConditionTrue
		}
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: EtcdIsVoterCondition, Status: status,
			Reason: reason, Message: message, LastHeartbeatTime: metav1.NewTime(heartbeat), LastTransitionTime: metav1.NewTime(heartbeat)})
	}
}

func ready(status corev1.ConditionStatus, since time.Time) func(*corev1.Node) {
	return func(n *corev1.Node) {
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: corev1.NodeReady, Status: status,
			Reason: "KubeletNotReady", LastHeartbeatTime: metav1.NewTime(since), LastTransitionTime: metav1.NewTime(since)})
	}
}

func annotate(kv ...string) func(*corev1.Node) {
	return func(n *corev1.Node) {
		for i := 0; i+1 < len(kv); i += 2 {
			n.Annotations[kv[i]] = kv[i+1]
		}
	}
}

// recorded is the annotation pair RemoveMember writes next to remove=true.
func recorded(member string, at time.Time) func(*corev1.Node) {
	return annotate(RemovingMemberAnnotation, member, RemovalRequestedAtAnnotation, at.Format(time.RFC3339))
}

// status overrides the EtcdIsVoter condition's status.
func status(st corev1.ConditionStatus) func(*corev1.Node) {
	return func(n *corev1.Node) {
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == EtcdIsVoterCondition {
				n.Status.Conditions[i].Status = st
			}
		}
	}
}
