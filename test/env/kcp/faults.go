package kcp

import (
	clientv3 "go.etcd.io/etcd/client/v3"

	"context"
	"fmt"
	"slices"

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

// NodeReady undoes NodeNotReady: the Machine's kubelet reports Ready=True again.
func (e *Env) NodeReady(ctx context.Context, machineName string) error {
	kl := e.Kubelet(machineName)
	if kl == nil {
		return fmt.Errorf("failed to make Node %s ready: no kubelet stand-in", machineName)
	}
	return kl.SetReady(ctx)
}

// MemberList is etcd's own member list (a linearizable MemberList through the running voters).
func (e *Env) MemberList(ctx context.Context) (*clientv3.MemberListResponse, error) {
	c := e.Etcd()
	if c == nil {
		return nil, fmt.Errorf("failed to list etcd members: etcd is not initialized")
	}
	cli, err := c.NewClient(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = cli.Close() }()
	return cli.MemberList(ctx)
}

// EtcdMembers returns the names of the workload cluster's etcd members as etcd itself lists
// them (a linearizable MemberList through the running voters), sorted; a member that never
// started has an empty name.
func (e *Env) EtcdMembers(ctx context.Context) ([]string, error) {
	resp, err := e.MemberList(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to list etcd members: %w", err)
	}
	var names []string
	for _, m := range resp.Members {
		names = append(names, m.Name)
	}
	slices.Sort(names)
	return names, nil
}

// MemberNoSpace raises a NOSPACE alarm for the etcd member on the Machine's Node, as etcd's
// quota check does when the member's database is full; the member keeps running and answering.
// It returns once every running member, asked alone, reports the alarm
// (etcdcluster.Cluster.RaiseNoSpace).
func (e *Env) MemberNoSpace(ctx context.Context, machineName string) error {
	c := e.Etcd()
	if c == nil {
		return fmt.Errorf("failed to raise NOSPACE on %s: etcd is not initialized", machineName)
	}
	m := c.MemberOnNode(machineName)
	if m == nil {
		return fmt.Errorf("failed to raise NOSPACE on %s: no member on that Node", machineName)
	}
	return c.RaiseNoSpace(ctx, m.Name())
}

// DisarmAlarms disarms every etcd alarm, as `etcdctl alarm disarm` does. It returns once every
// running member, asked alone, reports no alarm (etcdcluster.Cluster.DisarmAlarms).
func (e *Env) DisarmAlarms(ctx context.Context) error {
	c := e.Etcd()
	if c == nil {
		return fmt.Errorf("failed to disarm etcd alarms: etcd is not initialized")
	}
	return c.DisarmAlarms(ctx)
}
