package kcp

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kcpenv "github.com/etcd-adapter/etcd-adapter/test/env/kcp"
)

// TestKCPCreatesControlPlane lets KubeadmControlPlane build a 3-replica control plane from
// nothing and waits until it reports it available, then compares its etcd view with
// etcd-adapter's.
func TestKCPCreatesControlPlane(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()

	e, err := kcpenv.Start(ctx, kcpenv.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(e.Stop()).To(Succeed()) })

	start := time.Now()
	_, err = e.CreateControlPlane(ctx, 3)
	g.Expect(err).NotTo(HaveOccurred())
	kcp := waitAvailable(ctx, g, e, 3)
	fmt.Printf("KCP: 3-replica control plane from nothing to Available in %v\n", time.Since(start).Round(time.Millisecond))
	printConditions(kcp)

	// etcd-adapter in Observe mode: the same members (one per KCP Machine, named after its
	// Node) and the same health, in KCP's condition types and reasons.
	o := newObserver(g, e)
	t.Cleanup(func() { g.Expect(o.backend.Close()).To(Succeed()) })
	machines := o.machineNames(ctx, g)
	v := o.read(ctx, g)
	v.print("created")
	g.Expect(v.observeErr).NotTo(HaveOccurred())
	g.Expect(v.members).To(Equal(machines))
	g.Expect(same(v.adapter.Cluster, v.kcpCluster)).To(BeTrue(), "EtcdClusterHealthy: KCP %+v, etcd-adapter %+v", v.kcpCluster, v.adapter.Cluster)
	for _, name := range machines {
		g.Expect(same(v.adapter.Machines[name], v.kcpMachines[name])).To(BeTrue(), "EtcdMemberHealthy of %s: KCP %+v, etcd-adapter %+v", name, v.kcpMachines[name], v.adapter.Machines[name])
	}
}

// waitAvailable waits until KCP reports replicas Machines ready and available, Available True
// and its etcd cluster healthy.
func waitAvailable(ctx context.Context, g Gomega, e *kcpenv.Env, replicas int32) *controlplanev1.KubeadmControlPlane {
	kcp := &controlplanev1.KubeadmControlPlane{}
	g.Eventually(func(g Gomega) {
		g.Expect(e.Management.Client.Get(ctx, client.ObjectKeyFromObject(e.Cluster), kcp)).To(Succeed())
		g.Expect(ptr.Deref(kcp.Status.Replicas, 0)).To(Equal(replicas))
		g.Expect(ptr.Deref(kcp.Status.AvailableReplicas, 0)).To(Equal(replicas))
		g.Expect(conditions.IsTrue(kcp, controlplanev1.KubeadmControlPlaneAvailableCondition)).To(BeTrue(), "Available: %v", conditions.Get(kcp, controlplanev1.KubeadmControlPlaneAvailableCondition))
		g.Expect(conditions.IsTrue(kcp, controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition)).To(BeTrue(), "EtcdClusterHealthy: %v", conditions.Get(kcp, controlplanev1.KubeadmControlPlaneEtcdClusterHealthyCondition))
	}).WithTimeout(4*time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(), func() string { return dump(ctx, e) })
	return kcp
}

func printConditions(kcp *controlplanev1.KubeadmControlPlane) {
	for _, c := range kcp.Status.Conditions {
		fmt.Printf("  KCP %s=%s reason=%s %s\n", c.Type, c.Status, c.Reason, oneLine(c.Message))
	}
}

func oneLine(s string) string {
	out := []rune{}
	for _, r := range s {
		if r == '\n' {
			r = ' '
		}
		out = append(out, r)
	}
	return string(out)
}

// dump describes KCP's status and its Machines' conditions, for a failed wait.
func dump(ctx context.Context, e *kcpenv.Env) string {
	kcp := &controlplanev1.KubeadmControlPlane{}
	_ = e.Management.Client.Get(ctx, client.ObjectKeyFromObject(e.Cluster), kcp)
	out, _ := json.MarshalIndent(kcp.Status, "", "  ")
	s := "KCP status: " + string(out) + "\n"
	machines := &clusterv1.MachineList{}
	_ = e.Management.Client.List(ctx, machines, client.InNamespace(e.Cluster.Namespace))
	for _, m := range machines.Items {
		for _, c := range m.Status.Conditions {
			s += fmt.Sprintf("Machine %s %s=%s %s %s\n", m.Name, c.Type, c.Status, c.Reason, oneLine(c.Message))
		}
	}
	return s
}
