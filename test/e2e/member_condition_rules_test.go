package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/cluster-api/util/conditions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcd-adapter/etcd-adapter/api/v1alpha1"
)

// The member condition's own clocks, longer than the suite's (e2eMemberUnhealthyTimeout) so
// that a manager restart fits inside the unhealthy timeout.
const (
	rulesUnhealthyTimeout = 40 * time.Second
	rulesRecoveryTime     = 15 * time.Second
)

var _ = Describe("EtcdAdapterMemberHealthy's rules on a real etcd", func() {
	It("kubeadm: the unhealthy clock survives a manager restart, the condition is Unknown and never False while etcd cannot be observed, and it turns True only after the recovery time", func(ctx SpecContext) {
		c := startKubeadmCluster(ctx, 3, v1alpha1.ModeObserve)
		c.expectMembers(ctx, 3)
		cpe := c.status(ctx)
		before := cpe.DeepCopy()
		cpe.Spec.MemberUnhealthyTimeout = &metav1.Duration{Duration: rulesUnhealthyTimeout}
		cpe.Spec.MemberRecoveryTime = &metav1.Duration{Duration: rulesRecoveryTime}
		Expect(mgmt.Client.Patch(ctx, cpe, client.MergeFrom(before))).To(Succeed())
		c.expectMemberConditions(ctx, metav1.ConditionTrue)
		sick := c.machines["cp-2"]

		By("cp-2's member stops: the clock starts at the first observation that sees it")
		Expect(c.workload.Etcd.StopMember(ctx, c.workload.Etcd.MemberOnNode("cp-2").Name())).To(Succeed())
		var since time.Time
		Eventually(func(g Gomega) {
			ev := c.machineMember(ctx, sick.Name)
			g.Expect(ev).NotTo(BeNil())
			g.Expect(ev.UnhealthySince).NotTo(BeNil())
			since = ev.UnhealthySince.Time
		}, reconcileTimeout).Should(Succeed())

		By("etcd-adapter restarts before the timeout has run: the clock it kept in status goes on")
		Expect(adapter.Stop()).To(Succeed())
		Expect(restoreAdapter()).To(Succeed())
		falseAt := c.waitForMemberCondition(ctx, sick.Name, metav1.ConditionFalse, rulesUnhealthyTimeout+reconcileTimeout)
		Expect(c.machineMember(ctx, sick.Name).UnhealthySince.Time).To(BeTemporally("==", since), "the restart must not restart the clock")
		Expect(falseAt).To(BeTemporally(">=", since.Add(rulesUnhealthyTimeout).Truncate(time.Second)),
			"one unhealthy observation must not turn the condition False before memberUnhealthyTimeout")

		By("the workload apiserver stops answering: nothing can be observed, so every condition is Unknown, none False, and the clock is kept")
		Expect(c.workload.APIServer.StopServing()).To(Succeed())
		DeferCleanup(c.workload.APIServer.StartServing)
		for _, node := range []string{"cp-0", "cp-1", "cp-2"} {
			c.waitForMemberCondition(ctx, c.machines[node].Name, metav1.ConditionUnknown, reconcileTimeout)
		}
		Consistently(func(g Gomega) {
			for _, node := range []string{"cp-0", "cp-1", "cp-2"} {
				g.Expect(c.memberCondition(ctx, c.machines[node].Name).Status).To(Equal(metav1.ConditionUnknown), "Machine of %s", node)
			}
		}, 10*time.Second, time.Second).Should(Succeed())
		Expect(c.machineMember(ctx, sick.Name).UnhealthySince.Time).To(BeTemporally("==", since), "an observation that could not tell must not end the clock")

		By("the apiserver answers again and cp-2's member is back: True only once healthy for memberRecoveryTime")
		Expect(c.workload.APIServer.StartServing()).To(Succeed())
		Expect(c.workload.Etcd.MemberOnNode("cp-2").Restart(ctx)).To(Succeed())
		trueAt := c.waitForMemberCondition(ctx, sick.Name, metav1.ConditionTrue, rulesRecoveryTime+reconcileTimeout)
		healthySince := c.machineMember(ctx, sick.Name).HealthySince
		Expect(healthySince).NotTo(BeNil())
		Expect(trueAt).To(BeTemporally(">=", healthySince.Add(rulesRecoveryTime).Truncate(time.Second)),
			"a recovered member must stay False until it was healthy for memberRecoveryTime")
	}, SpecTimeout(8*time.Minute))
})

// machineMember is the Machine's entry of status.machineMembers; nil when it has none.
func (c *testCluster) machineMember(ctx context.Context, machine string) *v1alpha1.MachineMemberStatus {
	for _, mm := range c.status(ctx).Status.MachineMembers {
		if mm.MachineName == machine {
			return &mm
		}
	}
	return nil
}

// memberCondition is the Machine's EtcdAdapterMemberHealthy condition; a zero condition when it
// has none.
func (c *testCluster) memberCondition(ctx context.Context, machine string) metav1.Condition {
	m := &clusterv1.Machine{}
	Expect(mgmt.Client.Get(ctx, client.ObjectKey{Namespace: c.cluster.Namespace, Name: machine}, m)).To(Succeed())
	if got := conditions.Get(m, v1alpha1.MemberHealthyMachineCondition); got != nil {
		return *got
	}
	return metav1.Condition{}
}

// waitForMemberCondition waits until the Machine's EtcdAdapterMemberHealthy condition has the
// status and returns when it last changed to it.
func (c *testCluster) waitForMemberCondition(ctx context.Context, machine string, status metav1.ConditionStatus, timeout time.Duration) time.Time {
	var at time.Time
	Eventually(func(g Gomega) {
		got := c.memberCondition(ctx, machine)
		g.Expect(got.Status).To(Equal(status), "Machine %s: %s %s", machine, got.Reason, got.Message)
		at = got.LastTransitionTime.Time
	}, timeout, time.Second).Should(Succeed())
	return at
}
