package kcp

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kcpenv "github.com/etcd-adapter/etcd-adapter/test/env/kcp"
)

// TestKCPScaleDownAndRollout lets KCP scale a 3-replica control plane down to 1 and then roll
// it out (scale up to 2, remove the old one) while etcd-adapter observes. After each step both
// must agree on the members and on EtcdClusterHealthy; during it every difference is printed
// with etcd-adapter's message. It prints how long KCP took per step and how long after KCP
// etcd-adapter's view showed the same.
func TestKCPScaleDownAndRollout(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	e, err := kcpenv.Start(ctx, kcpenv.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(e.Stop()).To(Succeed()) })
	_, err = e.CreateControlPlane(ctx, 3)
	g.Expect(err).NotTo(HaveOccurred())
	waitAvailable(ctx, g, e, 3)

	o := newObserver(g, e)
	t.Cleanup(func() { g.Expect(o.backend.Close()).To(Succeed()) })
	s := startSampler(ctx, o)
	defer s.stop()

	runStep(ctx, g, e, o, s, "scale 3->1", 1, func(kcp *controlplanev1.KubeadmControlPlane) {
		kcp.Spec.Replicas = ptr.To[int32](1)
	})
	runStep(ctx, g, e, o, s, "rollout", 1, func(kcp *controlplanev1.KubeadmControlPlane) {
		kcp.Spec.Rollout.After = metav1.NewTime(time.Now())
	})
}

// runStep changes KCP's spec, waits until KCP is done (replicas Machines, none of them from
// before when the step is a rollout, Available, not rolling out or scaling), and compares.
func runStep(ctx context.Context, g Gomega, e *kcpenv.Env, o *observer, s *sampler, step string, replicas int32, change func(*controlplanev1.KubeadmControlPlane)) {
	before := o.machineNames(ctx, g)
	start := time.Now()
	updateKCP(ctx, g, e, change)
	rollout := int(replicas) == len(before)
	g.Eventually(func(g Gomega) {
		kcp := waitAvailable(ctx, g, e, replicas)
		g.Expect(kcp.Status.ObservedGeneration).To(Equal(kcp.Generation))
		g.Expect(conditions.IsFalse(kcp, controlplanev1.KubeadmControlPlaneRollingOutCondition)).To(BeTrue())
		g.Expect(conditions.IsFalse(kcp, controlplanev1.KubeadmControlPlaneScalingDownCondition)).To(BeTrue())
		names := o.machineNames(ctx, g)
		g.Expect(names).To(HaveLen(int(replicas)))
		if rollout {
			for _, n := range names {
				g.Expect(before).NotTo(ContainElement(n))
			}
		}
	}).WithTimeout(8*time.Minute).WithPolling(250*time.Millisecond).Should(Succeed(), func() string { return dump(ctx, e) })
	kcpDone := time.Now()
	after := o.machineNames(ctx, g)
	fmt.Printf("[%s] KCP took %v (Machines %v -> %v)\n", step, kcpDone.Sub(start).Round(time.Millisecond), before, after)

	var settled view
	g.Eventually(func() bool {
		var ok bool
		settled, ok = firstSettled(s.since(start), after)
		return ok
	}).WithTimeout(2 * time.Minute).WithPolling(samplePeriod).Should(BeTrue())
	kcpSettled := firstKCPSettled(s.since(start), after)
	fmt.Printf("[%s] KCP's Machines and EtcdClusterHealthy final at %s; etcd-adapter saw the same members and condition at %s (%v later; its snapshot was %v old)\n",
		step, kcpSettled.Format("15:04:05.000"), settled.at.Format("15:04:05.000"),
		settled.at.Sub(kcpSettled).Round(time.Millisecond), settled.at.Sub(settled.observedAt).Round(time.Millisecond))
	report(step, s.since(start))

	final := o.read(ctx, g)
	final.print(step)
	g.Expect(final.members).To(Equal(after))
	g.Expect(same(final.adapter.Cluster, final.kcpCluster)).To(BeTrue(), "EtcdClusterHealthy after %s: KCP %+v, etcd-adapter %+v", step, final.kcpCluster, final.adapter.Cluster)
}

// firstKCPSettled returns when KCP's side first showed the step's final Machines and its final
// EtcdClusterHealthy (True).
func firstKCPSettled(samples []view, machines []string) time.Time {
	for _, v := range samples {
		if slices.Equal(v.machines, machines) && v.kcpCluster.Status == metav1.ConditionTrue {
			return v.at
		}
	}
	return time.Time{}
}

// updateKCP applies change to KCP through KCP's webhook logic.
func updateKCP(ctx context.Context, g Gomega, e *kcpenv.Env, change func(*controlplanev1.KubeadmControlPlane)) {
	kcp := &controlplanev1.KubeadmControlPlane{}
	g.Expect(e.Management.Client.Get(ctx, client.ObjectKeyFromObject(e.Cluster), kcp)).To(Succeed())
	old := kcp.DeepCopy()
	change(kcp)
	g.Expect(kcpenv.AdmitUpdate(ctx, old, kcp)).To(Succeed())
	g.Expect(e.Management.Client.Update(ctx, kcp)).To(Succeed())
}
