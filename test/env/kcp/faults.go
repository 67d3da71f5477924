package kcp

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Fault handles act on a KCP Machine's host by Machine name (its Node has the same name), as
// they would on any other Machine.

// MemberDown kills the etcd member on the Machine's Node; its Pod and Node stay Ready, as
// when the etcd process crashed.
func (e *Env) MemberDown(machineName string) error {
	c := e.Etcd()
	if c == nil {
		return fmt.Errorf("failed to stop the etcd member of %s: etcd is not initialized", machineName)
	}
	m := c.MemberOnNode(machineName)
	if m == nil {
		return fmt.Errorf("failed to stop the etcd member of %s: no member on that Node", machineName)
	}
	return m.Kill()
}

// NodeNotReady makes the Machine's kubelet report Ready=False from now on.
func (e *Env) NodeNotReady(ctx context.Context, machineName string) error {
	kl := e.Kubelet(machineName)
	if kl == nil {
		return fmt.Errorf("failed to make Node %s not ready: no kubelet stand-in", machineName)
	}
	return kl.SetNotReady(ctx, corev1.ConditionFalse, "KubeletNotReady")
}

// StaticPodFailing removes the mirror Pod of component on the Machine's Node, as a kubelet
// that cannot run the static Pod's manifest shows it: KCP reports the component's Pod missing.
//
// Note: a Pod that exists but is not Ready cannot be shown, because the kubelet stand-in
// reports every Pod on its Node Running and Ready.
func (e *Env) StaticPodFailing(ctx context.Context, machineName, component string) error {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: metav1.NamespaceSystem, Name: staticPodName(component, machineName)}}
	if err := e.workloadAPI.Client.Delete(ctx, pod, client.GracePeriodSeconds(0)); err != nil {
		return fmt.Errorf("failed to remove Pod %s: %w", client.ObjectKeyFromObject(pod), err)
	}
	return nil
}

// FailNextJoin makes the next `kubeadm join` stop half way, as a join whose etcd never comes
// up: the learner is added to etcd but never starts, and no Node registers, so the Machine
// never gets a nodeRef.
func (e *Env) FailNextJoin() {
	e.workload.mu.Lock()
	defer e.workload.mu.Unlock()
	e.workload.failNextJoin = true
}
