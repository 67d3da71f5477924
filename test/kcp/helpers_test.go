package kcp

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kcpenv "github.com/etcd-adapter/etcd-adapter/test/env/kcp"
)

// waitTimeout bounds a wait for the controllers to react to a fault or a change. It is generous
// because the 2-core machine running the tests is often busy with other suites; a step that
// ends sooner goes on at once.
const waitTimeout = 4 * time.Minute

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

// resyncAnnotation is the KCP annotation resyncKCP changes.
const resyncAnnotation = "test.etcd-adapter.io/resync"

// resyncKCP makes KCP reconcile now, as its periodic resync (Cluster API's default
// --sync-period, 10 min) would later: KCP reads etcd's members and alarms only when it
// reconciles, and a settled KCP is reconciled only on a change to the KCP, its Machines or the
// Cluster. A change of one annotation of the KCP is such a change and nothing else: KCP does
// not copy its own annotations anywhere.
func resyncKCP(ctx context.Context, g Gomega, e *kcpenv.Env) {
	kcp := &controlplanev1.KubeadmControlPlane{}
	g.Expect(e.Management.Client.Get(ctx, client.ObjectKeyFromObject(e.Cluster), kcp)).To(Succeed())
	patch := client.MergeFrom(kcp.DeepCopy())
	if kcp.Annotations == nil {
		kcp.Annotations = map[string]string{}
	}
	kcp.Annotations[resyncAnnotation] = time.Now().UTC().Format(time.RFC3339Nano)
	g.Expect(e.Management.Client.Patch(ctx, kcp, patch)).To(Succeed())
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
