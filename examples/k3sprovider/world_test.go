package k3sprovider_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/pkg/k3s"
)

const namespace = "default"

var keys = k3s.KeysFor("k3s")

// server is one K3s server of the test: its Node, the etcd member K3s named for it, its Machine.
type server struct{ node, member, ip, machine string }

func servers(prefix string, n int) []server {
	out := make([]server, 0, n)
	for i := 0; i < n; i++ {
		name := prefix + "-" + string(rune('0'+i))
		out = append(out, server{node: name, member: name + "-1a2b3c4d", ip: "10.0.0." + string(rune('1'+i)), machine: "m-" + name})
	}
	return out
}

// createServers registers each server as K3s does: its Node with the etcd label and the member's
// name and address (K3s's metadata controller, k3s pkg/etcd/metadata_controller.go), and the
// EtcdIsVoter condition the raft leader's K3s writes (k3s pkg/etcd/etcd.go); then its Machine,
// with Cluster API's finalizer and the nodeRef its Machine controller sets.
func createServers(t *testing.T, ss []server, unhealthy ...string) {
	g := NewWithT(t)
	ctx := context.Background()
	for _, s := range ss {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: s.node,
			Labels:      map[string]string{k3s.EtcdRoleLabel: "true"},
			Annotations: map[string]string{keys.NodeName: s.member, keys.NodeAddress: s.ip}}}
		g.Expect(k8sClient.Create(ctx, node)).To(Succeed())
		t.Cleanup(func() { _ = k8sClient.Delete(context.Background(), node) })
		node.Status.NodeInfo.KubeletVersion = "v1.34.2+k3s1"
		node.Status.Conditions = []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()},
			voter(contains(unhealthy, s.node)),
		}
		g.Expect(k8sClient.Status().Update(ctx, node)).To(Succeed())

		m := &clusterv1.Machine{ObjectMeta: metav1.ObjectMeta{Name: s.machine, Namespace: namespace, Finalizers: []string{clusterv1.MachineFinalizer}},
			Spec: clusterv1.MachineSpec{ClusterName: "k3s", Bootstrap: clusterv1.Bootstrap{DataSecretName: ptrTo("bootstrap")}}}
		g.Expect(k8sClient.Create(ctx, m)).To(Succeed())
		t.Cleanup(func() { forget(m) })
		m.Status.NodeRef = &corev1.ObjectReference{Kind: "Node", Name: s.node}
		g.Expect(k8sClient.Status().Update(ctx, m)).To(Succeed())
	}
}

func voter(unhealthy bool) corev1.NodeCondition {
	c := corev1.NodeCondition{Type: k3s.EtcdIsVoterCondition, Status: corev1.ConditionTrue, Reason: k3s.ReasonMemberNotLearner,
		Message: "Node is a voting member of the etcd cluster", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}
	if unhealthy {
		c.Status, c.Reason, c.Message = corev1.ConditionFalse, k3s.ReasonUnhealthy, "failed to check etcd member status: context deadline exceeded"
	}
	return c
}

// forget takes Cluster API's finalizer off a Machine and deletes it, as its Machine controller
// does once the infrastructure is gone.
func forget(m *clusterv1.Machine) {
	ctx := context.Background()
	_ = k8sClient.Patch(ctx, m, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`)))
	_ = k8sClient.Delete(ctx, m)
}

// machines lists the control-plane Machines of the test's servers.
func machines(g Gomega, ss []server) []clusterv1.Machine {
	out := make([]clusterv1.Machine, 0, len(ss))
	for _, s := range ss {
		m := clusterv1.Machine{}
		if err := k8sClient.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: s.machine}, &m); err == nil {
			out = append(out, m)
		}
	}
	g.Expect(out).NotTo(BeEmpty())
	return out
}

func machine(g Gomega, name string) *clusterv1.Machine {
	m := &clusterv1.Machine{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, m)).To(Succeed())
	return m
}

// markDrained sets what Cluster API v1.10's Machine controller sets once it drained the Node and
// detached its volumes and only pre-terminate hooks are left (internal/controllers/machine/
// machine_controller.go, reconcileDelete: the v1beta2 Deleting condition, reason
// WaitingForPreTerminateHook).
func markDrained(g Gomega, name string) {
	m := machine(g, name)
	m.Status.V1Beta2 = &clusterv1.MachineV1Beta2Status{Conditions: []metav1.Condition{{
		Type: clusterv1.MachineDeletingV1Beta2Condition, Status: metav1.ConditionTrue,
		Reason: clusterv1.MachineDeletingWaitingForPreTerminateHookV1Beta2Reason, LastTransitionTime: metav1.Now(),
		Message: "Waiting for pre-terminate hooks to succeed"}}}
	g.Expect(k8sClient.Status().Update(context.Background(), m)).To(Succeed())
}

// answerRemovals plays K3s's member controller for one pass (k3s pkg/etcd/member_controller.go):
// on a Node with etcd.k3s.cattle.io/remove=true it removes the member and, in one patch, writes
// removed-node-name and deletes remove, node-name and node-address; the leader's next pass marks
// the Node NotAMember. For a Node in reject it does what K3s does when etcd refuses the change
// for too few started members: it deletes remove and writes nothing else.
func answerRemovals(g Gomega, reject ...string) {
	ctx := context.Background()
	nodes := &corev1.NodeList{}
	g.Expect(k8sClient.List(ctx, nodes)).To(Succeed())
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if !strings.EqualFold(n.Annotations[keys.Remove], "true") {
			continue
		}
		annotations := map[string]any{keys.Remove: nil}
		if !contains(reject, n.Name) {
			annotations[keys.RemovedNodeName] = n.Annotations[keys.NodeName]
			annotations[keys.NodeName], annotations[keys.NodeAddress] = nil, nil
		}
		body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": annotations}})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(k8sClient.Patch(ctx, n, client.RawPatch(types.MergePatchType, body))).To(Succeed())
		if contains(reject, n.Name) {
			continue
		}
		for j := range n.Status.Conditions {
			if n.Status.Conditions[j].Type == k3s.EtcdIsVoterCondition {
				n.Status.Conditions[j] = corev1.NodeCondition{Type: k3s.EtcdIsVoterCondition, Status: corev1.ConditionFalse,
					Reason: k3s.ReasonNotAMember, Message: "Node is not a member of the etcd cluster",
					LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}
			}
		}
		g.Expect(k8sClient.Status().Update(ctx, n)).To(Succeed())
	}
}

func node(g Gomega, name string) *corev1.Node {
	n := &corev1.Node{}
	g.Expect(k8sClient.Get(context.Background(), client.ObjectKey{Name: name}, n)).To(Succeed())
	return n
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func ptrTo[T any](v T) *T { return &v }

// kthreesControlPlane stands in for a KThreesControlPlane: an object with v1beta1 conditions.
type kthreesControlPlane struct {
	metav1.TypeMeta
	metav1.ObjectMeta
	conditions clusterv1.Conditions
}

func (k *kthreesControlPlane) GetConditions() clusterv1.Conditions  { return k.conditions }
func (k *kthreesControlPlane) SetConditions(c clusterv1.Conditions) { k.conditions = c }
func (k *kthreesControlPlane) DeepCopyObject() runtime.Object {
	c := *k
	c.conditions = append(clusterv1.Conditions(nil), k.conditions...)
	return &c
}
