package kcp

import (
	"context"
	"fmt"
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

// TestKCPLifecycle runs KubeadmControlPlane v1.14.2 with etcd-adapter beside it (its
// controllers and webhooks, as its manager runs them; the ControlPlaneEtcd its creation
// controller makes is in Observe mode) and walks issue 11's points:
//
//  1. KCP builds a 3-replica control plane from nothing; etcd-adapter's ControlPlaneEtcd shows
//     the same members and health, and KCP's Machines carry no etcd-adapter hook.
//  3. KCP remediates a Machine a MachineHealthCheck marked. With a second member unhealthy in a
//     way KCP sees (a NOSPACE alarm) KCP refuses to remediate and etcd-adapter's status says why
//     in the same terms; with a second member stopped (which KCP v1.14.2 does not see) KCP tries,
//     and the quorum guard refuses KCP's Delete, naming the member.
//  4. A person's deletion of a healthy Machine while a member is down is refused by the quorum
//     guard; deleting the down member's Machine goes through, KCP's hook removes the member
//     and KCP scales back up.
//  2. KCP scales 3->1 and rolls out.
//
// In every KCP step no deletion by KCP is refused by the quorum guard, both sides are sampled
// and every difference in EtcdClusterHealthy is printed with etcd-adapter's evidence, and
// (point 5) etcd-adapter's status converges on KCP's final state (within statusConvergence of
// the step's end); KCP's time per step and how long after KCP etcd-adapter's status showed the
// same are printed. `go test -short` stops after point 1.
func TestKCPLifecycle(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	suiteStart := time.Now()
	e, err := kcpenv.Start(ctx, kcpenv.Options{EtcdAdapter: true})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { g.Expect(e.Stop()).To(Succeed()) })
	fmt.Printf("management cluster, KCP, CABPK, Cluster API and etcd-adapter started in %v\n", time.Since(suiteStart).Round(time.Millisecond))

	start := time.Now()
	_, err = e.CreateControlPlane(ctx, 3)
	g.Expect(err).NotTo(HaveOccurred())
	kcp := waitAvailable(ctx, g, e, 3)
	fmt.Printf("[create] KCP: 3-replica control plane from nothing to Available in %v\n", time.Since(start).Round(time.Millisecond))
	printConditions(kcp)

	o := newObserver(g, e)
	t.Cleanup(func() { g.Expect(o.backend.Close()).To(Succeed()) })
	adoptControlPlaneEtcd(ctx, g, o)
	compareCreated(ctx, g, o)
	expectNoAdapterHooks(ctx, g, o)
	if testing.Short() {
		fmt.Println("-short: remediation, quorum refusals, scale-down and rollout skipped")
		return
	}

	s := startSampler(ctx, o)
	defer s.stop()
	mhc := createMachineHealthCheck(ctx, g, e)
	remediate(ctx, g, e, o, s, mhc)
	victim, alarmed, _ := roles(ctx, g, o)
	kcpRefusesRemediation(ctx, g, e, o, mhc, victim, alarmed)
	// Note: roles again, since leadership may have moved meanwhile.
	victim, down, healthy := roles(ctx, g, o)
	refuseRemediation(ctx, g, e, o, victim, down, healthy)
	personDeletes(ctx, g, e, o, s, mhc, victim, down, healthy)
	g.Expect(e.Management.Client.Delete(ctx, mhc)).To(Succeed())
	runStep(ctx, g, e, o, s, "scale 3->1", 1, nil, kcpActs, func() {
		updateKCP(ctx, g, e, func(kcp *controlplanev1.KubeadmControlPlane) { kcp.Spec.Replicas = ptr.To[int32](1) })
	})
	before := o.machineNames(ctx, g)
	runStep(ctx, g, e, o, s, "rollout", 1, before, kcpActs, func() {
		updateKCP(ctx, g, e, func(kcp *controlplanev1.KubeadmControlPlane) { kcp.Spec.Rollout.After = metav1.NewTime(time.Now()) })
	})
	summarizeGuard(g, e, victim)
	fmt.Printf("TestKCPLifecycle took %v\n", time.Since(suiteStart).Round(time.Millisecond))
}

// compareCreated waits until the ControlPlaneEtcd shows one member per KCP Machine (named after
// its Node) and KCP's EtcdClusterHealthy, then asserts a fresh observation agrees too, Machine
// by Machine.
func compareCreated(ctx context.Context, g Gomega, o *observer) {
	machines := o.machineNames(ctx, g)
	start := time.Now()
	var v view
	g.Eventually(func(g Gomega) {
		v = o.read(ctx, g)
		g.Expect(settledCPE(v, machines)).To(BeTrue(), "ControlPlaneEtcd %s=%s/%s members %v; KCP %s=%s/%s Machines %v",
			v.cpe.cluster.Type, v.cpe.cluster.Status, v.cpe.cluster.Reason, v.cpe.members, v.kcpCluster.Type, v.kcpCluster.Status, v.kcpCluster.Reason, machines)
	}).WithTimeout(waitTimeout).WithPolling(250 * time.Millisecond).Should(Succeed())
	fmt.Printf("[create] ControlPlaneEtcd showed KCP's members and EtcdClusterHealthy %v after KCP was Available\n", time.Since(start).Round(time.Millisecond))
	v.print("create")
	g.Expect(v.cpe.cluster.Status).To(Equal(metav1.ConditionTrue))
	for _, name := range machines {
		g.Expect(v.cpe.health[name].MachineName).To(Equal(name))
		g.Expect(string(v.cpe.health[name].Health)).To(Equal("Healthy"), "member %s", name)
	}
	g.Expect(v.cpe.faultTolerance).To(HaveValue(BeEquivalentTo(1)))
	g.Expect(v.observeErr).NotTo(HaveOccurred())
	g.Expect(v.members).To(Equal(machines))
	g.Expect(same(v.adapter.Cluster, v.kcpCluster)).To(BeTrue(), "EtcdClusterHealthy: KCP %+v, etcd-adapter %+v", v.kcpCluster, v.adapter.Cluster)
	for _, name := range machines {
		g.Expect(v.kcpMachines).To(HaveKey(name))
		g.Expect(same(v.adapter.Machines[name], v.kcpMachines[name])).To(BeTrue(), "EtcdMemberHealthy of %s: KCP %+v, etcd-adapter %+v", name, v.kcpMachines[name], v.adapter.Machines[name])
	}
}

// createMachineHealthCheck creates a MachineHealthCheck over KCP's Machines (Node Ready False
// for 1 s) and waits until it counted every Machine healthy, so its Node watch exists: a Ready
// change before that would only be seen at the next resync.
func createMachineHealthCheck(ctx context.Context, g Gomega, e *kcpenv.Env) *clusterv1.MachineHealthCheck {
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
	waitMHCHealthy(ctx, g, e, mhc, 3)
	return mhc
}

func waitMHCHealthy(ctx context.Context, g Gomega, e *kcpenv.Env, mhc *clusterv1.MachineHealthCheck, n int32) {
	g.Eventually(func(g Gomega) {
		g.Expect(e.Management.Client.Get(ctx, client.ObjectKeyFromObject(mhc), mhc)).To(Succeed())
		g.Expect(mhc.Status.ExpectedMachines).To(HaveValue(BeEquivalentTo(n)))
		g.Expect(mhc.Status.CurrentHealthy).To(HaveValue(BeEquivalentTo(n)))
	}).WithTimeout(waitTimeout).WithPolling(250 * time.Millisecond).Should(Succeed())
}

// remediate makes one Node NotReady and waits until KCP replaced that Machine (point 3, first
// half).
func remediate(ctx context.Context, g Gomega, e *kcpenv.Env, o *observer, s *sampler, mhc *clusterv1.MachineHealthCheck) {
	victim := o.machineNames(ctx, g)[0]
	fmt.Printf("[remediation] Node %s NotReady; MachineHealthCheck marks it, KCP remediates\n", victim)
	runStep(ctx, g, e, o, s, "remediation", 3, []string{victim}, kcpActs, func() {
		g.Expect(e.NodeNotReady(ctx, victim)).To(Succeed())
	})
	waitMHCHealthy(ctx, g, e, mhc, 3)
}

// kcpActs and personActs say who deletes Machines in a step: KCP (its deletions are checked
// against the quorum guard's decisions) or a person.
const (
	kcpActs    = true
	personActs = false
)

// runStep does act (a change of KCP's spec, or a fault), waits until KCP is done (replicas
// Machines, none of gone, Available, not rolling out, scaling down or remediating), and
// compares. When KCP deletes the Machines (byKCP), every Machine that went is asserted to have
// passed the quorum guard, allowed, and no deletion by KCP in the step was refused.
func runStep(ctx context.Context, g Gomega, e *kcpenv.Env, o *observer, s *sampler, step string, replicas int32, gone []string, byKCP bool, act func()) {
	before := o.machineNames(ctx, g)
	start := time.Now()
	act()
	g.Eventually(func(g Gomega) {
		kcp := waitAvailable(ctx, g, e, replicas)
		g.Expect(kcp.Status.ObservedGeneration).To(Equal(kcp.Generation))
		g.Expect(conditions.IsFalse(kcp, controlplanev1.KubeadmControlPlaneRollingOutCondition)).To(BeTrue())
		g.Expect(conditions.IsFalse(kcp, controlplanev1.KubeadmControlPlaneScalingDownCondition)).To(BeTrue())
		g.Expect(conditions.IsFalse(kcp, controlplanev1.KubeadmControlPlaneScalingUpCondition)).To(BeTrue())
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
	expectStatusConverges(g, s, step, start, after)
	report(step, s.since(start))
	if byKCP {
		expectKCPDeletionsAllowed(g, e, step, start, without(before, after))
	}

	final := o.read(ctx, g)
	final.print(step)
	g.Expect(final.members).To(Equal(after))
	g.Expect(same(final.adapter.Cluster, final.kcpCluster)).To(BeTrue(), "EtcdClusterHealthy after %s: KCP %+v, etcd-adapter %+v", step, final.kcpCluster, final.adapter.Cluster)
	expectNoAdapterHooks(ctx, g, o)
}

// without returns the names in a that are not in b.
func without(a, b []string) []string {
	var out []string
	for _, n := range a {
		if !slices.Contains(b, n) {
			out = append(out, n)
		}
	}
	return out
}

// statusConvergence bounds how long etcd-adapter's side may take to show a step's final state
// once KCP finished the step. The ControlPlaneEtcd status is rewritten on every observation
// (observationInterval, 5 s) and on Machine and Node events, so 2 minutes is 24 intervals: room
// for a loaded machine, not a speed goal (the lag itself is printed).
const statusConvergence = 2 * time.Minute

// expectStatusConverges asserts that etcd-adapter's ControlPlaneEtcd status and a fresh
// observation show the step's final Machines as members and KCP's EtcdClusterHealthy in a sample
// taken at or after KCP's side first showed them with a True EtcdClusterHealthy: the status
// converges on KCP's final state, not on a state it passed through. The bound is the Eventually's
// timeout, statusConvergence, counted from the end of KCP's step. It prints how long after KCP
// each side showed it (the staleness of etcd-adapter's status).
func expectStatusConverges(g Gomega, s *sampler, step string, start time.Time, machines []string) {
	var kcpSettled time.Time
	var cpe, fresh view
	g.Eventually(func(g Gomega) {
		var ok bool
		kcpSettled, ok = firstKCPSettled(s.since(start), machines)
		g.Expect(ok).To(BeTrue(), "KCP's side has not shown Machines %v with EtcdClusterHealthy True", machines)
		settled := s.since(kcpSettled)
		cpe, ok = firstSettled(settled, func(v view) bool { return settledCPE(v, machines) })
		g.Expect(ok).To(BeTrue(), "the ControlPlaneEtcd status has not shown members %v and KCP's EtcdClusterHealthy since KCP did at %s",
			machines, kcpSettled.Format("15:04:05.000"))
		fresh, ok = firstSettled(settled, func(v view) bool { return settledFresh(v, machines) })
		g.Expect(ok).To(BeTrue(), "a fresh observation has not shown members %v and KCP's EtcdClusterHealthy since KCP did at %s",
			machines, kcpSettled.Format("15:04:05.000"))
	}).WithTimeout(statusConvergence).WithPolling(samplePeriod).Should(Succeed())
	fmt.Printf("[%s] KCP final (Machines and EtcdClusterHealthy=True) first sampled at %s; etcd-adapter's ControlPlaneEtcd status showed the same at %s (staleness %v); a fresh Observe at %s (%v; that observation took %v)\n",
		step, kcpSettled.Format("15:04:05.000"), cpe.at.Format("15:04:05.000"), cpe.at.Sub(kcpSettled).Round(time.Millisecond),
		fresh.at.Format("15:04:05.000"), fresh.at.Sub(kcpSettled).Round(time.Millisecond), fresh.observedAt.Sub(fresh.at).Round(time.Millisecond))
}

// firstKCPSettled returns when KCP's side first showed the step's final Machines and a True
// EtcdClusterHealthy, and false when it has not.
func firstKCPSettled(samples []view, machines []string) (time.Time, bool) {
	for _, v := range samples {
		if slices.Equal(v.machines, machines) && v.kcpCluster.Status == metav1.ConditionTrue {
			return v.at, true
		}
	}
	return time.Time{}, false
}

// expectKCPDeletionsAllowed asserts that the quorum guard was asked about every Machine KCP
// deleted in the step (gone) and refused no deletion by KCP.
func expectKCPDeletionsAllowed(g Gomega, e *kcpenv.Env, step string, start time.Time, gone []string) {
	var asked []string
	for _, d := range e.GuardDecisions() {
		if d.At.Before(start) || d.User != kcpenv.KCPUser {
			continue
		}
		g.Expect(d.Allowed).To(BeTrue(), "[%s] the quorum guard refused KCP's deletion of Machine %s: %s", step, d.Machine, d.Message)
		asked = append(asked, d.Machine)
	}
	for _, n := range gone {
		g.Expect(asked).To(ContainElement(n), "[%s] KCP deleted Machine %s without the quorum guard being asked", step, n)
	}
	fmt.Printf("[%s] quorum guard: %d DELETEs by KCP (%v), all allowed\n", step, len(asked), asked)
}

// summarizeGuard prints every decision of the quorum guard and asserts that the only
// deletions by KCP it refused were of refused, the Machine KCP tried to remediate while another
// member was down (refuseRemediation).
func summarizeGuard(g Gomega, e *kcpenv.Env, refused string) {
	allowedKCP, refusedKCP := 0, 0
	for _, d := range e.GuardDecisions() {
		who := d.User
		switch d.User {
		case kcpenv.KCPUser:
			who = "KCP"
			if d.Allowed {
				allowedKCP++
			} else {
				refusedKCP++
				g.Expect(d.Machine).To(Equal(refused), "the quorum guard refused KCP's deletion of Machine %s: %s", d.Machine, d.Message)
			}
		case kcpenv.PersonUser:
			who = "person"
		}
		fmt.Printf("quorum guard %s: DELETE Machine %s by %s (dry run %v): allowed=%v %s %v\n", d.At.Format("15:04:05.000"), d.Machine, who, d.DryRun, d.Allowed, oneLine(d.Message), d.Warnings)
	}
	fmt.Printf("quorum guard: %d DELETEs by KCP allowed; %d refused, all of Machine %s while another member was down\n", allowedKCP, refusedKCP, refused)
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
