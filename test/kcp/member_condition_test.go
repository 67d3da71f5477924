package kcp

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	controlplanev1 "sigs.k8s.io/cluster-api/api/controlplane/kubeadm/v1beta2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
	kcpenv "github.com/etcd-adapter/etcd-adapter/test/env/kcp"
)

// Timings of the ControlPlaneEtcd in TestKCPMemberConditionRemediation: short, so that the
// condition turns False within seconds; the defaults (2m and 1m) are for real clusters.
const (
	kcpMemberUnhealthyTimeout = 10 * time.Second
	kcpMemberRecoveryTime     = 5 * time.Second
)

// TestKCPMemberConditionRemediation closes issue 32's loop beside the real KubeadmControlPlane
// v1.14.2: a control-plane Machine whose stacked etcd member stopped while its Node stays Ready
// is replaced, driven only by etcd-adapter's EtcdAdapterMemberHealthy condition.
//
//  1. The ControlPlaneEtcd is in Manage mode, so every Machine carries etcd-adapter's
//     pre-terminate hook beside KCP's kcp-cleanup; the MachineHealthCheck is the first one of
//     config/samples/machinehealthcheck-etcd-member.yaml (EtcdAdapterMemberHealthy False, no
//     Node condition).
//  2. The member of a Machine that is not the etcd leader is killed; its Node and Pods stay
//     Ready, and KCP v1.14.2 keeps its own EtcdMemberHealthy True (it reads another member's
//     list, see refuseRemediation).
//  3. etcd-adapter turns the Machine's condition False after memberUnhealthyTimeout; the
//     MachineHealthCheck marks it on that condition; KCP remediates it as
//     reconcileUnhealthyMachines does (sigs.k8s.io/cluster-api v1.14.2
//     controlplane/kubeadm/reconcilers/kubeadmcontrolplane/remediation.go): its
//     canSafelyRemediateMachine finds the two other members healthy, it deletes the Machine and
//     records status.lastRemediation; the quorum guard allows KCP's Delete.
//  4. After the drain, etcd-adapter's hook removes the member (etcd's own list loses exactly
//     it, once), KCP's kcp-cleanup finds it gone, the Machine goes, KCP scales back up and the
//     replacement joins as a learner and is promoted; its condition turns True.
//  5. Quorum held throughout: at every sample of the servers' raft state, a quorum of the
//     voters was running.
//
// Without the condition nothing marks the Machine (the MachineHealthCheck has no other check),
// so the wait in 3 fails.
func TestKCPMemberConditionRemediation(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the remediation runs a whole KCP control plane (about 4 min)")
	}
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	suiteStart := time.Now()
	e, o := startManagedControlPlane(ctx, t, g)
	setKCPMemberTimeouts(ctx, g, o)
	expectMemberConditions(ctx, g, o, metav1.ConditionTrue)
	fmt.Printf("[member condition] 3 replicas Available, both hooks and EtcdAdapterMemberHealthy True on every Machine after %v\n", time.Since(suiteStart).Round(time.Millisecond))

	members := startMembershipLog(ctx, g, e)
	defer members.stop()
	quorum := startQuorumLog(ctx, e.Etcd())
	defer quorum.stop()
	mhc := createSampleMHC(ctx, g, e)
	waitMHCHealthy(ctx, g, e, mhc, 3)

	victim := nonLeader(ctx, g, o)
	before := o.machineNames(ctx, g)
	died := time.Now()
	fmt.Printf("[member condition] the etcd member of %s is killed; its Node stays Ready\n", victim)
	g.Expect(e.MemberDown(victim)).To(Succeed())

	marked, deleting := expectRemediatedOnCondition(ctx, g, e, o, victim)
	fmt.Printf("[member condition] EtcdAdapterMemberHealthy False and MachineHealthCheck mark after %v, KCP's Delete after %v\n",
		marked.Sub(died).Round(100*time.Millisecond), deleting.Sub(died).Round(100*time.Millisecond))

	after := expectReplaced(ctx, g, o, members, before, victim)
	// KCP records the remediation in its status once the replacement carries it
	// (RemediationForAnnotation, copied from RemediationInProgressAnnotation at the scale-up).
	g.Eventually(func(g Gomega) {
		kcp := &controlplanev1.KubeadmControlPlane{}
		g.Expect(e.Management.Client.Get(ctx, client.ObjectKeyFromObject(e.Cluster), kcp)).To(Succeed())
		g.Expect(kcp.Status.LastRemediation.Machine).To(Equal(victim), "KCP must record the remediation of %s", victim)
	}).WithTimeout(time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
	fmt.Printf("[member condition] replacement joined: Machines %v -> %v, %v after the member died\n", before, after, time.Since(died).Round(100*time.Millisecond))
	expectMemberConditions(ctx, g, o, metav1.ConditionTrue)
	waitMHCHealthy(ctx, g, e, mhc, 3)

	low, n := quorum.lowest()
	g.Expect(n).To(BeNumerically(">", 0), "the quorum log took no sample")
	g.Expect(low.margin()).To(BeNumerically(">=", 0), "etcd lost quorum during the remediation: %s", low)
	fmt.Printf("[member condition] quorum held at all %d samples; lowest: %s\n", n, low)
	expectKCPDeletionsAllowed(g, e, "member condition", died, []string{victim})
	fmt.Printf("TestKCPMemberConditionRemediation took %v\n", time.Since(suiteStart).Round(time.Millisecond))
}

// expectRemediatedOnCondition waits until etcd-adapter's condition on victim is False, the
// MachineHealthCheck marked victim on that condition (its message names it) and KCP deleted
// victim while its Node was Ready. It returns when the mark and the deletion were first seen.
func expectRemediatedOnCondition(ctx context.Context, g Gomega, e *kcpenv.Env, o *observer, victim string) (marked, deleting time.Time) {
	g.Eventually(func(g Gomega) {
		m := &clusterv1.Machine{}
		g.Expect(e.Management.Client.Get(ctx, client.ObjectKey{Namespace: e.Cluster.Namespace, Name: victim}, m)).To(Succeed())
		cond := conditions.Get(m, v1alpha1.MemberHealthyMachineCondition)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Status).To(Equal(metav1.ConditionFalse), "%+v", cond)
		g.Expect(cond.Reason).To(Equal(v1alpha1.EtcdMemberNotHealthyReason))
		mhc := conditions.Get(m, clusterv1.MachineHealthCheckSucceededCondition)
		g.Expect(mhc).NotTo(BeNil())
		g.Expect(mhc.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(mhc.Message).To(ContainSubstring("Condition " + v1alpha1.MemberHealthyMachineCondition))
		kcpCond := machineCondition(m, controlplanev1.KubeadmControlPlaneMachineEtcdMemberHealthyCondition)
		g.Expect(kcpCond.Status).To(Equal(metav1.ConditionTrue), "KCP v1.14.2 does not see the killed member: only etcd-adapter's condition marks it")
	}).WithTimeout(waitTimeout).WithPolling(200*time.Millisecond).Should(Succeed(), func() string { return dump(ctx, e) + adapterProgress(ctx, o) })
	marked = time.Now()
	g.Eventually(func(g Gomega) {
		m := &clusterv1.Machine{}
		err := e.Management.Client.Get(ctx, client.ObjectKey{Namespace: e.Cluster.Namespace, Name: victim}, m)
		if err == nil {
			g.Expect(m.DeletionTimestamp.IsZero()).To(BeFalse())
		}
	}).WithTimeout(waitTimeout).WithPolling(200*time.Millisecond).Should(Succeed(), func() string { return dump(ctx, e) })
	deleting = time.Now()
	n := &corev1.Node{}
	g.Expect(e.WorkloadClient().Get(ctx, client.ObjectKey{Name: victim}, n)).To(Succeed())
	g.Expect(nodeReady(n)).To(BeTrue(), "Node %s must stay Ready: only etcd's member is broken", victim)
	return marked, deleting
}

// expectReplaced waits until KCP is done (3 Machines, Available, none deleting, victim gone),
// then asserts that etcd's members are the Machines', that etcd lost exactly victim's member,
// once, and that etcd-adapter removed it (one MemberRemoved Event, its hook released). It
// returns the Machines after.
func expectReplaced(ctx context.Context, g Gomega, o *observer, members *membershipLog, before []string, victim string) []string {
	removedBefore := len(members.removals())
	g.Eventually(func(g Gomega) {
		kcp := waitAvailable(ctx, g, o.e, 3)
		g.Expect(conditions.IsFalse(kcp, controlplanev1.KubeadmControlPlaneScalingUpCondition)).To(BeTrue())
		g.Expect(conditions.IsFalse(kcp, controlplanev1.KubeadmControlPlaneRemediatingCondition)).To(BeTrue())
		ms := o.machines(ctx, g)
		g.Expect(ms).To(HaveLen(3))
		for _, m := range ms {
			g.Expect(m.DeletionTimestamp.IsZero()).To(BeTrue(), "Machine %s is still deleting; hooks %v", m.Name, preTerminateHooks(m))
			g.Expect(m.Name).NotTo(Equal(victim))
		}
	}).WithTimeout(waitTimeout).WithPolling(250*time.Millisecond).Should(Succeed(), func() string { return dump(ctx, o.e) + adapterProgress(ctx, o) })
	after := o.machineNames(ctx, g)
	g.Expect(without(after, before)).To(HaveLen(1), "one replacement Machine")
	g.Eventually(func(g Gomega) {
		current, err := o.e.EtcdMembers(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(current).To(Equal(after))
	}).WithTimeout(time.Minute).WithPolling(250 * time.Millisecond).Should(Succeed())
	g.Eventually(func() []string { return members.removals()[removedBefore:] }).WithTimeout(time.Minute).WithPolling(membershipPoll).
		Should(ConsistOf(victim), "etcd must lose exactly the member of %s, once", victim)
	g.Eventually(func(g Gomega) []string { return machineEventReasons(ctx, g, o, victim) }).WithTimeout(time.Minute).WithPolling(250*time.Millisecond).
		Should(ContainElement(v1alpha1.EventHookReleased), "etcd-adapter must have released the hook of Machine %s", victim)
	g.Expect(removedEvents(ctx, g, o, victim)).To(Equal(1), "etcd-adapter must have removed member %s once", victim)
	return after
}

// nonLeader returns a Machine whose member is not the etcd leader, so that no leadership move
// is part of the remediation (KCP's forwardEtcdLeadership is tested upstream).
func nonLeader(ctx context.Context, g Gomega, o *observer) string {
	leader, err := o.e.Etcd().Leader()
	g.Expect(err).NotTo(HaveOccurred())
	for _, n := range o.machineNames(ctx, g) {
		if n != leader.NodeName() {
			return n
		}
	}
	g.Expect(false).To(BeTrue(), "no Machine besides the leader's")
	return ""
}

// createSampleMHC creates the first MachineHealthCheck of
// config/samples/machinehealthcheck-etcd-member.yaml for the Cluster, its timeoutSeconds cut to
// 1 so that the test does not wait a minute on top of memberUnhealthyTimeout.
func createSampleMHC(ctx context.Context, g Gomega, e *kcpenv.Env) *clusterv1.MachineHealthCheck {
	raw, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "machinehealthcheck-etcd-member.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	mhc := &clusterv1.MachineHealthCheck{}
	g.Expect(yaml.UnmarshalStrict([]byte(strings.Split(string(raw), "\n---\n")[0]), mhc)).To(Succeed())
	g.Expect(mhc.Spec.Checks.UnhealthyNodeConditions).To(BeEmpty(), "the sample must check etcd-adapter's condition only")
	mhc.Namespace, mhc.Spec.ClusterName = e.Cluster.Namespace, e.Cluster.Name
	mhc.Name = strings.Replace(mhc.Name, "my-cluster", e.Cluster.Name, 1)
	for i := range mhc.Spec.Checks.UnhealthyMachineConditions {
		mhc.Spec.Checks.UnhealthyMachineConditions[i].TimeoutSeconds = ptr.To[int32](1)
	}
	g.Expect(e.Management.Client.Create(ctx, mhc)).To(Succeed())
	return mhc
}

// setKCPMemberTimeouts sets the ControlPlaneEtcd's member timeouts to the test's and waits for
// a pass that saw them.
func setKCPMemberTimeouts(ctx context.Context, g Gomega, o *observer) {
	cpe, err := o.controlPlaneEtcd(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	patch := client.MergeFrom(cpe.DeepCopy())
	cpe.Spec.MemberUnhealthyTimeout = &metav1.Duration{Duration: kcpMemberUnhealthyTimeout}
	cpe.Spec.MemberRecoveryTime = &metav1.Duration{Duration: kcpMemberRecoveryTime}
	g.Expect(o.e.Management.Client.Patch(ctx, cpe, patch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got, err := o.controlPlaneEtcd(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.Status.ObservedGeneration).To(BeNumerically(">=", cpe.Generation))
	}).WithTimeout(waitTimeout).WithPolling(250 * time.Millisecond).Should(Succeed())
}

// expectMemberConditions waits until every KCP Machine has etcd-adapter's condition with the
// status.
func expectMemberConditions(ctx context.Context, g Gomega, o *observer, status metav1.ConditionStatus) {
	g.Eventually(func(g Gomega) {
		for _, m := range o.machines(ctx, g) {
			cond := conditions.Get(m, v1alpha1.MemberHealthyMachineCondition)
			g.Expect(cond).NotTo(BeNil(), "Machine %s", m.Name)
			g.Expect(cond.Status).To(Equal(status), "Machine %s: %+v", m.Name, cond)
		}
	}).WithTimeout(waitTimeout).WithPolling(250*time.Millisecond).Should(Succeed(), func() string { return dump(ctx, o.e) })
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
