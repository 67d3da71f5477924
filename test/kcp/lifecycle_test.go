package kcp

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kcpenv "github.com/etcd-adapter/etcd-adapter/test/env/kcp"
)

// FullEnv selects the full KCP flow (remediation, scale-down, rollout; about 4 more minutes
// on 2 cores) in TestKCPLifecycle; without it the test stops after the control plane is
// created and compared: `ETCD_ADAPTER_KCP_FULL=1 make test TEST_PKGS=./test/kcp/...`.
const FullEnv = "ETCD_ADAPTER_KCP_FULL"

// TestKCPLifecycle lets KubeadmControlPlane build a 3-replica control plane from nothing and
// compares its etcd view with etcd-adapter's (Observe mode: the kubeadm backend and
// etcd.AssessHealth). With FullEnv set it then lets KCP remediate a Machine a
// MachineHealthCheck marked, scale down to 1 and roll out (scale up to 2, remove the old one)
// while etcd-adapter observes: after each step both agree on members and EtcdClusterHealthy,
// during it every difference is printed with etcd-adapter's evidence, and it prints how long
// KCP took and how long after KCP etcd-adapter showed the same.
func TestKCPLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	suiteStart := time.Now()
	e, err := kcpenv.Start(ctx, kcpenv.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(e.Stop()).To(Succeed()) })

	start := time.Now()
	_, err = e.CreateControlPlane(ctx, 3)
	g.Expect(err).NotTo(HaveOccurred())
	kcp := waitAvailable(ctx, g, e, 3)
	fmt.Printf("[create] KCP: 3-replica control plane from nothing to Available in %v\n", time.Since(start).Round(time.Millisecond))
	printConditions(kcp)

	o := newObserver(g, e)
	t.Cleanup(func() { g.Expect(o.backend.Close()).To(Succeed()) })
	compareCreated(ctx, g, o)
	if os.Getenv(FullEnv) == "" {
		fmt.Printf("remediation, scale-down and rollout run with %s=1 (see TestKCPLifecycle)\n", FullEnv)
		return
	}

	s := startSampler(ctx, o)
	defer s.stop()
	remediate(ctx, g, e, o, s)
	runStep(ctx, g, e, o, s, "scale 3->1", 1, nil, func(kcp *controlplanev1.KubeadmControlPlane) {
		kcp.Spec.Replicas = ptr.To[int32](1)
	})
	before := o.machineNames(ctx, g)
	runStep(ctx, g, e, o, s, "rollout", 1, before, func(kcp *controlplanev1.KubeadmControlPlane) {
		kcp.Spec.Rollout.After = metav1.NewTime(time.Now())
	})
	fmt.Printf("TestKCPLifecycle (full) took %v\n", time.Since(suiteStart).Round(time.Millisecond))
}

// compareCreated asserts that etcd-adapter sees one member per KCP Machine (named after its
// Node) and the same EtcdClusterHealthy and per-Machine EtcdMemberHealthy as KCP.
func compareCreated(ctx context.Context, g Gomega, o *observer) {
	machines := o.machineNames(ctx, g)
	v := o.read(ctx, g)
	v.print("create")
	g.Expect(v.observeErr).NotTo(HaveOccurred())
	g.Expect(v.members).To(Equal(machines))
	g.Expect(same(v.adapter.Cluster, v.kcpCluster)).To(BeTrue(), "EtcdClusterHealthy: KCP %+v, etcd-adapter %+v", v.kcpCluster, v.adapter.Cluster)
	for _, name := range machines {
		g.Expect(v.kcpMachines).To(HaveKey(name))
		g.Expect(same(v.adapter.Machines[name], v.kcpMachines[name])).To(BeTrue(), "EtcdMemberHealthy of %s: KCP %+v, etcd-adapter %+v", name, v.kcpMachines[name], v.adapter.Machines[name])
	}
}

// remediate creates a MachineHealthCheck over KCP's Machines, makes one Node NotReady and
// waits until KCP replaced that Machine.
func remediate(ctx context.Context, g Gomega, e *kcpenv.Env, o *observer, s *sampler) {
	mhc := &clusterv1.MachineHealthCheck{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.Cluster.Namespace, Name: "control-plane"},
		Spec: clusterv1.MachineHealthCheckSpec{
			ClusterName: e.Cluster.Name,
			Selector:    metav1.LabelSelector{MatchLabels: map[string]string{clusterv1.MachineControlPlaneLabel: ""}},
			Checks: clusterv1.MachineHealthCheckChecks{
				UnhealthyNodeConditions: []clusterv1.UnhealthyNodeCondition{{
					Type: corev1.NodeReady, Status: corev1.ConditionFalse, TimeoutSeconds: ptr.To[int32](1),
				}},
			},
		},
	}
	g.Expect(e.Management.Client.Create(ctx, mhc)).To(Succeed())
	// Note: the fault waits until the MachineHealthCheck counted every Machine healthy, so its
	// Node watch exists; a Ready change before that would only be seen at the next resync.
	g.Eventually(func(g Gomega) {
		g.Expect(e.Management.Client.Get(ctx, client.ObjectKeyFromObject(mhc), mhc)).To(Succeed())
		g.Expect(mhc.Status.CurrentHealthy).To(HaveValue(BeEquivalentTo(3)))
	}).WithTimeout(2 * time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
	victim := o.machineNames(ctx, g)[0]
	fmt.Printf("[remediation] Node %s NotReady; MachineHealthCheck marks it, KCP remediates\n", victim)
	runStep(ctx, g, e, o, s, "remediation", 3, []string{victim}, func(*controlplanev1.KubeadmControlPlane) {
		g.Expect(e.NodeNotReady(ctx, victim)).To(Succeed())
	})
	g.Expect(e.Management.Client.Delete(ctx, mhc)).To(Succeed())
}

// runStep applies change (to KCP's spec through KCP's webhook logic when it touches it), waits
// until KCP is done (replicas Machines, none of gone, Available, not rolling out or scaling),
// and compares.
func runStep(ctx context.Context, g Gomega, e *kcpenv.Env, o *observer, s *sampler, step string, replicas int32, gone []string, change func(*controlplanev1.KubeadmControlPlane)) {
	before := o.machineNames(ctx, g)
	start := time.Now()
	updateKCP(ctx, g, e, change)
	g.Eventually(func(g Gomega) {
		kcp := waitAvailable(ctx, g, e, replicas)
		g.Expect(kcp.Status.ObservedGeneration).To(Equal(kcp.Generation))
		g.Expect(conditions.IsFalse(kcp, controlplanev1.KubeadmControlPlaneRollingOutCondition)).To(BeTrue())
		g.Expect(conditions.IsFalse(kcp, controlplanev1.KubeadmControlPlaneScalingDownCondition)).To(BeTrue())
		g.Expect(conditions.IsFalse(kcp, controlplanev1.KubeadmControlPlaneRemediatingCondition)).To(BeTrue())
		names := o.machineNames(ctx, g)
		g.Expect(names).To(HaveLen(int(replicas)))
		for _, n := range gone {
			g.Expect(names).NotTo(ContainElement(n))
		}
	}).WithTimeout(8*time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(), func() string { return dump(ctx, e) })
	kcpDone := time.Now()
	after := o.machineNames(ctx, g)
	fmt.Printf("[%s] KCP took %v (Machines %v -> %v)\n", step, kcpDone.Sub(start).Round(time.Millisecond), before, after)
	printLag(g, s, step, start, after)
	report(step, s.since(start))

	final := o.read(ctx, g)
	final.print(step)
	g.Expect(final.members).To(Equal(after))
	g.Expect(same(final.adapter.Cluster, final.kcpCluster)).To(BeTrue(), "EtcdClusterHealthy after %s: KCP %+v, etcd-adapter %+v", step, final.kcpCluster, final.adapter.Cluster)
}

// printLag prints when KCP's side first showed the step's final Machines with a healthy etcd
// cluster and when etcd-adapter first showed the same members and condition.
func printLag(g Gomega, s *sampler, step string, start time.Time, machines []string) {
	var settled view
	g.Eventually(func() bool {
		var ok bool
		settled, ok = firstSettled(s.since(start), machines)
		return ok
	}).WithTimeout(2 * time.Minute).WithPolling(samplePeriod).Should(BeTrue())
	kcpSettled := firstKCPSettled(s.since(start), machines)
	fmt.Printf("[%s] KCP final (Machines and EtcdClusterHealthy=True) first sampled at %s; etcd-adapter showed the same members and condition at %s (%v later; that observation took %v)\n",
		step, kcpSettled.Format("15:04:05.000"), settled.at.Format("15:04:05.000"),
		settled.at.Sub(kcpSettled).Round(time.Millisecond), settled.observedAt.Sub(settled.at).Round(time.Millisecond))
}

// firstKCPSettled returns when KCP's side first showed the step's final Machines and a True
// EtcdClusterHealthy.
func firstKCPSettled(samples []view, machines []string) time.Time {
	for _, v := range samples {
		if slices.Equal(v.machines, machines) && v.kcpCluster.Status == metav1.ConditionTrue {
			return v.at
		}
	}
	return time.Time{}
}

// updateKCP applies change to KCP through KCP's webhook logic, unless change leaves KCP alone.
func updateKCP(ctx context.Context, g Gomega, e *kcpenv.Env, change func(*controlplanev1.KubeadmControlPlane)) {
	kcp := &controlplanev1.KubeadmControlPlane{}
	g.Expect(e.Management.Client.Get(ctx, client.ObjectKeyFromObject(e.Cluster), kcp)).To(Succeed())
	old := kcp.DeepCopy()
	change(kcp)
	if apiequality.Semantic.DeepEqual(old.Spec, kcp.Spec) {
		return
	}
	g.Expect(kcpenv.AdmitUpdate(ctx, old, kcp)).To(Succeed())
	g.Expect(e.Management.Client.Update(ctx, kcp)).To(Succeed())
}
